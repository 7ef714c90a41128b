//! What may leave the machine: a state is redacted and bounded before any backend sees it.
//!
//! - Members whose name contains `password`, `token`, `apikey`, `api_key`, `authorization`,
//!   `cookie`, `credential` or `secret` (any case) become `"[redacted]"`.
//! - Strings, arrays, objects and depth are capped, each cut marked explicitly.
//! - A tool call's `arguments` larger than [`MAX_ARGUMENTS_BYTES`] are not sent at all: the
//!   state is incomplete and every question on it measures as `INCOMPLETE_INPUT`.

use serde_json::{Map, Value};

use crate::canonical;

pub const SECRET_MARKERS: [&str; 8] = [
    "password",
    "token",
    "apikey",
    "api_key",
    "authorization",
    "cookie",
    "credential",
    "secret",
];
pub const REDACTED: &str = "[redacted]";
pub const MAX_STRING_CHARS: usize = 4_000;
pub const MAX_ARRAY_ITEMS: usize = 100;
pub const MAX_OBJECT_KEYS: usize = 100;
pub const MAX_DEPTH: usize = 16;
pub const MAX_ARGUMENTS_BYTES: usize = 16 * 1024;

/// The state as it may be sent, or why it may not.
#[derive(Debug, Clone, PartialEq)]
pub enum Bounded {
    Send {
        state: Value,
        truncated: bool,
    },
    /// The tool-call arguments exceed the bound; nothing is sent.
    Incomplete {
        bytes: usize,
    },
}

pub fn bound(state: &Value) -> Bounded {
    if let Some(args) = state.get("arguments") {
        let bytes = canonical::canonical_string(args).len();
        if bytes > MAX_ARGUMENTS_BYTES {
            return Bounded::Incomplete { bytes };
        }
    }
    let mut truncated = false;
    let state = walk(state, 0, &mut truncated);
    Bounded::Send { state, truncated }
}

fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    SECRET_MARKERS.iter().any(|m| k.contains(m))
}

fn walk(v: &Value, depth: usize, truncated: &mut bool) -> Value {
    if depth >= MAX_DEPTH && (v.is_array() || v.is_object()) {
        *truncated = true;
        return Value::String(format!(
            "[truncated: nested deeper than {MAX_DEPTH} levels]"
        ));
    }
    match v {
        Value::String(s) => {
            let n = s.chars().count();
            if n > MAX_STRING_CHARS {
                *truncated = true;
                let kept: String = s.chars().take(MAX_STRING_CHARS).collect();
                Value::String(format!("{kept}…[truncated {} chars]", n - MAX_STRING_CHARS))
            } else {
                v.clone()
            }
        }
        Value::Array(items) => {
            let mut out: Vec<Value> = items
                .iter()
                .take(MAX_ARRAY_ITEMS)
                .map(|x| walk(x, depth + 1, truncated))
                .collect();
            if items.len() > MAX_ARRAY_ITEMS {
                *truncated = true;
                out.push(Value::String(format!(
                    "[truncated {} items]",
                    items.len() - MAX_ARRAY_ITEMS
                )));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, x) in map.iter().take(MAX_OBJECT_KEYS) {
                let value = if is_secret(k) {
                    Value::String(REDACTED.into())
                } else {
                    walk(x, depth + 1, truncated)
                };
                out.insert(k.clone(), value);
            }
            if map.len() > MAX_OBJECT_KEYS {
                *truncated = true;
                out.insert(
                    "[truncated]".into(),
                    Value::String(format!("{} more keys", map.len() - MAX_OBJECT_KEYS)),
                );
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let s = json!({"task": "t", "arguments": {"headers": {"Authorization": "Bearer x", "X-Api_Key": "k"},
                       "nested": [{"db_password": "p", "ok": 1}]}});
        let Bounded::Send { state, truncated } = bound(&s) else {
            panic!()
        };
        assert!(!truncated);
        assert_eq!(state["arguments"]["headers"]["Authorization"], REDACTED);
        assert_eq!(state["arguments"]["headers"]["X-Api_Key"], REDACTED);
        assert_eq!(state["arguments"]["nested"][0]["db_password"], REDACTED);
        assert_eq!(state["arguments"]["nested"][0]["ok"], 1);
    }

    #[test]
    fn oversized_arguments_are_not_sent() {
        let s =
            json!({"task": "t", "arguments": {"content": "x".repeat(MAX_ARGUMENTS_BYTES + 10)}});
        assert!(matches!(bound(&s), Bounded::Incomplete { .. }));
    }

    #[test]
    fn long_strings_and_arrays_are_cut_with_a_marker() {
        let s =
            json!({"task": "y".repeat(MAX_STRING_CHARS + 5), "list": vec![1; MAX_ARRAY_ITEMS + 3]});
        let Bounded::Send { state, truncated } = bound(&s) else {
            panic!()
        };
        assert!(truncated);
        assert!(
            state["task"]
                .as_str()
                .unwrap()
                .ends_with("…[truncated 5 chars]")
        );
        assert_eq!(state["list"].as_array().unwrap().len(), MAX_ARRAY_ITEMS + 1);
    }
}
