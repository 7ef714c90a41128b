//! Behaviour of the bundled policies and of the loader and linter, tested through the
//! library. The reliability policies are checked against an independent transcription of the
//! DESIGN §3.1 rule table written here, not against the policy files themselves.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::lint::lint;
use super::load::{PolicyError, load_policy};
use super::registry;
use super::{Decision, Policy, decide};
use crate::record::{RecordError, parse_record};

fn bundled(reference: &str) -> &'static Policy {
    static ALL: std::sync::OnceLock<Vec<Policy>> = std::sync::OnceLock::new();
    let all = ALL.get_or_init(|| {
        registry::bundled()
            .unwrap()
            .into_iter()
            .map(|l| l.policy)
            .collect()
    });
    all.iter()
        .find(|p| p.reference() == reference)
        .unwrap_or_else(|| panic!("no bundled {reference}"))
}

fn bundled_text(file: &str) -> &'static str {
    registry::BUNDLED
        .iter()
        .find(|(f, _)| *f == file)
        .map(|(_, t)| *t)
        .unwrap_or_else(|| panic!("no bundled {file}"))
}

fn run(policy: &Policy, record: &Value) -> Decision {
    let r = parse_record(policy, record).unwrap_or_else(|e| panic!("{e}"));
    decide(policy, &r, &policy.default_params())
}

fn run_with(policy: &Policy, record: &Value, params: &[(&str, f64)]) -> Decision {
    let r = parse_record(policy, record).unwrap_or_else(|e| panic!("{e}"));
    let mut values = policy.default_params();
    for (name, v) in params {
        values[policy.param_index(name).unwrap()] = *v;
    }
    decide(policy, &r, &values)
}

fn clean() -> Value {
    json!({"record": {"containment": "PASS", "relation_fidelity": "PASS", "sensitivity": "PASS",
                      "epistemic_adequacy": "ANSWERABLE", "provenance": "VERIFIED",
                      "source_freshness": "FRESH"}})
}

fn with(mut base: Value, section: &str, field: &str, v: Value) -> Value {
    let obj = base.as_object_mut().unwrap();
    obj.entry(section).or_insert_with(|| json!({}))[field] = v;
    base
}

#[test]
fn every_bundled_policy_loads_and_passes_lint() {
    assert_eq!(registry::BUNDLED.len(), 8);
    for located in registry::bundled().unwrap() {
        let findings = lint(&located.policy);
        assert!(
            findings.is_empty(),
            "{}: {findings:?}",
            located.policy.reference()
        );
    }
}

#[test]
fn chapter_records_under_v1_and_v2() {
    let cases = [
        ("clean", clean(), "PERMIT/NONE", "PERMIT/NONE"),
        (
            "provenance unverified",
            with(clean(), "record", "provenance", json!("UNVERIFIED")),
            "PERMIT/NONE",
            "HOLD/VERIFY",
        ),
        (
            "recoverable evidence gap",
            with(
                clean(),
                "record",
                "epistemic_adequacy",
                json!("RECOVERABLE_EVIDENCE_GAP"),
            ),
            "HOLD/RETRIEVE",
            "HOLD/RETRIEVE",
        ),
        (
            "sensitivity failure",
            with(clean(), "record", "sensitivity", json!("FAIL")),
            "HOLD/REVIEW",
            "HOLD/REVIEW",
        ),
        (
            "prohibited request",
            with(clean(), "record", "policy_restricted", json!(true)),
            "DENY/REFUSE_REQUEST",
            "DENY/REFUSE_REQUEST",
        ),
    ];
    let v1 = bundled("reliability@policy-v1");
    let v2 = bundled("reliability@policy-v2");
    for (name, record, want1, want2) in cases {
        assert_eq!(run(v1, &record).label(), want1, "v1 {name}");
        assert_eq!(run(v2, &record).label(), want2, "v2 {name}");
    }
}

