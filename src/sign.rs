//! Keys and signatures for seals: Ed25519 (ed25519-dalek, strict verification) or, with a
//! shared secret, HMAC-SHA256. The signed message is domain-separated — `jev-seal-v1`, a zero
//! byte, then the RFC 8785 form of the seal without its signature — so a signature over a seal
//! can never be replayed as a signature over anything else.
//!
//! Key files are JSON: `{"jev_key": 1, "algorithm": "ed25519", "secret": HEX}` (keep private),
//! `{"jev_key": 1, "algorithm": "ed25519", "public": HEX}` (give to verifiers), or
//! `{"jev_key": 1, "algorithm": "hmac-sha256", "secret": HEX}` (the same file on both sides).
//! Secrets never appear in output: keys are named by their id (a hash prefix).

use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::canonical::{self, hex};

/// Prefix of every signed message.
pub const DOMAIN: &[u8] = b"jev-seal-v1\0";
pub const ED25519: &str = "ed25519";
pub const HMAC_SHA256: &str = "hmac-sha256";

/// A key read from a key file.
pub enum Key {
    Ed25519Secret(SigningKey),
    Ed25519Public(VerifyingKey),
    Hmac(Vec<u8>),
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material, not even in debug output.
        write!(f, "Key({} {})", self.algorithm(), self.id())
    }
}

/// A seal's signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    pub algorithm: String,
    pub key_id: String,
    /// Lowercase hex of the signature or MAC bytes.
    pub value: String,
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    if s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("expected an even number of hex digits".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

impl Key {
    pub fn algorithm(&self) -> &'static str {
        match self {
            Key::Ed25519Secret(_) | Key::Ed25519Public(_) => ED25519,
            Key::Hmac(_) => HMAC_SHA256,
        }
    }

    /// The key's id: the first 16 hex digits of SHA-256 over the public key (Ed25519) or over
    /// a domain tag and the secret (HMAC), so the id reveals nothing usable.
    pub fn id(&self) -> String {
        let digest = match self {
            Key::Ed25519Secret(k) => Sha256::digest(k.verifying_key().as_bytes()),
            Key::Ed25519Public(k) => Sha256::digest(k.as_bytes()),
            Key::Hmac(secret) => {
                let mut h = Sha256::new();
                h.update(b"jev-hmac-key-id\0");
                h.update(secret);
                h.finalize()
            }
        };
        hex(&digest)[..16].to_owned()
    }

    /// Reads and parses a key file; the error names the file.
    pub fn read(path: &std::path::Path) -> Result<Key, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Key::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses a key file's text.
    pub fn parse(text: &str) -> Result<Key, String> {
        let v = canonical::parse_strict(text).map_err(|e| e.to_string())?;
        let obj = v.as_object().ok_or("expected a key object")?;
        if obj.get("jev_key") != Some(&json!(1)) {
            return Err("not a jev key file (expected \"jev_key\": 1)".into());
        }
        if let Some(k) = obj
            .keys()
            .find(|k| !["jev_key", "algorithm", "secret", "public"].contains(&k.as_str()))
        {
            return Err(format!("unknown key {k:?}"));
        }
        let field = |name: &str| -> Result<Vec<u8>, String> {
            obj.get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("expected {name:?}"))
                .and_then(|s| unhex(s).map_err(|e| format!("{name}: {e}")))
        };
        match obj.get("algorithm").and_then(Value::as_str) {
            Some(ED25519) => match (obj.contains_key("secret"), obj.contains_key("public")) {
                (true, false) => {
                    let bytes: [u8; 32] = field("secret")?
                        .try_into()
                        .map_err(|_| "secret: expected 32 bytes")?;
                    Ok(Key::Ed25519Secret(SigningKey::from_bytes(&bytes)))
                }
                (false, true) => {
                    let bytes: [u8; 32] = field("public")?
                        .try_into()
                        .map_err(|_| "public: expected 32 bytes")?;
                    VerifyingKey::from_bytes(&bytes)
                        .map(Key::Ed25519Public)
                        .map_err(|_| "public: not a valid Ed25519 point".to_string())
                }
                _ => {
                    Err("an ed25519 key file holds exactly one of \"secret\" or \"public\"".into())
                }
            },
            Some(HMAC_SHA256) => {
                let secret = field("secret")?;
                if secret.len() < 32 {
                    return Err("secret: an HMAC key needs at least 32 bytes".into());
                }
                Ok(Key::Hmac(secret))
            }
            _ => Err("algorithm: expected \"ed25519\" or \"hmac-sha256\"".into()),
        }
    }

    /// Signs `message` (already domain-separated by [`message`]).
    pub fn sign(&self, message: &[u8]) -> Result<Signature, String> {
        let value = match self {
            Key::Ed25519Secret(k) => hex(&k.sign(message).to_bytes()),
            Key::Ed25519Public(_) => {
                return Err("this is a public key; signing needs the secret key file".into());
            }
            Key::Hmac(secret) => {
                let mut mac =
                    <Hmac<Sha256> as KeyInit>::new_from_slice(secret).map_err(|e| e.to_string())?;
                mac.update(message);
                hex(&mac.finalize().into_bytes())
            }
        };
        Ok(Signature {
            algorithm: self.algorithm().into(),
            key_id: self.id(),
            value,
        })
    }

    /// Checks `sig` over `message` with this (trusted) key.
    pub fn verify(&self, sig: &Signature, message: &[u8]) -> Result<(), String> {
        if sig.algorithm != self.algorithm() {
            return Err(format!(
                "signed with {}, the trusted key is {}",
                sig.algorithm,
                self.algorithm()
            ));
        }
        if sig.key_id != self.id() {
            return Err(format!(
                "signed by key {}, not by the trusted key {}",
                sig.key_id,
                self.id()
            ));
        }
        let bytes = unhex(&sig.value).map_err(|e| format!("signature: {e}"))?;
        match self {
            Key::Ed25519Secret(k) => verify_ed25519(&k.verifying_key(), &bytes, message),
            Key::Ed25519Public(k) => verify_ed25519(k, &bytes, message),
            Key::Hmac(secret) => {
                let mut mac =
                    <Hmac<Sha256> as KeyInit>::new_from_slice(secret).map_err(|e| e.to_string())?;
                mac.update(message);
                // Constant-time comparison.
                mac.verify_slice(&bytes)
                    .map_err(|_| "the MAC does not match".to_string())
            }
        }
    }
}

