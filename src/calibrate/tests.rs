//! The fast (box-decomposition) sweep against the brute force, on random policies, random
//! fixtures and random grids with values landing exactly on fixture values (ties).

use proptest::prelude::*;
use serde_json::{Value, json};

use super::grid::{Axis, Grid};
use super::{Oracle, fast, sweep};
use crate::policy::load_policy;
use crate::policy::model::Policy;
use crate::record::{Record, parse_record};

const TENTHS: [f64; 11] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

fn leaf() -> impl Strategy<Value = Value> {
    let input = prop::sample::select(vec!["answers.a", "answers.b", "answers.c"]);
    let op = prop::sample::select(vec![">=", ">", "<", "<=", "==", "!="]);
    prop_oneof![
        4 => (input.clone(), op.clone(), prop::sample::select(vec!["p", "q"]))
            .prop_map(|(i, o, p)| json!({"input": i, "op": o, "param": p})),
        1 => (input, op.clone(), prop::sample::select(TENTHS.to_vec()))
            .prop_map(|(i, o, v)| json!({"input": i, "op": o, "value": v})),
        2 => op.prop_map(|o| json!({"input": "history.k", "op": o, "param": "lim"})),
    ]
}

fn condition() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({"all": v})),
            prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({"any": v})),
            inner.prop_map(|c| json!({"not": c})),
        ]
    })
}

fn outcome() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["low", "mid", "high"]),
        prop_oneof![
            prop::sample::select(vec!["x", "y"]).prop_map(Value::from),
            Just(json!({"route": "pick"})),
        ],
    )
        .prop_map(|(l, t)| json!({"level": l, "tag": t}))
}

fn random_policy() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec((condition(), 0i64..3, outcome()), 1..5),
        prop::option::of((condition(), outcome())),
        outcome(),
        condition(),
    )
        .prop_map(|(rules, fb, last, route)| {
            let rules: Vec<Value> = rules
                .into_iter()
                .enumerate()
                .map(|(i, (c, p, o))| json!({"id": format!("r{i}"), "priority": p, "when": c, "outcome": o, "reasons": [format!("R{i}")]}))
                .collect();
            let mut fallback = Vec::new();
            if let Some((c, o)) = fb {
                fallback.push(json!({"id": "f0", "when": c, "outcome": o}));
            }
            fallback.push(json!({"id": "f1", "outcome": last}));
            json!({
                "jev_policy": 1, "name": "random", "version": "v1", "description": "generated",
                "inputs": {
                    "answers.a": {"type": "noul", "required": true},
                    "answers.b": {"type": "noul", "required": true},
                    "answers.c": {"type": "noul", "required": true},
                    "history.k": {"type": "int", "min": 0, "default": 0}
                },
                "params": {
                    "p": {"default": 0.5, "lo": 0, "hi": 1, "step": 0.1},
                    "q": {"default": 0.3, "lo": 0, "hi": 1, "step": 0.1},
                    "lim": {"default": 2, "lo": 0, "hi": 5, "step": 1}
                },
                "outcome": [
                    {"name": "level", "ordered": true, "values": ["low", "mid", "high"]},
                    {"name": "tag", "ordered": false, "values": ["x", "y"]}
                ],
                "routes": {"pick": [{"when": route, "value": "x"}, {"value": "y"}]},
                "rules": rules,
                "fallback": fallback,
                "failure": {"id": "failed", "outcome": {"level": "high", "tag": "x"}}
            })
        })
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![3 => prop::sample::select(TENTHS.to_vec()), 1 => (0u32..=1000).prop_map(|v| f64::from(v) / 1000.0)]
}

fn oracle_json() -> impl Strategy<Value = Value> {
    let label = (
        prop::sample::select(vec!["low", "mid", "high"]),
        prop::sample::select(vec!["x", "y"]),
    )
        .prop_map(|(l, t)| format!("{l}/{t}"));
    prop_oneof![
        label.clone().prop_map(Value::from),
        (
            prop::collection::vec(label, 1..4),
            prop::option::of(prop::sample::select(vec!["low", "mid"]))
        )
            .prop_map(|(acc, never)| match never {
                Some(n) => json!({"acceptable": acc, "must_not_commit": [n]}),
                None => json!({"acceptable": acc}),
            }),
    ]
}

fn axis(param: usize, name: &str, values: Vec<f64>) -> Axis {
    let mut values = values;
    values.sort_by(f64::total_cmp);
    values.dedup();
    Axis {
        param,
        name: name.into(),
        labels: values.iter().map(|v| v.to_string()).collect(),
        values,
    }
}