#[test]
fn reliability_reference_outcomes() {
    for reference in [
        "reliability@policy-v1",
        "reliability@policy-v2",
        "reliability@policy-v3",
    ] {
        let p = bundled(reference);
        let d = run(
            p,
            &with(
                with(clean(), "record", "policy_restricted", json!(true)),
                "record",
                "sensitivity",
                json!("FAIL"),
            ),
        );
        assert_eq!(d.label(), "DENY/REFUSE_REQUEST", "{reference}");
        assert_eq!(d.matched_rule, "POLICY_PROHIBITED");
        assert_eq!(d.suppressed_rules, ["SENSITIVITY_REVIEW"]);
        assert_eq!(d.reason_codes, ["POLICY_PROHIBITED", "SENSITIVITY_FAIL"]);
        assert!(
            d.obligations.is_empty(),
            "a denial carries only the winner's obligations"
        );

        let gap = with(
            clean(),
            "record",
            "epistemic_adequacy",
            json!("RECOVERABLE_EVIDENCE_GAP"),
        );
        assert_eq!(run(p, &gap).label(), "HOLD/RETRIEVE");
        let d = run(p, &with(gap, "history", "retrieve_attempts", json!(1)));
        assert_eq!(d.label(), "HOLD/REVIEW");
        assert_eq!(d.matched_rule, "RETRIEVAL_BUDGET_EXHAUSTED");

        let user_gap = with(clean(), "record", "epistemic_adequacy", json!("USER_GAP"));
        assert_eq!(run(p, &user_gap).label(), "HOLD/ASK");
        let d = run(p, &with(user_gap, "history", "ask_attempts", json!(2)));
        assert_eq!(d.label(), "HOLD/REVIEW");
        assert_eq!(d.matched_rule, "ASK_BUDGET_EXHAUSTED");

        let d = run(p, &with(clean(), "history", "step_index", json!(4)));
        assert_eq!(d.matched_rule, "MAX_STEPS_EXCEEDED");
        assert_eq!(d.label(), "HOLD/REVIEW");
        let d = run(
            p,
            &with(
                with(clean(), "history", "step_index", json!(4)),
                "context",
                "human_review_available",
                json!(false),
            ),
        );
        assert_eq!(
            d.label(),
            "HOLD/ABSTAIN",
            "the terminal route without a human is ABSTAIN"
        );
    }
    let v3 = bundled("reliability@policy-v3");
    let stale = with(clean(), "record", "source_freshness", json!("STALE"));
    assert_eq!(run(v3, &stale).label(), "HOLD/RETRIEVE");
    assert_eq!(run(v3, &stale).obligations, ["refresh_source"]);
    let d = run(v3, &with(stale, "history", "retrieve_attempts", json!(1)));
    assert_eq!(d.matched_rule, "SOURCE_REFRESH_BUDGET_EXHAUSTED");
    let na = with(
        clean(),
        "record",
        "source_freshness",
        json!("NOT_APPLICABLE"),
    );
    assert_eq!(run(v3, &na).label(), "PERMIT/NONE");
}

/// The DESIGN §3.1 reliability table, transcribed independently: (rule id, priority,
/// commitment, next_action) of every rule whose condition holds, plus the fallback.
#[derive(Debug, Clone)]
struct RelState {
    containment: &'static str,
    relation_fidelity: &'static str,
    sensitivity: &'static str,
    adequacy: &'static str,
    provenance: &'static str,
    freshness: &'static str,
    restricted: bool,
    risk: &'static str,
    max_steps: i64,
    max_retrievals: i64,
    max_verifications: i64,
    max_asks: i64,
    human: bool,
    step: i64,
    retrieves: i64,
    verifies: i64,
    asks: i64,
}

const DIAG: [&str; 7] = [
    "PASS",
    "FAIL",
    "UNCERTAIN",
    "NOT_MEASURED",
    "NOT_RUN",
    "UNAVAILABLE",
    "NOT_APPLICABLE",
];
const PROV: [&str; 6] = [
    "VERIFIED",
    "UNVERIFIED",
    "NOT_MEASURED",
    "NOT_RUN",
    "UNAVAILABLE",
    "NOT_APPLICABLE",
];
const ADEQ: [&str; 7] = [
    "ANSWERABLE",
    "USER_GAP",
    "RECOVERABLE_EVIDENCE_GAP",
    "NOT_MEASURED",
    "NOT_RUN",
    "UNAVAILABLE",
    "NOT_APPLICABLE",
];
const FRESH: [&str; 5] = [
    "FRESH",
    "STALE",
    "NOT_MEASURED",
    "UNAVAILABLE",
    "NOT_APPLICABLE",
];

