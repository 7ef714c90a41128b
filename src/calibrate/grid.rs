//! Threshold grids. Grid values are decimals: `0.15` on the grid is the double nearest to
//! 0.15, exactly as `0.15` in a fixture is, so `>=` at a grid point means what it means at run
//! time. Values are generated in scaled integers, never by accumulating `lo + i*step` in
//! floating point.

use crate::policy::model::{ParamDecl, Policy};

/// A decimal number: `mantissa × 10^-scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimal {
    pub mantissa: i128,
    pub scale: u32,
}

impl Decimal {
    /// Parses `-12.345`, `0.05`, `1e-2`, `5E3`.
    pub fn parse(text: &str) -> Result<Decimal, String> {
        let t = text.trim();
        let bad = || format!("{text:?} is not a decimal number");
        let (num, exp) = match t.find(['e', 'E']) {
            Some(i) => (&t[..i], t[i + 1..].parse::<i32>().map_err(|_| bad())?),
            None => (t, 0),
        };
        let (neg, digits) = match num.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, num.strip_prefix('+').unwrap_or(num)),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if int.is_empty() && frac.is_empty()
            || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
        {
            return Err(bad());
        }
        let all = format!("{int}{frac}");
        let all = all.trim_start_matches('0');
        if all.len() > 30 {
            return Err(format!("{text:?} has too many digits"));
        }
        let mut mantissa: i128 = if all.is_empty() {
            0
        } else {
            all.parse().map_err(|_| bad())?
        };
        let mut scale = frac.len() as i32 - exp;
        while scale < 0 {
            mantissa = mantissa.checked_mul(10).ok_or_else(bad)?;
            scale += 1;
        }
        if scale > 30 {
            return Err(format!("{text:?} has too many decimal places"));
        }
        if neg {
            mantissa = -mantissa;
        }
        Ok(Decimal {
            mantissa,
            scale: scale as u32,
        }
        .normalized())
    }

    /// The shortest decimal that reads back as `f` (how a JSON number in a policy file was
    /// written, as far as it can be known).
    pub fn from_f64(f: f64) -> Result<Decimal, String> {
        if !f.is_finite() {
            return Err(format!("{f} is not finite"));
        }
        let mut buf = ryu_js::Buffer::new();
        Decimal::parse(buf.format_finite(f))
    }

    fn normalized(mut self) -> Decimal {
        while self.scale > 0 && self.mantissa % 10 == 0 {
            self.mantissa /= 10;
            self.scale -= 1;
        }
        self
    }

    fn rescale(self, scale: u32) -> Option<i128> {
        self.mantissa
            .checked_mul(10i128.checked_pow(scale.checked_sub(self.scale)?)?)
    }

    /// The double nearest to this decimal (parsing its text, so it equals a fixture's value).
    pub fn to_f64(self) -> f64 {
        self.to_string().parse().unwrap_or(f64::NAN)
    }
}

impl std::fmt::Display for Decimal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let neg = self.mantissa < 0;
        let digits = self.mantissa.unsigned_abs().to_string();
        let scale = self.scale as usize;
        let s = if scale == 0 {
            digits
        } else if digits.len() > scale {
            format!(
                "{}.{}",
                &digits[..digits.len() - scale],
                &digits[digits.len() - scale..]
            )
        } else {
            format!("0.{}{}", "0".repeat(scale - digits.len()), digits)
        };
        write!(f, "{}{s}", if neg { "-" } else { "" })
    }
}

/// `lo, lo+step, ...` up to and including `hi` when it lands on the grid.
pub fn range(
    lo: Decimal,
    hi: Decimal,
    step: Decimal,
    max_points: u128,
) -> Result<Vec<Decimal>, String> {
    if step.mantissa <= 0 {
        return Err("step must be positive".into());
    }
    if hi.to_f64() < lo.to_f64() {
        return Err(format!("lo {lo} is above hi {hi}"));
    }
    let scale = lo.scale.max(hi.scale).max(step.scale);
    let overflow = || "grid bounds have too many digits".to_string();
    let (l, h, s) = (
        lo.rescale(scale).ok_or_else(overflow)?,
        hi.rescale(scale).ok_or_else(overflow)?,
        step.rescale(scale).ok_or_else(overflow)?,
    );
    let count = ((h - l) / s) as u128 + 1;
    if count > max_points {
        return Err(format!(
            "{count} values on one axis exceed the limit of {max_points}"
        ));
    }
    Ok((0..count as i128)
        .map(|i| {
            Decimal {
                mantissa: l + i * s,
                scale,
            }
            .normalized()
        })
        .collect())
}

