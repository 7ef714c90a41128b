//! The box-decomposition sweep. A fixture's decision depends on the params only through
//! comparisons `value op param`, each a half-line on one axis: it flips at one grid index. The
//! split indices of all of a fixture's comparisons cut the grid into boxes on which every
//! comparison, and so the decision, is constant. Each box is decided once (by the real
//! evaluator, at its corner) and added to d-dimensional difference arrays; prefix sums then
//! give every grid point's counts. Cost: O(fixtures · boxes · 2^d + grid · d), instead of
//! O(grid · fixtures) for the brute force.

use rayon::prelude::*;

use super::grid::Grid;
use super::{Cell, Oracle};
use crate::policy::decide;
use crate::policy::eval::param_comparisons;
use crate::policy::model::{Op, Policy};
use crate::record::Record;

/// Agree/under/over difference arrays over the grid, each axis one longer than the grid's.
struct Diff {
    agree: Vec<i32>,
    under: Vec<i32>,
    over: Vec<i32>,
}

impl Diff {
    fn new(len: usize) -> Diff {
        Diff {
            agree: vec![0; len],
            under: vec![0; len],
            over: vec![0; len],
        }
    }
    fn merge(mut self, other: Diff) -> Diff {
        for (a, b) in [
            (&mut self.agree, &other.agree),
            (&mut self.under, &other.under),
            (&mut self.over, &other.over),
        ] {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        }
        self
    }
}

/// Grid indices `< split` and `>= split` give different truth values for `x op t`.
fn splits(values: &[f64], op: Op, x: f64, out: &mut Vec<usize>) {
    let at_or_below = values.partition_point(|v| *v <= x);
    let below = values.partition_point(|v| *v < x);
    match op {
        // x >= t  ⇔  t <= x;  x < t is its negation.
        Op::Ge | Op::Lt => out.push(at_or_below),
        // x > t  ⇔  t < x;  x <= t is its negation.
        Op::Gt | Op::Le => out.push(below),
        // t == x holds on [below, at_or_below).
        Op::Eq | Op::Ne => {
            out.push(below);
            out.push(at_or_below);
        }
        Op::In | Op::NotIn => {}
    }
}

/// Sweeps every grid point (flat row-major index, as [`Grid::coords`]) exactly.
pub fn sweep(
    policy: &Policy,
    cases: &[(&Record, &Oracle)],
    grid: &Grid,
    base: &[f64],
) -> Vec<Cell> {
    let d = grid.axes.len();
    let sizes: Vec<usize> = grid.axes.iter().map(|a| a.values.len()).collect();
    let ext: Vec<usize> = sizes.iter().map(|n| n + 1).collect();
    let len: usize = ext.iter().product();
    // Row-major strides of the extended array.
    let mut strides = vec![1usize; d];
    for j in (0..d.saturating_sub(1)).rev() {
        strides[j] = strides[j + 1] * ext[j + 1];
    }
    let axis_of: Vec<Option<usize>> = (0..policy.params.len())
        .map(|p| grid.axes.iter().position(|a| a.param == p))
        .collect();

    let diff = cases
        .par_iter()
        .fold(
            || Diff::new(len),
            |mut acc, (record, oracle)| {
                // Segment boundaries per axis.
                let mut cuts: Vec<Vec<usize>> = sizes.iter().map(|n| vec![0, *n]).collect();
                for (param, op, x) in param_comparisons(policy, record) {
                    if let Some(j) = axis_of[param] {
                        splits(&grid.axes[j].values, op, x, &mut cuts[j]);
                    }
                }
                for c in cuts.iter_mut() {
                    c.sort_unstable();
                    c.dedup();
                }
                let segments: Vec<usize> = cuts.iter().map(|c| c.len() - 1).collect();
                let boxes: usize = segments.iter().product();
                let mut seg = vec![0usize; d];
                let mut params = base.to_vec();
                for _ in 0..boxes {
                    // The box is [cuts[j][seg[j]], cuts[j][seg[j] + 1]) on each axis.
                    for j in 0..d {
                        params[grid.axes[j].param] = grid.axes[j].values[cuts[j][seg[j]]];
                    }
                    let v = oracle.judge(policy, &decide(policy, record, &params));
                    if v.agree || v.under || v.over {
                        for corner in 0..(1usize << d) {
                            let mut idx = 0;
                            let mut sign = 1i32;
                            for j in 0..d {
                                let upper = corner >> j & 1 == 1;
                                let at = if upper {
                                    cuts[j][seg[j] + 1]
                                } else {
                                    cuts[j][seg[j]]
                                };
                                if upper {
                                    sign = -sign;
                                }
                                idx += at * strides[j];
                            }
                            acc.agree[idx] += sign * i32::from(v.agree);
                            acc.under[idx] += sign * i32::from(v.under);
                            acc.over[idx] += sign * i32::from(v.over);
                        }
                    }
                    // Next box (mixed radix, last axis fastest).
                    for j in (0..d).rev() {
                        seg[j] += 1;
                        if seg[j] < segments[j] {
                            break;
                        }
                        seg[j] = 0;
                    }
                }
                acc
            },
        )
        .reduce(|| Diff::new(len), Diff::merge);

    let mut arrays = [diff.agree, diff.under, diff.over];
    // Prefix sums along each axis turn corner deltas into counts. For axis j the array is
    // `outer × ext[j] × stride` (row-major); adding row k-1 into row k runs over contiguous
    // memory.
    for arr in arrays.iter_mut() {
        for j in 0..d {
            let stride = strides[j];
            let outer = len / (ext[j] * stride);
            for o in 0..outer {
                let block = o * ext[j] * stride;
                for k in 1..ext[j] {
                    let (prev, cur) = arr[block + (k - 1) * stride..block + (k + 1) * stride]
                        .split_at_mut(stride);
                    cur.iter_mut().zip(prev.iter()).for_each(|(c, p)| *c += *p);
                }
            }
        }
    }
    // Read the grid's cells (every coordinate below its axis size) in flat order.
    let total = usize::try_from(grid.size()).unwrap_or(0);
    let mut out = Vec::with_capacity(total);
    let mut coords = vec![0usize; d];
    let mut idx = 0usize;
    for _ in 0..total {
        out.push(Cell {
            agree: arrays[0][idx].max(0) as u32,
            under: arrays[1][idx].max(0) as u32,
            over: arrays[2][idx].max(0) as u32,
        });
        for j in (0..d).rev() {
            coords[j] += 1;
            idx += strides[j];
            if coords[j] < sizes[j] {
                break;
            }
            idx -= coords[j] * strides[j];
            coords[j] = 0;
        }
    }
    out
}