fn rel_state() -> impl Strategy<Value = RelState> {
    (
        (
            prop::sample::select(&DIAG[..]),
            prop::sample::select(&DIAG[..]),
            prop::sample::select(&DIAG[..]),
            prop::sample::select(&ADEQ[..]),
            prop::sample::select(&PROV[..]),
            prop::sample::select(&FRESH[..]),
            any::<bool>(),
            prop::sample::select(&["low", "medium", "high"][..]),
        ),
        (
            0i64..6,
            0i64..3,
            0i64..3,
            0i64..4,
            any::<bool>(),
            0i64..7,
            0i64..3,
            0i64..3,
            0i64..4,
        ),
    )
        .prop_map(
            |((c, r, s, a, p, f, restricted, risk), (ms, mr, mv, ma, human, st, rt, vt, at))| {
                RelState {
                    containment: c,
                    relation_fidelity: r,
                    sensitivity: s,
                    adequacy: a,
                    provenance: p,
                    freshness: f,
                    restricted,
                    risk,
                    max_steps: ms,
                    max_retrievals: mr,
                    max_verifications: mv,
                    max_asks: ma,
                    human,
                    step: st,
                    retrieves: rt,
                    verifies: vt,
                    asks: at,
                }
            },
        )
}

impl RelState {
    fn to_json(&self) -> Value {
        json!({
            "record": {"containment": self.containment, "relation_fidelity": self.relation_fidelity,
                       "sensitivity": self.sensitivity, "epistemic_adequacy": self.adequacy,
                       "provenance": self.provenance, "source_freshness": self.freshness,
                       "policy_restricted": self.restricted},
            "context": {"risk_tier": self.risk, "max_steps": self.max_steps, "max_retrievals": self.max_retrievals,
                        "max_verifications": self.max_verifications, "max_asks": self.max_asks,
                        "human_review_available": self.human},
            "history": {"step_index": self.step, "retrieve_attempts": self.retrieves,
                        "verify_attempts": self.verifies, "ask_attempts": self.asks}
        })
    }

    /// Expected (matched rule, label, suppressed) under reliability policy-v`version`.
    fn expected(&self, version: u8) -> (String, String, Vec<String>) {
        let t = if self.human { "REVIEW" } else { "ABSTAIN" };
        let high = self.risk == "high";
        let unresolved = ["UNVERIFIED", "NOT_MEASURED", "UNAVAILABLE"].contains(&self.provenance);
        let stale = !["FRESH", "NOT_APPLICABLE"].contains(&self.freshness);
        let mut hits: Vec<(&str, i64, String)> = Vec::new();
        let mut hit = |cond: bool, id: &'static str, prio: i64, label: String| {
            if cond {
                hits.push((id, prio, label));
            }
        };
        hit(
            self.restricted,
            "POLICY_PROHIBITED",
            100,
            "DENY/REFUSE_REQUEST".into(),
        );
        hit(
            self.step >= self.max_steps,
            "MAX_STEPS_EXCEEDED",
            95,
            format!("HOLD/{t}"),
        );
        hit(
            self.adequacy == "USER_GAP" && self.asks >= self.max_asks,
            "ASK_BUDGET_EXHAUSTED",
            91,
            format!("HOLD/{t}"),
        );
        hit(
            self.adequacy == "USER_GAP" && self.asks < self.max_asks,
            "USER_INPUT_REQUIRED",
            90,
            "HOLD/ASK".into(),
        );
        let gap = self.adequacy == "RECOVERABLE_EVIDENCE_GAP";
        hit(
            gap && self.retrieves >= self.max_retrievals,
            "RETRIEVAL_BUDGET_EXHAUSTED",
            91,
            format!("HOLD/{t}"),
        );
        hit(
            gap && self.retrieves < self.max_retrievals,
            "RECOVERABLE_EVIDENCE_GAP",
            90,
            "HOLD/RETRIEVE".into(),
        );
        if version >= 2 {
            let p = high && unresolved;
            hit(
                p && self.verifies >= self.max_verifications,
                "VERIFICATION_BUDGET_EXHAUSTED",
                86,
                format!("HOLD/{t}"),
            );
            hit(
                p && self.verifies < self.max_verifications,
                "VERIFIED_PROVENANCE_REQUIRED",
                85,
                "HOLD/VERIFY".into(),
            );
        }
        if version >= 3 {
            let f = high && stale;
            hit(
                f && self.retrieves >= self.max_retrievals,
                "SOURCE_REFRESH_BUDGET_EXHAUSTED",
                84,
                format!("HOLD/{t}"),
            );
            hit(
                f && self.retrieves < self.max_retrievals,
                "SOURCE_FRESHNESS_REQUIRED",
                83,
                "HOLD/RETRIEVE".into(),
            );
        }
        hit(
            self.sensitivity == "FAIL",
            "SENSITIVITY_REVIEW",
            70,
            "HOLD/REVIEW".into(),
        );
        hits.sort_by_key(|h| std::cmp::Reverse(h.1));
        if let Some((id, _, label)) = hits.first() {
            let suppressed = hits[1..].iter().map(|h| h.0.to_string()).collect();
            return (id.to_string(), label.clone(), suppressed);
        }
        if self.clean(version) {
            ("CLEAN_ACCEPT".into(), "PERMIT/NONE".into(), vec![])
        } else {
            (
                "UNHANDLED_OR_UNKNOWN_STATE".into(),
                format!("HOLD/{t}"),
                vec![],
            )
        }
    }

    fn clean(&self, version: u8) -> bool {
        self.containment == "PASS"
            && self.relation_fidelity == "PASS"
            && self.adequacy == "ANSWERABLE"
            && (version < 2 || self.provenance == "VERIFIED")
            && (version < 3 || ["FRESH", "NOT_APPLICABLE"].contains(&self.freshness))
    }
}

