//! Receipts: one decision, hashed. The digest is `sha256:` + hex SHA-256 of the RFC 8785
//! canonical form of the receipt without its `digest` member, so any change to what was
//! decided, under which policy, from which input, shows.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::canonical::{self, JsonError};
use crate::policy::Decision;
use crate::policy::model::{Policy, QuestionSetRef};

/// The receipt format version this build writes and reads.
pub const FORMAT_VERSION: u64 = 1;

/// The policy a receipt was decided under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyBinding {
    pub name: String,
    pub version: String,
    pub digest: String,
}

impl PolicyBinding {
    pub fn of(policy: &Policy) -> PolicyBinding {
        PolicyBinding {
            name: policy.name.clone(),
            version: policy.version.clone(),
            digest: policy.digest.clone(),
        }
    }
    pub fn reference(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}

/// Where a decision's judge measurements came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    pub question_set: QuestionSetRef,
    pub model_requested: String,
    pub model: String,
    pub backend: String,
    pub request_id: Option<String>,
}

/// A parsed receipt, with the digest its content actually hashes to.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub id: String,
    pub created_at: String,
    pub policy: PolicyBinding,
    /// The record's sections (`record`, `answers`, `context`, `history`) as decided.
    pub input: Value,
    pub measurement: Option<Measurement>,
    /// Param values the decision used, by name.
    pub params: Map<String, Value>,
    /// The decision object as written (`Decision::to_json`).
    pub decision: Map<String, Value>,
    pub digest: String,
    /// The digest computed over the document as read (without its `digest` member).
    pub computed_digest: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    #[error("{0}")]
    Json(#[from] JsonError),
    #[error("{path}: {message}")]
    Shape { path: String, message: String },
    #[error("digest mismatch: the receipt says {recorded}, its content hashes to {computed}")]
    Digest { recorded: String, computed: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReceipt {
    jev_receipt: u64,
    id: String,
    created_at: String,
    policy: PolicyBinding,
    input: Map<String, Value>,
    measurement: Option<Measurement>,
    #[serde(default)]
    params: Map<String, Value>,
    decision: Map<String, Value>,
    digest: String,
}

/// The digest a receipt document should carry: over everything but `digest`.
pub fn compute_digest(doc: &Value) -> String {
    canonical::sha256_prefixed(canonical::canonical_string_without(doc, "digest").as_bytes())
}

/// Parses a receipt strictly (duplicate keys, unsafe integers, unknown fields refused) and
/// checks its shape. The digest is checked separately by [`check_digest`], so a tampered
/// receipt can still be named and reported.
pub fn parse(text: &str) -> Result<Receipt, ReceiptError> {
    let raw = canonical::parse_strict(text)?;
    let computed_digest = compute_digest(&raw);
    // The fast path moves the document into its typed form; only a receipt that does not fit
    // is decoded again, from a fresh parse, to name the place that is wrong.
    match serde_json::from_value::<RawReceipt>(raw) {
        Ok(r) => typed(r, computed_digest),
        Err(_) => {
            let again = canonical::parse_strict(text)?;
            Err(
                match serde_path_to_error::deserialize::<_, RawReceipt>(&again) {
                    Err(e) => ReceiptError::Shape {
                        path: match e.path().to_string() {
                            p if p == "." => "(receipt)".into(),
                            p => p,
                        },
                        message: e.inner().to_string(),
                    },
                    Ok(_) => ReceiptError::Shape {
                        path: "(receipt)".into(),
                        message: "does not have the receipt shape".into(),
                    },
                },
            )
        }
    }
}

fn typed(r: RawReceipt, computed_digest: String) -> Result<Receipt, ReceiptError> {
    if r.jev_receipt != FORMAT_VERSION {
        return Err(ReceiptError::Shape {
            path: "jev_receipt".into(),
            message: format!(
                "format version {} is not supported (expected {FORMAT_VERSION})",
                r.jev_receipt
            ),
        });
    }
    Ok(Receipt {
        id: r.id,
        created_at: r.created_at,
        policy: r.policy,
        input: Value::Object(r.input),
        measurement: r.measurement,
        params: r.params,
        decision: r.decision,
        digest: r.digest,
        computed_digest,
    })
}

/// Recomputes the digest and compares it with the recorded one.
pub fn check_digest(receipt: &Receipt) -> Result<(), ReceiptError> {
    let computed = receipt.computed_digest.clone();
    if computed == receipt.digest {
        Ok(())
    } else {
        Err(ReceiptError::Digest {
            recorded: receipt.digest.clone(),
            computed,
        })
    }
}

/// Builds a receipt document (with its digest) for one decision.
pub fn build(
    policy: &Policy,
    id: &str,
    created_at: &str,
    input: Value,
    measurement: Option<&Measurement>,
    params: &[f64],
    decision: &Decision,
) -> Value {
    let params: Map<String, Value> = policy
        .params
        .iter()
        .zip(params)
        .map(|(p, v)| (p.name.clone(), json!(v)))
        .collect();
    let mut doc = json!({
        "jev_receipt": FORMAT_VERSION,
        "id": id,
        "created_at": created_at,
        "policy": PolicyBinding::of(policy),
        "input": input,
        "measurement": measurement,
        "params": params,
        "decision": decision.to_json(policy),
    });
    let digest = compute_digest(&doc);
    doc["digest"] = Value::String(digest);
    doc
}

/// The sections of a record that a receipt keeps as its input (metadata such as `id` and
/// `measurement` is carried separately).
pub fn input_of(record: &Value) -> Value {
    match record {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !crate::record::METADATA_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A file name for a receipt id: letters, digits, `-`, `_` and `.` kept, anything else `_`.
pub fn file_name(id: &str) -> String {
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = safe.trim_start_matches('.');
    if safe.is_empty() {
        "receipt.json".into()
    } else {
        format!("{safe}.json")
    }
}

/// Formats a Unix time (seconds) as RFC 3339 UTC: `2026-11-29T21:08:23Z`.
pub fn rfc3339_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm), valid for the proleptic Gregorian calendar.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        (rem % 3_600) / 60,
        rem % 60
    )
}

/// True for an RFC 3339 UTC timestamp of the form jev writes.
pub fn is_rfc3339_utc(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(1_796_000_000), "2026-11-30T00:53:20Z");
        assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert!(is_rfc3339_utc("2026-01-01T00:00:00Z"));
        assert!(!is_rfc3339_utc("2026-01-01 00:00:00"));
    }

    #[test]
    fn file_names_are_safe() {
        assert_eq!(file_name("clean"), "clean.json");
        assert_eq!(file_name("../../etc/passwd"), "_.._etc_passwd.json");
        assert_eq!(file_name(""), "receipt.json");
    }
}
