//! Static safety checks on a loaded policy (`jev policy lint`).
//!
//! 1. A failed measurement is never an allow: the failure outcome may not be (or, through a
//!    route, possibly be) the least strict value of the primary dimension.
//! 2. Unknown is never permission: a rule that can yield the least strict outcome must accept
//!    a state by *requiring* passing values of a closed set (`== PASS`, `in [...]`), never by
//!    excluding failing ones (`!= FAIL`, `not_in [...]`, `not {== FAIL}`), which would also
//!    accept any state nobody thought of (NOT_MEASURED, UNAVAILABLE, ...).

use super::model::*;

/// One problem found by the linter, with the JSON path of the offending part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Runs every check; an empty list means the policy passes.
pub fn lint(policy: &Policy) -> Vec<Finding> {
    let mut findings = Vec::new();
    let Some(primary) = policy.primary() else {
        // Without an ordered dimension there is no "least strict" outcome to guard.
        return findings;
    };
    let dim = &policy.dimensions[primary];
    let least = dim
        .values
        .as_ref()
        .and_then(|v| v.first())
        .cloned()
        .unwrap_or_default();

    if let Some(failure) = &policy.failure {
        if can_yield(policy, &failure.outcome[primary], &least) {
            findings.push(Finding {
                path: format!("failure.outcome.{}", dim.name),
                message: format!(
                    "a failed measurement could yield {least:?}, the least strict {} (a failure is never an allow)",
                    dim.name
                ),
            });
        }
    }
    let groups = [("rules", &policy.rules), ("fallback", &policy.fallback)];
    for (group, rules) in groups {
        for (i, rule) in rules.iter().enumerate() {
            if !can_yield(policy, &rule.outcome[primary], &least) {
                continue;
            }
            if let Some(when) = &rule.when {
                let mut found = Vec::new();
                exclusions(
                    policy,
                    when,
                    false,
                    &format!("{group}[{i}].when"),
                    &mut found,
                );
                for (path, input) in found {
                    findings.push(Finding {
                        path,
                        message: format!(
                            "rule {:?} yields the least strict {} {least:?} but accepts {input} by excluding values; require the passing values instead (unknown is never permission)",
                            rule.id, dim.name
                        ),
                    });
                }
            }
        }
    }
    findings
}

fn can_yield(policy: &Policy, spec: &OutcomeSpec, value: &str) -> bool {
    match spec {
        OutcomeSpec::Literal(s) => s == value,
        OutcomeSpec::Route(i) => policy.routes[*i].cases.iter().any(|(_, v)| v == value),
        // Ordered dimensions never take input values (the loader enforces it); be safe anyway.
        OutcomeSpec::FromInput { .. } => true,
        OutcomeSpec::Nothing => false,
    }
}

/// Collects comparisons on closed value sets that accept by exclusion, given whether the
/// enclosing condition is negated.
fn exclusions(
    policy: &Policy,
    c: &Condition,
    negated: bool,
    path: &str,
    out: &mut Vec<(String, String)>,
) {
    match c {
        Condition::All(list) | Condition::Any(list) => {
            let key = if matches!(c, Condition::All(_)) {
                "all"
            } else {
                "any"
            };
            for (i, sub) in list.iter().enumerate() {
                exclusions(policy, sub, negated, &format!("{path}.{key}[{i}]"), out);
            }
        }
        Condition::Not(inner) => exclusions(policy, inner, !negated, &format!("{path}.not"), out),
        Condition::Compare(cmp) => {
            let closed = match (&policy.inputs[cmp.input].ty, cmp.derive) {
                (InputType::Enum { .. }, Derive::Value) => true,
                (InputType::Noul, Derive::Answer) => true,
                (InputType::Choice { labels }, Derive::Argmax) => labels.is_some(),
                (InputType::Score { .. }, Derive::Argmax) => true,
                _ => false,
            };
            let string_test = matches!(cmp.right, Operand::Str(_) | Operand::Set(_));
            let excludes = match cmp.op {
                Op::Ne | Op::NotIn => !negated,
                Op::Eq | Op::In => negated,
                _ => false,
            };
            if closed && string_test && excludes {
                out.push((path.to_owned(), policy.inputs[cmp.input].path.clone()));
            }
        }
    }
}