const PROVENANCE_RULES: [&str; 2] = [
    "VERIFICATION_BUDGET_EXHAUSTED",
    "VERIFIED_PROVENANCE_REQUIRED",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn reliability_policies_follow_the_rule_table(s in rel_state()) {
        let record = s.to_json();
        for (version, reference) in [(1, "reliability@policy-v1"), (2, "reliability@policy-v2"), (3, "reliability@policy-v3")] {
            let p = bundled(reference);
            let d = run(p, &record);
            let (rule, label, suppressed) = s.expected(version);
            prop_assert_eq!(&d.matched_rule, &rule, "{}", reference);
            prop_assert_eq!(d.label(), label, "{}", reference);
            prop_assert_eq!(&d.suppressed_rules, &suppressed, "{}", reference);

            // DENY only through POLICY_PROHIBITED, and then no obligations.
            if d.label().starts_with("DENY/") {
                prop_assert_eq!(&d.matched_rule, "POLICY_PROHIBITED");
                prop_assert!(d.obligations.is_empty());
            }
            // PERMIT only when every clean-accept condition holds.
            if d.label().starts_with("PERMIT/") {
                prop_assert!(s.clean(version));
            }
            // Reasons and obligations are deduplicated.
            let mut r = d.reason_codes.clone();
            r.sort();
            r.dedup();
            prop_assert_eq!(r.len(), d.reason_codes.len());
            let mut o = d.obligations.clone();
            o.sort();
            o.dedup();
            prop_assert_eq!(o.len(), d.obligations.len());
            // Suppressed rules come by priority, highest first, none above the winner.
            let prio = |id: &str| p.rules.iter().chain(&p.fallback).find(|r| r.id == id).map(|r| r.priority).unwrap();
            let mut last = prio(&d.matched_rule);
            for id in &d.suppressed_rules {
                prop_assert!(prio(id) <= last, "{} out of order", id);
                last = prio(id);
            }
        }
    }

    #[test]
    fn v1_and_v2_differ_only_through_provenance(s in rel_state()) {
        let record = s.to_json();
        let d1 = run(bundled("reliability@policy-v1"), &record);
        let d2 = run(bundled("reliability@policy-v2"), &record);
        if d1 != d2 {
            let provenance_rule = PROVENANCE_RULES.contains(&d2.matched_rule.as_str())
                || d2.suppressed_rules.iter().any(|r| PROVENANCE_RULES.contains(&r.as_str()));
            let clean_accept_provenance = d1.matched_rule == "CLEAN_ACCEPT" && s.provenance != "VERIFIED";
            prop_assert!(provenance_rule || clean_accept_provenance, "v1 {:?} v2 {:?}", d1, d2);
        }
    }

    #[test]
    fn a_failed_assessment_measurement_asks_never_allows(
        which in 0usize..3,
        failure in prop::sample::select(&["UNAVAILABLE", "INCOMPLETE_INPUT"][..]),
        ps in prop::array::uniform3(0.0f64..=1.0),
    ) {
        let p = bundled("tool-call-assessment@v1");
        let names = ["matches_task", "missing_information", "violates_restriction"];
        let mut answers = serde_json::Map::new();
        for (i, n) in names.iter().enumerate() {
            answers.insert(n.to_string(), if i == which { json!(failure) } else { json!(ps[i]) });
        }
        let d = run(p, &json!({"answers": answers}));
        prop_assert_eq!(d.label(), "ask");
        prop_assert_eq!(d.matched_rule, "assessment.measurement-failed");
    }
}

