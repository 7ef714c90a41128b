//! Strict JSON parsing and RFC 8785 (JCS) canonical form.
//!
//! Everything jev hashes goes through [`parse_strict`] and [`canonical_string`]:
//! the parser refuses documents whose meaning is ambiguous (duplicate keys, integers a
//! JavaScript reader would round), and the canonicalizer writes the one byte sequence RFC 8785
//! assigns to a value, so a digest does not depend on formatting.

use std::cell::RefCell;
use std::fmt::{self, Write as _};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use sha2::{Digest as _, Sha256};

/// Largest integer magnitude an IEEE double (and so an RFC 8785 reader) represents exactly.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Why a document was refused by the strict parser. `path` is the JSON path (`a.b[2]`) of the
/// value being read when parsing stopped; `line`/`column` are 1-based positions in the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message} (line {line}, column {column})", path_prefix(path))]
pub struct JsonError {
    pub path: String,
    pub message: String,
    pub line: usize,
    pub column: usize,
}

fn path_prefix(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

/// One step of a JSON path.
#[derive(Debug, Clone)]
enum Segment {
    Key(String),
    Index(usize),
}

/// Renders a path the way jev prints it everywhere: `record.provenance`, `rules[3].when`.
fn render_path(segments: &[Segment]) -> String {
    let mut out = String::new();
    for seg in segments {
        match seg {
            Segment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Segment::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    out
}

/// Parses `text` as one JSON document, refusing duplicate object keys, lone surrogates,
/// integers beyond ±(2^53−1) and numbers that do not fit a finite double.
///
/// Nesting deeper than serde_json's recursion limit (128) is an error, never a stack overflow.
pub fn parse_strict(text: &str) -> Result<Value, JsonError> {
    let path = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_str(text);
    let result = StrictSeed { path: &path }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    result.map_err(|e| JsonError {
        path: render_path(&path.borrow().iter().rev().cloned().collect::<Vec<_>>()),
        message: strip_position(&e),
        line: e.line(),
        column: e.column(),
    })
}

/// serde_json appends " at line L column C" to its messages; we report position separately.
fn strip_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

struct StrictSeed<'p> {
    path: &'p RefCell<Vec<Segment>>,
}

impl<'de> DeserializeSeed<'de> for StrictSeed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictVisitor { path: self.path })
    }
}

struct StrictVisitor<'p> {
    path: &'p RefCell<Vec<Segment>>,
}

fn unsafe_integer<E: de::Error>(text: impl fmt::Display) -> E {
    E::custom(format_args!(
        "integer {text} is beyond ±(2^53−1) and cannot be represented exactly"
    ))
}

impl<'de> Visitor<'de> for StrictVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        if v > MAX_SAFE_INTEGER {
            return Err(unsafe_integer(v));
        }
        Ok(Value::Number(v.into()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        if v.unsigned_abs() > MAX_SAFE_INTEGER {
            return Err(unsafe_integer(v));
        }
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            match seq.next_element_seed(StrictSeed { path: self.path }) {
                Ok(Some(v)) => out.push(v),
                Ok(None) => return Ok(Value::Array(out)),
                Err(e) => {
                    // The path is recorded only on the way out of an error, innermost first.
                    self.path.borrow_mut().push(Segment::Index(out.len()));
                    return Err(e);
                }
            }
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                let e = de::Error::custom(format_args!("duplicate key {key:?}"));
                self.path.borrow_mut().push(Segment::Key(key));
                return Err(e);
            }
            match map.next_value_seed(StrictSeed { path: self.path }) {
                Ok(value) => {
                    out.insert(key, value);
                }
                Err(e) => {
                    self.path.borrow_mut().push(Segment::Key(key));
                    return Err(e);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// Writes the RFC 8785 canonical form of `value`.
pub fn canonical_string(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// The SHA-256 of the canonical form, as jev writes digests: `sha256:` + lowercase hex.
pub fn canonical_digest(value: &Value) -> String {
    sha256_prefixed(canonical_string(value).as_bytes())
}

/// `sha256:` + lowercase hex SHA-256 of `bytes`.
pub fn sha256_prefixed(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of any byte string.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(map, None, out),
    }
}

/// RFC 8785 §3.2.3: members sorted by the UTF-16 code units of their names (compared without
/// allocating; this differs from UTF-8 order only above U+FFFF). `skip` leaves one member out.
fn write_object(map: &Map<String, Value>, skip: Option<&str>, out: &mut String) {
    let mut entries: Vec<(&String, &Value)> = map
        .iter()
        .filter(|(k, _)| Some(k.as_str()) != skip)
        .collect();
    entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    out.push('{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(k, out);
        out.push(':');
        write_canonical(v, out);
    }
    out.push('}');
}

/// The canonical form of an object without one of its members (a receipt without `digest`),
/// with no copy of the object made.
pub fn canonical_string_without(value: &Value, skip: &str) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) => write_object(map, Some(skip), &mut out),
        other => write_canonical(other, &mut out),
    }
    out
}

