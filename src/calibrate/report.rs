//! The calibration report of one family: computed here, rendered by the CLI. The serialized
//! form is the public `calibrate --format json` shape (DESIGN §11), extended only by adding
//! fields.

use std::collections::VecDeque;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::grid::Grid;
use super::{Case, Cell, usable};
use crate::policy::model::Policy;
use crate::policy::transform;

#[derive(Debug, Clone, Serialize)]
pub struct PolicyRef {
    pub name: String,
    pub version: String,
    pub digest: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Fixtures {
    pub total: usize,
    pub usable: usize,
    pub excluded: usize,
    /// Why each excluded fixture was left out.
    pub excluded_cases: Vec<Excluded>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Excluded {
    pub id: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub calls: usize,
    pub cached: usize,
    pub backend: String,
    /// True when the answers are the fixtures' synthetic recorded ones.
    pub synthetic: bool,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GridParam {
    pub name: String,
    pub values: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GridInfo {
    pub params: Vec<GridParam>,
    pub size: u64,
    pub exact: bool,
    pub sweep_ms: u64,
    /// The same duration in microseconds, for sweeps faster than a millisecond.
    pub sweep_us: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Confusion {
    /// The primary dimension's values: row = expected, column = decided.
    pub labels: Vec<String>,
    pub rows: Vec<Vec<u32>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Defaults {
    pub params: Map<String, Value>,
    pub agree: u32,
    pub n: usize,
    pub wilson95: [f64; 2],
    pub under: u32,
    pub over: u32,
    pub confusion: Option<Confusion>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Region {
    pub agree: u32,
    pub count: u64,
    /// Per param `[min, max]` over the set, `null` when the set is empty.
    pub ranges: Map<String, Value>,
    /// The set equals the box of its ranges.
    pub solid: bool,
    /// Params whose default lies outside the range.
    pub defaults_outside: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Recommended {
    pub params: Map<String, Value>,
    /// Grid steps (Chebyshev) to the nearest worse combination; `null`: none is worse.
    pub margin: Option<u64>,
    pub note: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Polarity {
    pub param: String,
    pub best: u32,
    pub flipped_best: u32,
    pub warning: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    pub param: String,
    pub values: Vec<f64>,
    pub agree: Vec<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Disagreement {
    pub id: String,
    pub expected: String,
    pub decided: String,
    pub rule: String,
    pub under: bool,
    pub over: bool,
    /// The inputs that drove the decision, as the record had them.
    pub values: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Family {
    pub policy: PolicyRef,
    pub fixtures: Fixtures,
    pub measurement: Measurement,
    pub grid: GridInfo,
    pub objective: String,
    pub defaults: Defaults,
    pub best: Region,
    pub perfect: Region,
    pub recommended: Option<Recommended>,
    pub polarity: Vec<Polarity>,
    pub curves: Vec<Curve>,
    pub disagreements: Vec<Disagreement>,
}

/// `(lo, hi)` of the Wilson score interval at 95% for `k` successes out of `n`.
pub fn wilson95(k: u32, n: usize) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let z = 1.959_963_984_540_054_f64;
    let n = n as f64;
    let p = f64::from(k) / n;
    let denom = 1.0 + z * z / n;
    let center = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    // At the extremes the interval touches 0 or 1 exactly (no rounding to just below).
    let lo = if k == 0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    let hi = if f64::from(k) == n {
        1.0
    } else {
        (center + half).min(1.0)
    };
    [lo, hi]
}

/// Which combinations are good enough to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objective {
    /// Most agreement.
    Agreement,
    /// Most agreement among combinations with no under-escalation.
    Safe,
}

impl Objective {
    /// A comparable score; `None` for a combination the objective rules out.
    fn score(self, c: &Cell) -> Option<u32> {
        match self {
            Objective::Agreement => Some(c.agree),
            Objective::Safe => (c.under == 0).then_some(c.agree),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Objective::Agreement => "agreement",
            Objective::Safe => "safe (no under-escalation)",
        }
    }
}

fn params_map(policy: &Policy, values: &[f64]) -> Map<String, Value> {
    policy
        .params
        .iter()
        .zip(values)
        .map(|(p, v)| (p.name.clone(), json!(v)))
        .collect()
}

/// Ranges and solidity of the set of flat indices `members`.
fn region(policy: &Policy, grid: &Grid, members: &[usize], agree: u32) -> Region {
    let d = grid.axes.len();
    let mut lo = vec![usize::MAX; d];
    let mut hi = vec![0usize; d];
    for &i in members {
        for (k, c) in grid.coords(i).into_iter().enumerate() {
            lo[k] = lo[k].min(c);
            hi[k] = hi[k].max(c);
        }
    }
    let mut ranges = Map::new();
    let mut defaults_outside = Vec::new();
    let mut box_size: u64 = 1;
    for (k, axis) in grid.axes.iter().enumerate() {
        if members.is_empty() {
            ranges.insert(axis.name.clone(), Value::Null);
            continue;
        }
        let (a, b) = (axis.values[lo[k]], axis.values[hi[k]]);
        ranges.insert(axis.name.clone(), json!([a, b]));
        let def = policy.params[axis.param].default;
        if def < a || def > b {
            defaults_outside.push(axis.name.clone());
        }
        box_size = box_size.saturating_mul((hi[k] - lo[k] + 1) as u64);
    }
    Region {
        agree,
        count: members.len() as u64,
        ranges,
        solid: !members.is_empty() && box_size == members.len() as u64,
        defaults_outside,
    }
}

/// Chebyshev distance (in grid steps) from every cell to the nearest cell in `worse`, by a
/// breadth-first search from all worse cells at once. `None` where no worse cell exists.
fn distance_to_worse(grid: &Grid, worse: &[bool]) -> Vec<Option<u64>> {
    let n = worse.len();
    let mut dist: Vec<Option<u64>> = vec![None; n];
    let mut queue = VecDeque::new();
    for (i, w) in worse.iter().enumerate() {
        if *w {
            dist[i] = Some(0);
            queue.push_back(i);
        }
    }
    let d = grid.axes.len();
    let offsets: Vec<Vec<i64>> = (0..3usize.pow(d as u32))
        .map(|mut k| {
            (0..d)
                .map(|_| {
                    let o = (k % 3) as i64 - 1;
                    k /= 3;
                    o
                })
                .collect()
        })
        .filter(|o: &Vec<i64>| o.iter().any(|x| *x != 0))
        .collect();
    while let Some(i) = queue.pop_front() {
        let here = dist[i].unwrap_or(0);
        let c = grid.coords(i);
        for off in &offsets {
            let mut next = Vec::with_capacity(d);
            let mut inside = true;
            for (k, o) in off.iter().enumerate() {
                let v = c[k] as i64 + o;
                if v < 0 || v >= grid.axes[k].values.len() as i64 {
                    inside = false;
                    break;
                }
                next.push(v as usize);
            }
            if !inside {
                continue;
            }
            let j = grid.flat(&next);
            if dist[j].is_none() {
                dist[j] = Some(here + 1);
                queue.push_back(j);
            }
        }
    }
    dist
}

/// Everything `build` needs besides the sweep results.
pub struct Inputs<'a> {
    pub policy: &'a Policy,
    pub cases: &'a [Case],
    pub grid: &'a Grid,
    pub cells: &'a [Cell],
    pub exact: bool,
    pub sweep_us: u64,
    pub objective: Objective,
    pub measurement: Measurement,
}

/// Builds the family report. Polarity re-sweeps and curves are computed here with `sweep`.
pub fn build(inp: Inputs, sweep: &dyn Fn(&Policy, &Grid) -> Vec<Cell>) -> Family {
    let Inputs {
        policy,
        cases,
        grid,
        cells,
        exact,
        sweep_us,
        objective,
        measurement,
    } = inp;
    let defaults = policy.default_params();
    let usable_cases = usable(cases);
    let n = usable_cases.len();

    // Defaults, decided directly (they need not lie on the grid).
    let mut def_cell = Cell::default();
    let primary = policy.primary();
    let labels: Vec<String> = primary
        .and_then(|p| policy.dimensions[p].values.clone())
        .unwrap_or_default();
    let mut confusion = vec![vec![0u32; labels.len()]; labels.len()];
    let mut disagreements = Vec::new();
    for case in cases {
        let Ok(record) = &case.record else { continue };
        let d = crate::policy::decide(policy, record, &defaults);
        let v = case.oracle.judge(policy, &d);
        def_cell.agree += u32::from(v.agree);
        def_cell.under += u32::from(v.under);
        def_cell.over += u32::from(v.over);
        if let (Some(p), Some(e)) = (primary, case.oracle.expected_rank(policy)) {
            if let crate::policy::OutcomeValue::One(s) = &d.outcome[p] {
                if let Some(r) = policy.dimensions[p].rank(s) {
                    confusion[e][r] += 1;
                }
            }
        }
        if !v.agree {
            disagreements.push(Disagreement {
                id: case.id.clone(),
                expected: case.oracle.label(),
                decided: d.label(),
                rule: d.matched_rule.clone(),
                under: v.under,
                over: v.over,
                values: driving_values(policy, record, &d),
            });
        }
    }

    // Best (by the objective) and perfect sets.
    let best_score = cells.iter().filter_map(|c| objective.score(c)).max();
    let (best_members, best_agree): (Vec<usize>, u32) = match best_score {
        Some(s) => (
            cells
                .iter()
                .enumerate()
                .filter(|(_, c)| objective.score(c) == Some(s))
                .map(|(i, _)| i)
                .collect(),
            s,
        ),
        None => (Vec::new(), 0),
    };
    let perfect_members: Vec<usize> = cells
        .iter()
        .enumerate()
        .filter(|(_, c)| c.agree as usize == n && n > 0)
        .map(|(i, _)| i)
        .collect();
    let best = region(policy, grid, &best_members, best_agree);
    let perfect = region(policy, grid, &perfect_members, n as u32);

    // The recommendation: the best combination farthest from any worse one.
    let recommended = best_score.map(|s| {
        let worse: Vec<bool> = cells
            .iter()
            .map(|c| objective.score(c).is_none_or(|x| x < s))
            .collect();
        let dist = distance_to_worse(grid, &worse);
        let closeness = |i: usize| -> f64 {
            grid.axes
                .iter()
                .zip(grid.coords(i))
                .map(|(a, c)| {
                    let p = &policy.params[a.param];
                    let span = (p.hi - p.lo).max(f64::MIN_POSITIVE);
                    ((a.values[c] - p.default) / span).powi(2)
                })
                .sum()
        };
        let pick = best_members
            .iter()
            .copied()
            .max_by(|&a, &b| {
                let (da, db) = (dist[a].unwrap_or(u64::MAX), dist[b].unwrap_or(u64::MAX));
                da.cmp(&db).then(closeness(b).total_cmp(&closeness(a)))
            })
            .unwrap_or(0);
        Recommended {
            params: params_map(policy, &grid.params_at(pick, &defaults)),
            margin: dist[pick],
            note: "a starting region for more labelled cases, not a calibration".into(),
        }
    });

    // Polarity: each param's comparisons flipped, the whole grid swept again.
    let polarity = grid
        .axes
        .iter()
        .map(|axis| {
            let flipped = transform::flip_param(policy, axis.param);
            let flipped_cells = sweep(&flipped, grid);
            let flipped_best = flipped_cells.iter().map(|c| c.agree).max().unwrap_or(0);
            let best_any = cells.iter().map(|c| c.agree).max().unwrap_or(0);
            let warning = (flipped_best > best_any).then(|| {
                format!(
                    "the labels agree better with {} compared the other way round ({flipped_best}/{n} vs {best_any}/{n}): check the direction of its comparisons or the labels",
                    axis.name
                )
            });
            Polarity {
                param: axis.name.clone(),
                best: best_any,
                flipped_best,
                warning,
            }
        })
        .collect();

    // Curves: one param along its axis, the others at their defaults.
    let curves = grid
        .axes
        .iter()
        .map(|axis| {
            let line = Grid {
                axes: vec![axis.clone()],
            };
            Curve {
                param: axis.name.clone(),
                values: axis.values.clone(),
                agree: sweep(policy, &line).iter().map(|c| c.agree).collect(),
            }
        })
        .collect();

    let excluded_cases: Vec<Excluded> = cases
        .iter()
        .filter_map(|c| {
            c.record.as_ref().err().map(|r| Excluded {
                id: c.id.clone(),
                reason: r.clone(),
            })
        })
        .collect();
    Family {
        policy: PolicyRef {
            name: policy.name.clone(),
            version: policy.version.clone(),
            digest: policy.digest.clone(),
        },
        fixtures: Fixtures {
            total: cases.len(),
            usable: n,
            excluded: excluded_cases.len(),
            excluded_cases,
        },
        measurement,
        grid: GridInfo {
            params: grid
                .axes
                .iter()
                .map(|a| GridParam {
                    name: a.name.clone(),
                    values: a.values.clone(),
                })
                .collect(),
            size: u64::try_from(grid.size()).unwrap_or(u64::MAX),
            exact,
            sweep_ms: sweep_us / 1000,
            sweep_us,
        },
        objective: objective.name().into(),
        defaults: Defaults {
            params: params_map(policy, &defaults),
            agree: def_cell.agree,
            n,
            wilson95: wilson95(def_cell.agree, n),
            under: def_cell.under,
            over: def_cell.over,
            confusion: primary.map(|_| Confusion {
                labels,
                rows: confusion,
            }),
        },
        best,
        perfect,
        recommended,
        polarity,
        curves,
        disagreements,
    }
}

/// The inputs the matched rule (or, for a fallback or failure, every rule) reads.
fn driving_values(
    policy: &Policy,
    record: &crate::record::Record,
    d: &crate::policy::Decision,
) -> Map<String, Value> {
    let mut inputs = Vec::new();
    let matched = policy
        .rules
        .iter()
        .chain(&policy.fallback)
        .find(|r| r.id == d.matched_rule);
    match matched.and_then(|r| r.when.as_ref()) {
        Some(c) => transform::inputs_in(c, &mut inputs),
        None => {
            for r in policy.rules.iter().chain(&policy.fallback) {
                if let Some(c) = &r.when {
                    transform::inputs_in(c, &mut inputs);
                }
            }
        }
    }
    let mut out = Map::new();
    for frame in &record.frames {
        for &i in &inputs {
            let decl = &policy.inputs[i];
            let name = crate::record::field_name(policy, decl, frame.unit.as_deref());
            if let Some(Some(v)) = frame.values.get(i) {
                out.insert(format!("{}.{name}", decl.section.name()), v.to_json());
            }
        }
    }
    out
}

/// `▁▂▃▄▅▆▇█` for values in `0..=max`.
pub fn sparkline(values: &[u32], max: u32) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    values
        .iter()
        .map(|v| {
            if max == 0 {
                BARS[0]
            } else {
                BARS[((*v as usize * 7) + (max as usize / 2)) / max as usize]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_interval_matches_known_values() {
        let [lo, hi] = wilson95(8, 10);
        assert!(
            (lo - 0.4902).abs() < 1e-3 && (hi - 0.9433).abs() < 1e-3,
            "{lo} {hi}"
        );
        assert_eq!(wilson95(0, 0), [0.0, 1.0]);
        let [lo, hi] = wilson95(10, 10);
        assert!((lo - 0.7225).abs() < 1e-3 && (hi - 1.0).abs() < 1e-12);
    }

    #[test]
    fn sparkline_scales() {
        assert_eq!(sparkline(&[0, 5, 10], 10), "▁▅█");
    }
}

#[cfg(test)]
mod region_tests {
    use super::*;
    use crate::calibrate::grid::Axis;

    fn policy() -> Policy {
        crate::policy::registry::bundled()
            .unwrap()
            .into_iter()
            .find(|l| l.policy.name == "tool-call-assessment")
            .unwrap()
            .policy
    }

    fn grid3x3() -> Grid {
        let axis = |param: usize, name: &str| Axis {
            param,
            name: name.into(),
            values: vec![0.25, 0.5, 0.75],
            labels: vec!["0.25".into(), "0.5".into(), "0.75".into()],
        };
        Grid {
            axes: vec![axis(0, "restriction"), axis(1, "missingInformation")],
        }
    }

    #[test]
    fn an_l_shaped_best_set_is_not_solid() {
        let g = grid3x3();
        // (0,0), (0,1), (1,0): the box of the ranges also holds (1,1), which disagrees.
        let members = vec![g.flat(&[0, 0]), g.flat(&[0, 1]), g.flat(&[1, 0])];
        let r = region(&policy(), &g, &members, 5);
        assert_eq!(r.ranges["restriction"], json!([0.25, 0.5]));
        assert_eq!(r.ranges["missingInformation"], json!([0.25, 0.5]));
        assert!(!r.solid);
    }

    #[test]
    fn a_box_is_solid() {
        let g = grid3x3();
        let members = vec![
            g.flat(&[1, 1]),
            g.flat(&[1, 2]),
            g.flat(&[2, 1]),
            g.flat(&[2, 2]),
        ];
        let r = region(&policy(), &g, &members, 5);
        assert!(r.solid);
        assert_eq!(r.count, 4);
        assert_eq!(r.defaults_outside, Vec::<String>::new());
        let empty = region(&policy(), &g, &[], 0);
        assert!(!empty.solid);
        assert_eq!(empty.ranges["restriction"], Value::Null);
    }

    #[test]
    fn margins_count_chebyshev_steps_to_a_worse_cell() {
        let g = grid3x3();
        let mut worse = vec![false; 9];
        worse[g.flat(&[0, 0])] = true;
        let d = distance_to_worse(&g, &worse);
        assert_eq!(d[g.flat(&[1, 1])], Some(1));
        assert_eq!(d[g.flat(&[2, 2])], Some(2));
        assert_eq!(d[g.flat(&[2, 0])], Some(2));
        assert_eq!(distance_to_worse(&g, &[false; 9])[4], None);
    }
}