#[test]
fn assessment_thresholds_count_ties_as_at_or_above() {
    let p = bundled("tool-call-assessment@v1");
    let rec = |m: f64, mi: f64, v: f64| json!({"answers": {"matches_task": m, "missing_information": mi, "violates_restriction": v}});
    assert_eq!(run(p, &rec(0.9, 0.1, 0.5)).label(), "deny");
    assert_eq!(run(p, &rec(0.9, 0.1, 0.49999)).label(), "allow");
    assert_eq!(run(p, &rec(0.9, 0.5, 0.1)).label(), "ask");
    assert_eq!(
        run(p, &rec(0.35, 0.1, 0.1)).label(),
        "allow",
        "0.35 is not below taskMatch 0.35"
    );
    assert_eq!(run(p, &rec(0.3499, 0.1, 0.1)).label(), "ask");
    // A decimal threshold equals the same decimal measured: 0.15 on both sides.
    let d = run_with(p, &rec(0.9, 0.1, 0.15), &[("restriction", 0.15)]);
    assert_eq!(d.label(), "deny");
    // Every hit contributes reasons; obligations are the union when the winner is not a denial.
    let d = run(p, &rec(0.2, 0.7, 0.1));
    assert_eq!(d.matched_rule, "assessment.missing-information");
    assert_eq!(d.suppressed_rules, ["assessment.task-mismatch"]);
    assert_eq!(d.reason_codes, ["MISSING_INFORMATION", "TASK_MISMATCH"]);
    assert_eq!(
        d.obligations,
        ["request_missing_information", "confirm_task_intent"]
    );
    // The optional risk score is recorded, never gates.
    let with_risk = json!({"answers": {"matches_task": 0.9, "missing_information": 0.1, "violates_restriction": 0.1,
        "risk": {"type": "score", "score": "critical", "probabilities": {"none": 0, "low": 0, "medium": 0, "high": 0.1, "critical": 0.9}}}});
    assert_eq!(run(p, &with_risk).label(), "allow");
}

#[test]
fn selection_skill_and_model_routing() {
    let sel = bundled("tool-selection@v1");
    let pick = |probs: Value| json!({"type": "choice", "probabilities": probs});
    let rec = json!({"answers": {
        "rel_files": 0.9, "pick_files": pick(json!({"fs.read": 0.8, "fs.write": 0.1, "__none__": 0.1})),
        "rel_web": 0.2, "pick_web": pick(json!({"web.search": 0.9, "__none__": 0.1})),
        "rel_mail": 0.9, "pick_mail": pick(json!({"mail.send": 0.1, "__none__": 0.9})),
    }});
    let d = run(sel, &rec);
    assert_eq!(d.label(), "selected/[fs.read]");
    assert_eq!(d.units.len(), 3);
    assert_eq!(d.matched_rule, "selection.select");
    let none = run(sel, &json!({"answers": {}}));
    assert_eq!(none.label(), "abstained/[]");
    assert_eq!(none.matched_rule, "selection.no-categories");
    let e = parse_record(
        sel,
        &json!({"answers": {"pick_files": pick(json!({"a": 1.0}))}}),
    )
    .unwrap_err();
    assert_eq!(
        e,
        RecordError::MissingRequired(vec!["answers.rel_files".into()])
    );

    let skill = bundled("skill-routing@v1");
    let d = run(
        skill,
        &json!({"answers": {"needs_skill": 0.7, "skill": pick(json!({"pdf": 0.6, "xlsx": 0.3, "__none__": 0.1}))}}),
    );
    assert_eq!(d.label(), "selected/pdf");
    let d = run(
        skill,
        &json!({"answers": {"needs_skill": 0.4, "skill": pick(json!({"pdf": 0.6, "__none__": 0.4}))}}),
    );
    assert_eq!(d.label(), "none/-");

    let model = bundled("model-routing@v1");
    let route =
        |probs: Value| json!({"answers": {"route": {"type": "choice", "probabilities": probs}}});
    let d = run(
        model,
        &route(json!({"fast": 0.1, "balanced": 0.2, "reasoning": 0.6, "default": 0.1})),
    );
    assert_eq!(d.label(), "reasoning");
    let d = run(
        model,
        &route(json!({"fast": 0.2, "balanced": 0.31, "reasoning": 0.39, "default": 0.1})),
    );
    assert_eq!(d.label(), "default");
}

