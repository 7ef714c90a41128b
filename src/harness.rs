//! The TypeScript proposal-review harness's bound receipt envelope (`bindingVersion` 1):
//! `{bindingVersion, receipt, binding, integrity: {algorithm: "sha256", digest}}`, where the
//! digest is the hex SHA-256 of the canonical `{bindingVersion, receipt, binding}`. jev checks
//! the digest, the binding (policy version, question-set version 3, threshold in [0.5, 1],
//! provenance), the recorded answers' derived fields, and re-derives the verdict with the
//! bundled `proposal-review@v1` policy at the binding's threshold.

use serde_json::{Value, json};

use crate::canonical;
use crate::policy::model::Policy;
use crate::policy::{OutcomeValue, decide};
use crate::record::parse_record;

/// The question-set version the harness binds for its four review questions.
pub const QUESTION_SET_VERSION: i64 = 3;
pub const POLICY_VERSION: &str = "review-invariants-v1";
const QUESTIONS: [&str; 4] = [
    "addresses_task",
    "evidence_supports",
    "unrelated_changes",
    "needs_clarification",
];

/// True when a parsed document is a harness envelope rather than a jev receipt.
pub fn is_envelope(v: &Value) -> bool {
    v.get("bindingVersion").is_some()
}

/// The digest the envelope must carry.
pub fn digest(v: &Value) -> String {
    let payload = json!({"bindingVersion": v["bindingVersion"], "receipt": v["receipt"], "binding": v["binding"]});
    canonical::sha256_hex(canonical::canonical_string(&payload).as_bytes())
}

/// Checks an envelope; returns the receipt's id (its `fixtureId` and arm) and every problem.
pub fn verify(v: &Value, review: &Policy) -> (Option<String>, Vec<String>) {
    let mut errors = Vec::new();
    let receipt = &v["receipt"];
    let binding = &v["binding"];
    let id = match (receipt["fixtureId"].as_str(), receipt["arm"].as_str()) {
        (Some(f), Some(a)) => Some(format!("{f}/{a}")),
        (Some(f), None) => Some(f.to_owned()),
        _ => None,
    };
    if let Some(k) = v.as_object().and_then(|o| {
        o.keys()
            .find(|k| !["bindingVersion", "receipt", "binding", "integrity"].contains(&k.as_str()))
    }) {
        errors.push(format!("{k}: not a member of a bound receipt"));
    }
    if v["bindingVersion"] != json!(1) {
        errors.push(format!(
            "bindingVersion: {} is not supported (expected 1)",
            v["bindingVersion"]
        ));
        return (id, errors);
    }
    let integrity = &v["integrity"];
    if integrity["algorithm"] != json!("sha256") {
        errors.push("integrity.algorithm: expected \"sha256\"".into());
    }
    let computed = digest(v);
    match integrity["digest"].as_str() {
        Some(d) if d == computed => {}
        Some(d) => errors.push(format!(
            "digest mismatch: the envelope says {d}, its content hashes to {computed}"
        )),
        None => errors.push("integrity.digest: expected a hex string".into()),
    }
    if binding["policyVersion"] != json!(POLICY_VERSION) {
        errors.push(format!(
            "binding.policyVersion: expected {POLICY_VERSION:?}"
        ));
    }
    if binding["questionSetVersion"].as_i64() != Some(QUESTION_SET_VERSION) {
        errors.push(format!(
            "binding.questionSetVersion: {} is not the review question set this verifier knows ({QUESTION_SET_VERSION})",
            binding["questionSetVersion"]
        ));
    }
    let threshold = binding["threshold"]
        .as_f64()
        .filter(|t| (0.5..=1.0).contains(t));
    let Some(threshold) = threshold else {
        errors.push(format!(
            "binding.threshold: {} is not in [0.5, 1]",
            binding["threshold"]
        ));
        return (id, errors);
    };
    if receipt["mode"] != json!("plus_jev") {
        errors.push("receipt.mode: only reviewed (plus_jev) receipts can be re-derived with proposal-review".into());
        return (id, errors);
    }
    let validation = match receipt["validation"]["ok"].as_bool() {
        Some(true) => "passed",
        Some(false) => "failed",
        None => {
            errors.push("receipt.validation.ok: expected true or false".into());
            return (id, errors);
        }
    };
    let mut answers = serde_json::Map::new();
    for q in QUESTIONS {
        let a = &receipt["jev"]["answers"][q];
        let value = match a["probability"].as_f64() {
            Some(p) if (0.0..=1.0).contains(&p) => {
                let want_answer = if p >= 0.5 { "yes" } else { "no" };
                if a["answer"] != json!(want_answer)
                    || a["confidence"].as_f64() != Some(p.max(1.0 - p))
                {
                    errors.push(format!("receipt.jev.answers.{q}: answer/confidence do not follow from probability {p}"));
                }
                json!(p)
            }
            _ => json!("UNAVAILABLE"),
        };
        answers.insert(q.to_owned(), value);
    }
    let record = json!({"record": {"validation": validation}, "answers": answers});
    let derived = match parse_record(review, &record) {
        Ok(r) => {
            let mut params = review.default_params();
            if let Some(i) = review.param_index("threshold") {
                params[i] = threshold;
            }
            decide(review, &r, &params)
        }
        Err(e) => {
            errors.push(format!("re-derivation: {e}"));
            return (id, errors);
        }
    };
    let verdict = match &derived.outcome[0] {
        OutcomeValue::One(v) => v.clone(),
        other => other.label(),
    };
    if receipt["verdict"] != json!(verdict) {
        errors.push(format!(
            "receipt.verdict: recorded {}, re-derived {verdict:?} at threshold {threshold}",
            receipt["verdict"]
        ));
    }
    let status = if verdict == "permit" || verdict == "proposal_only" {
        "recorded_pending"
    } else {
        "withheld"
    };
    if receipt["execution"]["applied"] != json!(false)
        || receipt["execution"]["status"] != json!(status)
    {
        errors.push(format!(
            "receipt.execution: expected applied false and status {status:?}"
        ));
    }
    (id, errors)
}
