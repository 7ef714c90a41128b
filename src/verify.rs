//! Verifying receipts: strict parse, digest, policy binding (drift), offline re-derivation of
//! the decision field by field, and the directory seal. Every check that cannot be made is a
//! failure: verification fails closed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::policy::model::Policy;
use crate::policy::registry;
use crate::policy::{Decision, decide};
use crate::receipt::{self, Receipt};
use crate::record::{RecordError, parse_record};
use crate::seal;

/// Policies by `NAME@VERSION`, looked up once each (policy directory, then bundled) and
/// shared by the threads verifying receipts.
pub struct Policies {
    dir: Option<PathBuf>,
    cache: Mutex<HashMap<String, Arc<Result<Policy, String>>>>,
    warnings: Mutex<Vec<String>>,
}

impl Policies {
    pub fn new(dir: Option<PathBuf>) -> Policies {
        Policies {
            dir,
            cache: Mutex::new(HashMap::new()),
            warnings: Mutex::new(Vec::new()),
        }
    }

    pub fn get(&self, reference: &str) -> Arc<Result<Policy, String>> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = cache.get(reference) {
            return Arc::clone(found);
        }
        let found = registry::resolve(reference, self.dir.as_deref())
            .map(|r| {
                self.warnings
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(r.warnings);
                r.located.policy
            })
            .map_err(|e| e.to_string());
        let found = Arc::new(found);
        cache.insert(reference.to_owned(), Arc::clone(&found));
        found
    }

    /// Lookup warnings (a local copy differing from the bundled one), for the caller to show.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The result of checking one receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptReport {
    pub id: Option<String>,
    pub errors: Vec<String>,
}

/// Param values for `policy` from a receipt's `params` (defaults for any the receipt omits
/// only when it has none at all, as receipts of param-less policies do).
pub fn receipt_params(policy: &Policy, receipt: &Receipt) -> Result<Vec<f64>, String> {
    if let Some(name) = receipt
        .params
        .keys()
        .find(|k| policy.param_index(k).is_none())
    {
        return Err(format!(
            "params.{name}: {} has no such param",
            policy.reference()
        ));
    }
    let mut values = Vec::with_capacity(policy.params.len());
    for p in &policy.params {
        let v = match receipt.params.get(&p.name) {
            None => {
                return Err(format!(
                    "params.{}: missing (the receipt must record every param)",
                    p.name
                ));
            }
            Some(v) => v
                .as_f64()
                .ok_or_else(|| format!("params.{}: expected a number", p.name))?,
        };
        if !(p.lo..=p.hi).contains(&v) {
            return Err(format!(
                "params.{}: {v} is outside the declared range [{}, {}]",
                p.name, p.lo, p.hi
            ));
        }
        values.push(v);
    }
    Ok(values)
}

/// Decides a receipt's input under `policy` (with the given params).
pub fn rederive(
    policy: &Policy,
    receipt: &Receipt,
    params: &[f64],
) -> Result<Decision, RecordError> {
    let record = parse_record(policy, &receipt.input)?;
    Ok(decide(policy, &record, params))
}

/// Checks one receipt given as text.
pub fn verify_text(text: &str, policies: &Policies) -> ReceiptReport {
    // The TypeScript harness's bound receipts are recognised by their envelope.
    if text.contains("\"bindingVersion\"") {
        if let Ok(v) = crate::canonical::parse_strict(text) {
            if crate::harness::is_envelope(&v) {
                return match policies.get("proposal-review@v1").as_ref() {
                    Ok(review) => {
                        let (id, errors) = crate::harness::verify(&v, review);
                        ReceiptReport { id, errors }
                    }
                    Err(e) => ReceiptReport {
                        id: None,
                        errors: vec![format!("policy: {e}")],
                    },
                };
            }
        }
    }
    let receipt = match receipt::parse(text) {
        Ok(r) => r,
        Err(e) => {
            return ReceiptReport {
                id: None,
                errors: vec![format!("parse: {e}")],
            };
        }
    };
    let mut errors = Vec::new();
    if let Err(e) = receipt::check_digest(&receipt) {
        errors.push(e.to_string());
    }
    if !receipt::is_rfc3339_utc(&receipt.created_at) {
        errors.push(format!(
            "created_at: {:?} is not an RFC 3339 UTC timestamp",
            receipt.created_at
        ));
    }
    let reference = receipt.policy.reference();
    match policies.get(&reference).as_ref() {
        Err(e) => errors.push(format!("policy: {e}")),
        Ok(policy) => {
            if policy.digest != receipt.policy.digest {
                errors.push(format!(
                    "policy drift: {reference} is {} here but the receipt was decided under {} (the policy changed without a version bump)",
                    policy.digest, receipt.policy.digest
                ));
            } else {
                errors.extend(binding_errors(policy, &receipt));
            }
        }
    }
    ReceiptReport {
        id: Some(receipt.id),
        errors,
    }
}

/// Measurement binding and re-derivation, for a receipt whose policy digest matches.
fn binding_errors(policy: &Policy, receipt: &Receipt) -> Vec<String> {
    let mut errors = Vec::new();
    if let (Some(want), Some(m)) = (&policy.question_set, &receipt.measurement) {
        if want != &m.question_set {
            errors.push(format!(
                "measurement.question_set: {} {} differs from the policy's {} {}",
                m.question_set.id, m.question_set.digest, want.id, want.digest
            ));
        }
    }
    let params = match receipt_params(policy, receipt) {
        Ok(p) => p,
        Err(e) => {
            errors.push(e);
            return errors;
        }
    };
    match rederive(policy, receipt, &params) {
        Err(e) => errors.push(format!("input: {e}")),
        Ok(decision) => {
            let derived = decision.to_json(policy);
            let mut keys: Vec<&String> = receipt.decision.keys().chain(derived.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let recorded = receipt.decision.get(key).unwrap_or(&Value::Null);
                let again = derived.get(key).unwrap_or(&Value::Null);
                if recorded != again {
                    errors.push(format!(
                        "decision.{key}: recorded {recorded}, re-derived {again}"
                    ));
                }
            }
        }
    }
    errors
}

/// A directory's seal check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealReport {
    pub dir: PathBuf,
    pub present: bool,
    pub errors: Vec<String>,
    /// Signed by the trusted key, over an intact chain.
    pub authenticated: bool,
}

/// Checks `dir` against its seal: the file set, hashes, count and root; the chain of earlier
/// seals; and with `trust`, every signature in the chain.
pub fn verify_seal(dir: &Path, trust: Option<&crate::sign::Key>) -> SealReport {
    let (present, errors, authenticated) = match seal::read_seal(dir) {
        Ok(None) => (false, Vec::new(), false),
        Ok(Some(s)) => {
            let mut errors = match seal::check(dir, &s) {
                Ok(errors) => errors,
                Err(e) => vec![e.to_string()],
            };
            let (chain_errors, signed) = seal::check_chain(dir, &s, trust);
            errors.extend(chain_errors);
            let authenticated = signed && errors.is_empty();
            (true, errors, authenticated)
        }
        Err(e) => (true, vec![e.to_string()], false),
    };
    SealReport {
        dir: dir.to_owned(),
        present,
        errors,
        authenticated,
    }
}