#[test]
fn proposal_review_verdicts() {
    let p = bundled("proposal-review@v1");
    let rec = |validation: &str, a: f64, e: f64, u: f64, n: f64| {
        json!({"record": {"validation": validation},
               "answers": {"addresses_task": a, "evidence_supports": e, "unrelated_changes": u, "needs_clarification": n}})
    };
    assert_eq!(
        run(p, &rec("passed", 0.9, 0.85, 0.1, 0.2)).label(),
        "permit"
    );
    assert_eq!(
        run(p, &rec("passed", 0.8, 0.8, 0.2, 0.2)).label(),
        "permit",
        "confidence equal to threshold passes"
    );
    let d = run(p, &rec("passed", 0.7, 0.9, 0.6, 0.1));
    assert_eq!(d.label(), "proposal_only");
    assert_eq!(
        d.reason_codes,
        [
            "ADDRESSES_TASK_NOT_ESTABLISHED",
            "UNRELATED_CHANGES_NOT_EXCLUDED"
        ]
    );
    assert_eq!(run(p, &rec("failed", 0.9, 0.9, 0.1, 0.1)).label(), "reject");
    let mut missing = rec("passed", 0.9, 0.9, 0.1, 0.1);
    missing["answers"]["evidence_supports"] = json!("UNAVAILABLE");
    assert_eq!(run(p, &missing).label(), "unavailable");
    // A failed validation rejects even when the judge did not answer (before_failure).
    missing["record"]["validation"] = json!("failed");
    let d = run(p, &missing);
    assert_eq!(d.label(), "reject");
    assert_eq!(d.matched_rule, "review.validation-failed");
}

fn edited(file: &str, edit: impl FnOnce(&mut Value)) -> String {
    let mut doc: Value = serde_json::from_str(bundled_text(file)).unwrap();
    edit(&mut doc);
    doc.to_string()
}

fn load_err(text: &str) -> (String, String) {
    match load_policy(text) {
        Err(PolicyError::Invalid { path, message }) => (path, message),
        Err(other) => panic!("expected a validation error, got {other}"),
        Ok(_) => panic!("expected the policy to be rejected"),
    }
}

#[test]
fn proposal_review_threshold_outside_its_range_fails_to_load() {
    let (path, msg) = load_err(&edited("proposal-review.v1.json", |d| {
        d["params"]["threshold"]["default"] = json!(0.4)
    }));
    assert_eq!(path, "params.threshold.default");
    assert!(msg.contains("outside its range [0.5, 1]"), "{msg}");
    let (path, _) = load_err(&edited("proposal-review.v1.json", |d| {
        d["params"]["threshold"]["default"] = json!(1.2)
    }));
    assert_eq!(path, "params.threshold.default");
}