fn agree_everywhere(
    policy: &Policy,
    records: &[(Record, Oracle)],
    grid: &Grid,
) -> Result<(), TestCaseError> {
    let pairs: Vec<(&Record, &Oracle)> = records.iter().map(|(r, o)| (r, o)).collect();
    let base = policy.default_params();
    let brute = sweep(policy, &pairs, grid, &base);
    let fast = fast::sweep(policy, &pairs, grid, &base);
    prop_assert_eq!(brute.len(), fast.len());
    for (i, (b, f)) in brute.iter().zip(&fast).enumerate() {
        prop_assert_eq!(b, f, "grid point {:?}", grid.params_at(i, &base));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn fast_sweep_equals_brute_force_on_random_policies(
        doc in random_policy(),
        cases in prop::collection::vec((value(), value(), value(), 0i64..6, oracle_json()), 1..12),
        p_axis in prop::collection::vec(prop::sample::select(TENTHS.to_vec()), 1..6),
        q_axis in prop::collection::vec(value(), 1..5),
        lim_axis in prop::collection::vec(0i64..6, 1..4),
    ) {
        let policy = load_policy(&doc.to_string()).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let mut records = Vec::new();
        for (a, b, c, k, o) in &cases {
            let rec = json!({"answers": {"a": a, "b": b, "c": c}, "history": {"k": k}});
            let record = parse_record(&policy, &rec).map_err(|e| TestCaseError::fail(format!("{e}")))?;
            let oracle = Oracle::parse(&policy, o).map_err(TestCaseError::fail)?;
            records.push((record, oracle));
        }
        // Axes include the fixtures' own values, so thresholds tie with measurements.
        let mut p_vals = p_axis.clone();
        p_vals.extend(cases.iter().take(2).map(|c| c.0));
        let grid = Grid { axes: vec![
            axis(0, "p", p_vals),
            axis(1, "q", q_axis.clone()),
            axis(2, "lim", lim_axis.iter().map(|v| *v as f64).collect()),
        ]};
        agree_everywhere(&policy, &records, &grid)?;
    }

    #[test]
    fn fast_sweep_equals_brute_force_on_bundled_unit_and_confidence_policies(
        cats in prop::collection::vec((value(), value(), value()), 0..4),
        review in prop::collection::vec((value(), value(), value(), value()), 1..8),
        sel_axis in prop::collection::vec(value(), 1..5),
        thr_axis in prop::collection::vec(prop::sample::select(vec![0.5, 0.6, 0.7, 0.8, 0.9, 1.0]), 1..5),
    ) {
        let bundled = crate::policy::registry::bundled().unwrap();
        let get = |n: &str| bundled.iter().find(|l| l.policy.name == n).unwrap().policy.clone();
        // tool-selection: several units, argmax/p_max/confidence derived values.
        let sel = get("tool-selection");
        let mut answers = serde_json::Map::new();
        for (i, (rel, p, _)) in cats.iter().enumerate() {
            answers.insert(format!("rel_c{i}"), json!(rel));
            let rest = (1.0 - p) / 2.0;
            answers.insert(format!("pick_c{i}"), json!({"probabilities": {"t": p, "u": rest, "__none__": 1.0 - p - rest}}));
        }
        let record = parse_record(&sel, &json!({"answers": answers})).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let oracle = Oracle::parse(&sel, &json!({"status": "selected", "tool": ["t"]})).map_err(TestCaseError::fail)?;
        let grid = Grid { axes: vec![
            axis(0, "relevance", sel_axis.iter().copied().chain(cats.iter().map(|c| c.0)).collect()),
            axis(1, "selection", sel_axis.clone()),
            axis(2, "confidence", sel_axis.clone()),
        ]};
        agree_everywhere(&sel, &[(record, oracle)], &grid)?;

        // proposal-review: a noul's derived answer and confidence against one param.
        let pr = get("proposal-review");
        let mut records = Vec::new();
        for (a, e, u, n) in &review {
            let rec = json!({"record": {"validation": "passed"},
                "answers": {"addresses_task": a, "evidence_supports": e, "unrelated_changes": u, "needs_clarification": n}});
            let record = parse_record(&pr, &rec).map_err(|e| TestCaseError::fail(format!("{e}")))?;
            records.push((record, Oracle::parse(&pr, &json!("permit")).map_err(TestCaseError::fail)?));
        }
        let grid = Grid { axes: vec![axis(0, "threshold", thr_axis.iter().copied().chain(review.iter().map(|r| r.0.max(1.0 - r.0))).collect())] };
        agree_everywhere(&pr, &records, &grid)?;
    }
}