/// ECMAScript `Number.prototype.toString` of the number's double value (RFC 8785 §3.2.2.3).
fn write_number(n: &Number, out: &mut String) {
    let f = if let Some(u) = n.as_u64() {
        u as f64
    } else if let Some(i) = n.as_i64() {
        i as f64
    } else {
        n.as_f64().unwrap_or(0.0)
    };
    if f == 0.0 {
        // -0 serializes as 0.
        out.push('0');
        return;
    }
    let mut buf = ryu_js::Buffer::new();
    out.push_str(buf.format_finite(f));
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    // Copy runs of characters that need no escaping in one go.
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{:04x}", b);
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(text: &str) -> String {
        canonical_string(&parse_strict(text).unwrap())
    }

    #[test]
    fn ecmascript_number_cases() {
        assert_eq!(canon("1e21"), "1e+21");
        assert_eq!(canon("1e-7"), "1e-7");
        assert_eq!(canon("0.30000000000000004"), "0.30000000000000004");
        assert_eq!(canon("-0"), "0");
        assert_eq!(canon("-0.0"), "0");
        assert_eq!(canon("5e-324"), "5e-324");
        assert_eq!(canon("1.7976931348623157e308"), "1.7976931348623157e+308");
        assert_eq!(canon("123456789012345680000"), "123456789012345680000");
        assert_eq!(canon("1E30"), "1e+30");
        assert_eq!(canon("4.50"), "4.5");
        assert_eq!(canon("9007199254740991"), "9007199254740991");
    }

    #[test]
    fn sum_of_point_one_and_point_two() {
        let v = serde_json::json!(0.1_f64 + 0.2_f64);
        assert_eq!(canonical_string(&v), "0.30000000000000004");
    }

    #[test]
    fn strict_parser_refusals_name_the_path() {
        let e = parse_strict(r#"{"a": {"b": 1, "b": 2}}"#).unwrap_err();
        assert!(e.message.contains("duplicate key \"b\""), "{e}");
        assert_eq!(e.path, "a.b");
        let e = parse_strict(r#"{"x": [1, 9007199254740992]}"#).unwrap_err();
        assert!(e.message.contains("2^53"), "{e}");
        assert_eq!(e.path, "x[1]");
        let e = parse_strict(r#"{"x": -9007199254740992}"#).unwrap_err();
        assert!(e.message.contains("2^53"), "{e}");
        let e = parse_strict(r#"{"p": 1e400}"#).unwrap_err();
        assert_eq!(e.path, "p");
        for lone in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800x""#,
            r#""\ud800\u0041""#,
        ] {
            assert!(parse_strict(lone).is_err(), "{lone} must be refused");
        }
        assert_eq!(parse_strict(r#""\ud83d\ude02""#).unwrap(), "\u{1F602}");
        assert!(parse_strict("NaN").is_err());
        assert!(parse_strict("{} {}").is_err());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = "[".repeat(200_000) + &"]".repeat(200_000);
        let e = parse_strict(&text).unwrap_err();
        assert!(e.message.contains("recursion limit"), "{e}");
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+1F602 (surrogates D83D DE02) sorts before U+FB33 in UTF-16, after it in UTF-8.
        let out = canon(r#"{"\ufb33": 1, "\ud83d\ude02": 2, "a": 3}"#);
        assert_eq!(out, "{\"a\":3,\"\u{1F602}\":2,\"\u{FB33}\":1}");
    }

    #[test]
    fn digest_is_prefixed_lowercase_hex() {
        let d = canonical_digest(&serde_json::json!({}));
        assert_eq!(
            d,
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-(MAX_SAFE_INTEGER as i64)..=MAX_SAFE_INTEGER as i64).prop_map(Value::from),
            // Doubles in [2^53, 1e21) print as integer tokens, which the strict parser refuses
            // by design (an integer beyond ±(2^53−1) is ambiguous to most readers).
            any::<f64>()
                .prop_filter("finite, strictly parseable once printed", |f| {
                    f.is_finite() && (f.abs() <= MAX_SAFE_INTEGER as f64 || f.abs() >= 1e21)
                })
                .prop_map(Value::from),
            "\\PC{0,12}".prop_map(Value::String),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec((any::<String>(), inner), 0..8)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// Numbers compare by their double value: canonical form keeps the value, not the token.
    fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
            }
            _ => a == b,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn canonical_form_reparses_to_an_equal_value_and_is_a_fixed_point(v in json_value()) {
            let once = canonical_string(&v);
            let back = parse_strict(&once).expect("canonical output parses strictly");
            prop_assert!(same(&v, &back), "{} vs {}", v, back);
            prop_assert_eq!(canonical_string(&back), once);
        }
    }
}