#[test]
fn loader_errors_name_the_json_path() {
    let f = "reliability.policy-v1.json";
    let cases: Vec<(String, &str, &str)> = vec![
        (
            edited(f, |d| d["rules"][0]["colour"] = json!("red")),
            "rules[0].colour",
            "unknown field `colour`",
        ),
        (
            edited(f, |d| {
                d["rules"][2]["when"]["all"][0]["input"] = json!("record.nope")
            }),
            "rules[2].when.all[0].input",
            "not a declared input",
        ),
        (
            edited(f, |d| d["rules"][6]["when"]["value"] = json!("MAYBE")),
            "rules[6].when.value",
            "\"MAYBE\" is not one of",
        ),
        (
            edited(f, |d| d["rules"][1]["id"] = json!("POLICY_PROHIBITED")),
            "rules[1].id",
            "used twice",
        ),
        (
            edited(f, |d| {
                d["rules"][0]["outcome"]["commitment"] = json!("MAYBE")
            }),
            "rules[0].outcome.commitment",
            "not a value of dimension",
        ),
        (
            edited(f, |d| {
                d["inputs"]["context.max_steps"]["default"] = json!(-1)
            }),
            "inputs.context.max_steps.default",
            "below the minimum 0",
        ),
        (
            edited(f, |d| {
                d["inputs"]["record.containment"]["type"] = json!("colour")
            }),
            "inputs.record.containment.type",
            "unknown type",
        ),
        (
            edited(f, |d| d["rules"][0]["when"]["param"] = json!("nope")),
            "rules[0].when",
            "exactly one of value",
        ),
        (
            edited(f, |d| {
                d["fallback"].as_array_mut().unwrap().pop();
            }),
            "fallback[0]",
            "must have no condition",
        ),
    ];
    for (text, path, needle) in cases {
        let (p, m) = load_err(&text);
        assert_eq!(p, path, "{m}");
        assert!(m.contains(needle), "{path}: {m}");
    }
    // A noul compared with an enum value is a type mismatch.
    let (p, m) = load_err(&edited("tool-call-assessment.v1.json", |d| {
        d["rules"][0]["when"] =
            json!({"input": "answers.violates_restriction", "op": "==", "value": "PASS"});
    }));
    assert_eq!(p, "rules[0].when");
    assert!(
        m.contains("is a probability; it cannot be compared with \"PASS\""),
        "{m}"
    );
    // An ordering operator on an enum.
    let (p, _) = load_err(&edited(f, |d| d["rules"][6]["when"]["op"] = json!(">=")));
    assert_eq!(p, "rules[6].when.op");
    // Strict JSON: duplicate keys are refused with their path.
    let e = load_policy(r#"{"jev_policy": 1, "name": "a", "name": "b"}"#).unwrap_err();
    assert!(e.to_string().contains("duplicate key"), "{e}");
}

#[test]
fn lint_rejects_an_allowing_failure_and_exclusion_based_acceptance() {
    let allow_on_failure = load_policy(&edited("tool-call-assessment.v1.json", |d| {
        d["failure"]["outcome"]["action"] = json!("allow");
    }))
    .unwrap();
    let findings = lint(&allow_on_failure);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].path, "failure.outcome.action");

    let exclusion = load_policy(&edited("reliability.policy-v2.json", |d| {
        let clean = &mut d["fallback"][0]["when"]["all"];
        let last = clean.as_array().unwrap().len() - 1;
        clean[last] = json!({"input": "record.provenance", "op": "!=", "value": "UNVERIFIED"});
    }))
    .unwrap();
    let findings = lint(&exclusion);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].path, "fallback[0].when.all[3]");
    assert!(findings[0].message.contains("record.provenance"));

    // The same exclusion written as not(in [...]) is caught too.
    let negated = load_policy(&edited("reliability.policy-v2.json", |d| {
        d["fallback"][0]["when"]["all"][3] =
            json!({"not": {"input": "record.provenance", "op": "in", "values": ["UNVERIFIED", "UNAVAILABLE"]}});
    }))
    .unwrap();
    assert_eq!(lint(&negated).len(), 1);

    // Any rule, not only fallbacks: a prioritised PERMIT rule accepting by exclusion.
    let routed = load_policy(&edited("reliability.policy-v1.json", |d| {
        d["rules"][0]["when"] = json!({"input": "record.sensitivity", "op": "!=", "value": "FAIL"});
        d["rules"][0]["outcome"]["commitment"] = json!("PERMIT");
    }))
    .unwrap();
    assert_eq!(lint(&routed).len(), 1);
}

#[test]
fn digest_ignores_formatting_but_not_meaning() {
    let text = bundled_text("reliability.policy-v1.json");
    let compact: Value = serde_json::from_str(text).unwrap();
    let a = load_policy(text).unwrap();
    let b = load_policy(&compact.to_string()).unwrap();
    assert_eq!(a.digest, b.digest);
    let c = load_policy(&edited("reliability.policy-v1.json", |d| {
        d["rules"][1]["priority"] = json!(96)
    }))
    .unwrap();
    assert_ne!(a.digest, c.digest);
}