/// One axis of a grid: a param and its candidate values, ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub param: usize,
    pub name: String,
    pub values: Vec<f64>,
    /// The decimal text of each value, for reports and CSV.
    pub labels: Vec<String>,
}

/// A full grid: the product of its axes, indexed in row-major order (last axis fastest).
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub axes: Vec<Axis>,
}

impl Grid {
    pub fn size(&self) -> u128 {
        self.axes.iter().map(|a| a.values.len() as u128).product()
    }

    /// The per-axis indices of flat index `i`.
    pub fn coords(&self, mut i: usize) -> Vec<usize> {
        let mut out = vec![0; self.axes.len()];
        for (d, axis) in self.axes.iter().enumerate().rev() {
            out[d] = i % axis.values.len();
            i /= axis.values.len();
        }
        out
    }

    pub fn flat(&self, coords: &[usize]) -> usize {
        coords
            .iter()
            .zip(&self.axes)
            .fold(0, |acc, (c, a)| acc * a.values.len() + c)
    }

    /// Param values (one per policy param) at flat index `i`, others from `base`.
    pub fn params_at(&self, i: usize, base: &[f64]) -> Vec<f64> {
        let mut p = base.to_vec();
        for (axis, c) in self.axes.iter().zip(self.coords(i)) {
            p[axis.param] = axis.values[c];
        }
        p
    }
}

/// How one param's axis is chosen on the command line.
#[derive(Debug, Clone, PartialEq)]
pub enum AxisSpec {
    Range {
        lo: Decimal,
        hi: Decimal,
        step: Decimal,
    },
    Values(Vec<Decimal>),
}