fn verify_ed25519(key: &VerifyingKey, bytes: &[u8], message: &[u8]) -> Result<(), String> {
    let sig = ed25519_dalek::Signature::from_slice(bytes)
        .map_err(|_| "signature: expected 64 bytes".to_string())?;
    key.verify_strict(message, &sig)
        .map_err(|_| "the signature does not verify".to_string())
}

/// The domain-separated message signed for a seal document (its `signature` member left out).
pub fn message(seal: &Value) -> Vec<u8> {
    let mut out = DOMAIN.to_vec();
    out.extend_from_slice(canonical::canonical_string_without(seal, "signature").as_bytes());
    out
}

/// A new Ed25519 key pair as (secret key file, public key file) texts.
pub fn generate_ed25519() -> (String, String) {
    let key = SigningKey::generate(&mut rand_core::OsRng);
    let secret = json!({"jev_key": 1, "algorithm": ED25519, "secret": hex(&key.to_bytes())});
    let public =
        json!({"jev_key": 1, "algorithm": ED25519, "public": hex(key.verifying_key().as_bytes())});
    (
        serde_json::to_string_pretty(&secret).unwrap_or_default() + "\n",
        serde_json::to_string_pretty(&public).unwrap_or_default() + "\n",
    )
}

/// A new 32-byte HMAC-SHA256 secret as a key file text.
pub fn generate_hmac() -> String {
    let mut secret = [0u8; 32];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut secret);
    let doc = json!({"jev_key": 1, "algorithm": HMAC_SHA256, "secret": hex(&secret)});
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ed25519_round_trip_and_tamper() {
        let (secret, public) = generate_ed25519();
        let sk = Key::parse(&secret).unwrap();
        let pk = Key::parse(&public).unwrap();
        assert_eq!(sk.id(), pk.id());
        let seal = json!({"jev_seal": 1, "root": "ab", "count": 0, "entries": []});
        let sig = sk.sign(&message(&seal)).unwrap();
        pk.verify(&sig, &message(&seal)).unwrap();
        let tampered = json!({"jev_seal": 1, "root": "ac", "count": 0, "entries": []});
        assert!(pk.verify(&sig, &message(&tampered)).is_err());
        let (other, _) = generate_ed25519();
        assert!(
            Key::parse(&other)
                .unwrap()
                .verify(&sig, &message(&seal))
                .unwrap_err()
                .contains("not by the trusted key")
        );
        assert!(pk.sign(b"x").is_err());
        assert!(
            !format!("{sk:?}").contains(&secret[40..60]),
            "debug output holds no key material"
        );
    }

    #[test]
    fn hmac_round_trip() {
        let k = Key::parse(&generate_hmac()).unwrap();
        let sig = k.sign(b"m").unwrap();
        k.verify(&sig, b"m").unwrap();
        assert!(k.verify(&sig, b"n").is_err());
        assert!(
            Key::parse(r#"{"jev_key": 1, "algorithm": "hmac-sha256", "secret": "00"}"#).is_err()
        );
    }

    #[test]
    fn the_message_is_domain_separated() {
        let m = message(&json!({"a": 1, "signature": {"x": 1}}));
        assert_eq!(m, b"jev-seal-v1\0{\"a\":1}");
    }
}
