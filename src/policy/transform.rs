//! Policy rewrites used for analysis (never for deciding): flipping the comparisons against
//! one param, so `calibrate` can check whether the labels agree better the other way round.

use super::model::*;

fn flip(op: Op) -> Op {
    match op {
        Op::Ge => Op::Lt,
        Op::Gt => Op::Le,
        Op::Lt => Op::Ge,
        Op::Le => Op::Gt,
        Op::Eq => Op::Ne,
        Op::Ne => Op::Eq,
        other => other,
    }
}

fn walk(c: &mut Condition, param: usize) {
    match c {
        Condition::All(list) | Condition::Any(list) => list.iter_mut().for_each(|c| walk(c, param)),
        Condition::Not(inner) => walk(inner, param),
        Condition::Compare(cmp) => {
            if matches!(cmp.right, Operand::Param(p) if p == param) {
                cmp.op = flip(cmp.op);
            }
        }
    }
}

/// A copy of `policy` in which every comparison against param `param` is negated
/// (`>=` becomes `<`, and so on).
pub fn flip_param(policy: &Policy, param: usize) -> Policy {
    let mut p = policy.clone();
    for rule in p
        .rules
        .iter_mut()
        .chain(p.fallback.iter_mut())
        .chain(p.failure.iter_mut())
    {
        if let Some(c) = rule.when.as_mut() {
            walk(c, param);
        }
    }
    for route in p.routes.iter_mut() {
        for (when, _) in route.cases.iter_mut() {
            if let Some(c) = when.as_mut() {
                walk(c, param);
            }
        }
    }
    p
}

/// Input indices a condition reads, in first-seen order.
pub fn inputs_in(c: &Condition, out: &mut Vec<usize>) {
    match c {
        Condition::All(list) | Condition::Any(list) => list.iter().for_each(|c| inputs_in(c, out)),
        Condition::Not(inner) => inputs_in(inner, out),
        Condition::Compare(cmp) => {
            for i in std::iter::once(cmp.input).chain(match cmp.right {
                Operand::Input { input, .. } => Some(input),
                _ => None,
            }) {
                if !out.contains(&i) {
                    out.push(i);
                }
            }
        }
    }
}

/// For each param: whether it is compared with open (`>`, `<=`) and with closed (`>=`, `<`)
/// operators both, in which case exact sweeps need midpoints between measured values.
pub fn mixed_param_comparisons(policy: &Policy) -> Vec<bool> {
    fn walk(c: &Condition, seen: &mut [(bool, bool)]) {
        match c {
            Condition::All(list) | Condition::Any(list) => list.iter().for_each(|c| walk(c, seen)),
            Condition::Not(inner) => walk(inner, seen),
            Condition::Compare(cmp) => {
                if let Operand::Param(p) = cmp.right {
                    match cmp.op {
                        Op::Ge | Op::Lt => seen[p].0 = true,
                        _ => seen[p].1 = true,
                    }
                }
            }
        }
    }
    let mut seen = vec![(false, false); policy.params.len()];
    for rule in policy
        .rules
        .iter()
        .chain(&policy.fallback)
        .chain(&policy.failure)
    {
        if let Some(c) = &rule.when {
            walk(c, &mut seen);
        }
    }
    for route in &policy.routes {
        for (when, _) in &route.cases {
            if let Some(c) = when {
                walk(c, &mut seen);
            }
        }
    }
    seen.into_iter().map(|(a, b)| a && b).collect()
}