/// Parses `NAME=LO:HI:STEP` or `NAME=v1,v2,...`.
pub fn parse_override(text: &str) -> Result<(String, AxisSpec), String> {
    let (name, spec) = text
        .split_once('=')
        .ok_or_else(|| format!("--grid {text:?}: expected NAME=LO:HI:STEP or NAME=v1,v2,..."))?;
    let spec = if spec.contains(':') {
        let parts: Vec<&str> = spec.split(':').collect();
        let [lo, hi, step] = parts[..] else {
            return Err(format!("--grid {text:?}: expected LO:HI:STEP"));
        };
        let (lo, hi, step) = (
            Decimal::parse(lo)?,
            Decimal::parse(hi)?,
            Decimal::parse(step)?,
        );
        if step.mantissa <= 0 {
            return Err(format!("--grid {text:?}: step must be positive"));
        }
        if hi.to_f64() < lo.to_f64() {
            return Err(format!("--grid {text:?}: lo is above hi"));
        }
        AxisSpec::Range { lo, hi, step }
    } else {
        let values = spec
            .split(',')
            .map(Decimal::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if values.is_empty() {
            return Err(format!("--grid {text:?}: no values"));
        }
        AxisSpec::Values(values)
    };
    Ok((name.trim().to_owned(), spec))
}

/// The default axis of a param: its declared `lo..hi` by `step`.
pub fn declared_axis(p: &ParamDecl) -> Result<AxisSpec, String> {
    Ok(AxisSpec::Range {
        lo: Decimal::from_f64(p.lo)?,
        hi: Decimal::from_f64(p.hi)?,
        step: Decimal::from_f64(p.step)?,
    })
}

/// Builds the grid for `policy`: declared axes, with overrides by name. Values outside a
/// param's declared range are refused; so is a grid larger than `max_points`.
pub fn build(
    policy: &Policy,
    overrides: &[(String, AxisSpec)],
    max_points: u128,
) -> Result<Grid, String> {
    for (name, _) in overrides {
        if policy.param_index(name).is_none() {
            let known: Vec<&str> = policy.params.iter().map(|p| p.name.as_str()).collect();
            return Err(format!(
                "--grid {name}: {} has no such param (it has: {})",
                policy.reference(),
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            ));
        }
    }
    let mut axes = Vec::new();
    for (i, p) in policy.params.iter().enumerate() {
        let spec = match overrides.iter().rev().find(|(n, _)| n == &p.name) {
            Some((_, s)) => s.clone(),
            None => declared_axis(p)?,
        };
        let mut values = match spec {
            AxisSpec::Range { lo, hi, step } => range(lo, hi, step, max_points)?,
            AxisSpec::Values(v) => v,
        };
        values.sort_by(|a, b| a.to_f64().total_cmp(&b.to_f64()));
        values.dedup_by(|a, b| a.to_f64() == b.to_f64());
        for v in &values {
            let f = v.to_f64();
            if f < p.lo || f > p.hi {
                return Err(format!(
                    "--grid {}: {v} is outside the param's declared range [{}, {}]",
                    p.name, p.lo, p.hi
                ));
            }
        }
        axes.push(Axis {
            param: i,
            name: p.name.clone(),
            values: values.iter().map(|v| v.to_f64()).collect(),
            labels: values.iter().map(|v| v.to_string()).collect(),
        });
    }
    let grid = Grid { axes };
    if grid.size() > max_points {
        return Err(format!(
            "the grid has {} points, over the limit of {max_points} (raise it with --max-grid)",
            grid.size()
        ));
    }
    Ok(grid)
}

/// Replaces each axis by the thresholds that are exact over all real values: every distinct
/// measured value compared with the param, the midpoints between them when the param is used
/// with both closed (`>=`, `<`) and open (`>`, `<=`) comparisons, and the declared bounds.
pub fn exact(
    grid: &Grid,
    policy: &Policy,
    measured: &[Vec<f64>],
    needs_midpoints: &[bool],
) -> Grid {
    let axes = grid
        .axes
        .iter()
        .map(|axis| {
            let p = &policy.params[axis.param];
            let mut vals: Vec<f64> = measured[axis.param]
                .iter()
                .copied()
                .filter(|v| *v >= p.lo && *v <= p.hi)
                .chain([p.lo, p.hi])
                .collect();
            vals.sort_by(f64::total_cmp);
            vals.dedup();
            if needs_midpoints[axis.param] {
                let mids: Vec<f64> = vals
                    .windows(2)
                    .map(|w| w[0] + (w[1] - w[0]) / 2.0)
                    .collect();
                vals.extend(mids);
                vals.sort_by(f64::total_cmp);
                vals.dedup();
            }
            let labels = vals
                .iter()
                .map(|v| {
                    let mut b = ryu_js::Buffer::new();
                    b.format_finite(*v).to_owned()
                })
                .collect();
            Axis {
                param: axis.param,
                name: axis.name.clone(),
                values: vals,
                labels,
            }
        })
        .collect();
    Grid { axes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_ranges_hit_the_same_doubles_as_literals() {
        let v = range(
            Decimal::parse("0.05").unwrap(),
            Decimal::parse("0.95").unwrap(),
            Decimal::parse("0.05").unwrap(),
            1000,
        )
        .unwrap();
        assert_eq!(v.len(), 19);
        assert_eq!(v[2].to_f64(), 0.15);
        assert_eq!(v[5].to_f64(), 0.3);
        let (lo, step) = (0.05_f64, 0.05_f64);
        assert_ne!(
            lo + 2.0 * step,
            0.15,
            "lo + i*step in floating point would miss 0.15"
        );
        assert_eq!(v.last().unwrap().to_string(), "0.95");
    }

    #[test]
    fn decimals_parse_and_print() {
        for (t, s) in [
            ("0.50", "0.5"),
            ("1e-2", "0.01"),
            ("-1.25", "-1.25"),
            ("3", "3"),
            ("0.000", "0"),
        ] {
            assert_eq!(Decimal::parse(t).unwrap().to_string(), s);
        }
        assert!(Decimal::parse("abc").is_err());
        assert!(Decimal::parse("").is_err());
        assert_eq!(Decimal::from_f64(0.35).unwrap().to_string(), "0.35");
    }

    #[test]
    fn overrides_are_checked() {
        assert!(parse_override("x=0:1:0").is_err());
        assert!(parse_override("x=1:0:0.1").is_err());
        assert_eq!(
            parse_override("x=0.1,0.2").unwrap().1,
            AxisSpec::Values(vec![
                Decimal::parse("0.1").unwrap(),
                Decimal::parse("0.2").unwrap()
            ])
        );
        assert!(parse_override("nonsense").is_err());
    }
}
