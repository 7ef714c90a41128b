//! Directory seals: `SEAL.json` lists every file of a directory with its SHA-256, their count
//! and an RFC 6962-style Merkle root, so a file removed, added, renamed or changed shows.
//!
//! Leaf = SHA-256(0x00 ‖ canonical `{"path", "sha256"}`), node = SHA-256(0x01 ‖ left ‖ right),
//! the tree split at the largest power of two below the count, the empty tree SHA-256("").

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::canonical::{self, hex, sha256_hex};

/// The seal's file name inside the sealed directory.
pub const SEAL_FILE: &str = "SEAL.json";
/// Earlier seals of the directory, one per line, oldest first (the chain behind SEAL.json).
pub const HISTORY_FILE: &str = "SEAL.history.jsonl";

/// True for the files a seal keeps beside the sealed content.
pub fn is_seal_file(name: &str) -> bool {
    name == SEAL_FILE || name == HISTORY_FILE
}
/// The seal format version.
pub const FORMAT_VERSION: u64 = 1;

/// One sealed file: its path relative to the sealed directory (with `/`) and the lowercase hex
/// SHA-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub path: String,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seal {
    pub jev_seal: u64,
    /// 1 for a directory's first seal, then one more each time it is sealed again.
    #[serde(default = "first")]
    pub sequence: u64,
    /// `sha256:` digest of the previous seal's canonical form (null for the first).
    #[serde(default)]
    pub previous: Option<String>,
    pub count: usize,
    /// Lowercase hex Merkle root.
    pub root: String,
    pub entries: Vec<Entry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<crate::sign::Signature>,
}

fn first() -> u64 {
    1
}

impl Seal {
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
    /// The digest the next seal chains to: over the whole seal, signature included.
    pub fn digest(&self) -> String {
        canonical::canonical_digest(&self.to_value())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

fn leaf_hash(entry: &Entry) -> [u8; 32] {
    let canonical =
        canonical::canonical_string(&json!({"path": entry.path, "sha256": entry.sha256}));
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(canonical.as_bytes());
    h.finalize().into()
}

fn node_hash(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

fn subtree(leaves: &[[u8; 32]]) -> [u8; 32] {
    match leaves.len() {
        0 => Sha256::digest(b"").into(),
        1 => leaves[0],
        n => {
            // Largest power of two strictly below n.
            let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
            node_hash(&subtree(&leaves[..k]), &subtree(&leaves[k..]))
        }
    }
}

/// The Merkle root (lowercase hex) of `entries`, which must already be sorted by path.
pub fn merkle_root(entries: &[Entry]) -> String {
    let leaves: Vec<[u8; 32]> = entries.iter().map(leaf_hash).collect();
    hex(&subtree(&leaves))
}

/// Every regular file under `dir` except the seal itself, sorted by relative path. Symlinks
/// are refused (a seal covers bytes in the directory, not what a link points at).
pub fn scan(dir: &Path) -> Result<Vec<Entry>, SealError> {
    let mut out = Vec::new();
    walk(dir, dir, 0, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<Entry>) -> Result<(), SealError> {
    if depth > 64 {
        return Err(SealError::Invalid {
            path: dir.to_owned(),
            message: "directories nested deeper than 64 levels".into(),
        });
    }
    let io = |path: &Path| {
        let path = path.to_owned();
        move |error| SealError::Io { path, error }
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<Result<_, _>>()
        .map_err(io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let kind = entry.file_type().map_err(io(&path))?;
        if kind.is_symlink() {
            return Err(SealError::Invalid {
                path,
                message: "is a symbolic link; a sealed directory holds regular files only".into(),
            });
        }
        if kind.is_dir() {
            walk(root, &path, depth + 1, out)?;
            continue;
        }
        let rel = path.strip_prefix(root).unwrap_or(&path);
        let Some(rel) = rel.to_str() else {
            return Err(SealError::Invalid {
                path: path.clone(),
                message: "path is not UTF-8".into(),
            });
        };
        let rel = rel.replace(std::path::MAIN_SEPARATOR, "/");
        if is_seal_file(&rel) {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        out.push(Entry {
            path: rel,
            sha256: sha256_hex(&bytes),
        });
    }
    Ok(())
}

/// Builds the seal of `dir` as it is now (unsigned, first in its chain).
pub fn seal_dir(dir: &Path) -> Result<Seal, SealError> {
    let entries = scan(dir)?;
    Ok(Seal {
        jev_seal: FORMAT_VERSION,
        sequence: 1,
        previous: None,
        count: entries.len(),
        root: merkle_root(&entries),
        entries,
        signature: None,
    })
}

/// Seals `dir` again: the new seal chains to the current one (which moves to the history
/// file) and is signed when a key is given. Both files are written atomically, history first.
pub fn reseal(dir: &Path, key: Option<&crate::sign::Key>) -> Result<Seal, SealError> {
    let mut seal = seal_dir(dir)?;
    if let Some(old) = read_seal(dir)? {
        seal.sequence = old.sequence + 1;
        seal.previous = Some(old.digest());
        let path = dir.join(HISTORY_FILE);
        let mut history = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(SealError::Io { path, error }),
        };
        if !history.is_empty() && !history.ends_with(b"\n") {
            history.push(b'\n');
        }
        history.extend_from_slice(old.to_value().to_string().as_bytes());
        history.push(b'\n');
        crate::fsutil::write_atomic(&path, &history)
            .map_err(|error| SealError::Io { path, error })?;
    }
    if let Some(key) = key {
        let message = crate::sign::message(&seal.to_value());
        seal.signature = Some(key.sign(&message).map_err(|message| SealError::Invalid {
            path: dir.to_owned(),
            message,
        })?);
    }
    let path = dir.join(SEAL_FILE);
    let text = serde_json::to_string_pretty(&seal).unwrap_or_default() + "\n";
    crate::fsutil::write_atomic(&path, text.as_bytes())
        .map_err(|error| SealError::Io { path, error })?;
    Ok(seal)
}

fn parse_seal(path: &Path, text: &str) -> Result<Seal, SealError> {
    let value = canonical::parse_strict(text).map_err(|e| SealError::Invalid {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let seal: Seal = serde_path_to_error::deserialize(&value).map_err(|e| SealError::Invalid {
        path: path.to_owned(),
        message: format!("{}: {}", e.path(), e.inner()),
    })?;
    if seal.jev_seal != FORMAT_VERSION {
        return Err(SealError::Invalid {
            path: path.to_owned(),
            message: format!("seal format {} is not supported", seal.jev_seal),
        });
    }
    Ok(seal)
}

/// The chain behind the current seal, oldest first (empty without a history file).
pub fn read_history(dir: &Path) -> Result<Vec<Seal>, SealError> {
    let path = dir.join(HISTORY_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(SealError::Io { path, error }),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_seal(&dir.join(format!("{HISTORY_FILE}:{}", i + 1)), l))
        .collect()
}

/// Checks the chain of seals and, with a trusted key, their signatures. Returns the problems
/// found and whether the current seal is authenticated (signed by the trusted key, its chain
/// intact, no unsigned seal after a signed one).
pub fn check_chain(
    dir: &Path,
    seal: &Seal,
    trust: Option<&crate::sign::Key>,
) -> (Vec<String>, bool) {
    let mut errors = Vec::new();
    let history = match read_history(dir) {
        Ok(h) => h,
        Err(e) => return (vec![e.to_string()], false),
    };
    let chain: Vec<&Seal> = history.iter().chain(std::iter::once(seal)).collect();
    for (i, s) in chain.iter().enumerate() {
        let expected_previous = if i == 0 {
            None
        } else {
            Some(chain[i - 1].digest())
        };
        if i == 0 && s.previous.is_some() {
            errors.push(format!(
                "chain break: seal {} names a previous seal that is not in {HISTORY_FILE}",
                s.sequence
            ));
        } else if i > 0 && s.previous != expected_previous {
            errors.push(format!(
                "chain break: seal {} does not chain to seal {}",
                s.sequence,
                chain[i - 1].sequence
            ));
        }
        if i > 0 && s.sequence != chain[i - 1].sequence + 1 {
            errors.push(format!(
                "chain break: seal {} follows seal {}",
                s.sequence,
                chain[i - 1].sequence
            ));
        }
    }
    let signed_before = history.iter().any(|s| s.signature.is_some());
    if signed_before && seal.signature.is_none() {
        errors
            .push("chain break: the current seal is unsigned but earlier seals were signed".into());
    }
    let mut authenticated = false;
    if let Some(key) = trust {
        for s in &chain {
            if let Some(sig) = &s.signature {
                if let Err(e) = key.verify(sig, &crate::sign::message(&s.to_value())) {
                    errors.push(format!("seal {} signature: {e}", s.sequence));
                }
            }
        }
        authenticated = seal.signature.is_some() && errors.is_empty();
    }
    (errors, authenticated)
}

/// Reads `dir/SEAL.json` if there is one.
pub fn read_seal(dir: &Path) -> Result<Option<Seal>, SealError> {
    let path = dir.join(SEAL_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|error| SealError::Io {
        path: path.clone(),
        error,
    })?;
    parse_seal(&path, &text).map(Some)
}

/// Compares a directory with its seal; every difference is one message.
pub fn check(dir: &Path, seal: &Seal) -> Result<Vec<String>, SealError> {
    let now = scan(dir)?;
    let mut errors = Vec::new();
    if seal.count != seal.entries.len() {
        errors.push(format!(
            "seal count {} does not match its {} entries",
            seal.count,
            seal.entries.len()
        ));
    }
    let mut sorted = seal.entries.clone();
    sorted.sort();
    if sorted != seal.entries {
        errors.push("seal entries are not sorted by path".into());
    }
    let root = merkle_root(&sorted);
    if root != seal.root {
        errors.push(format!(
            "seal root {} does not match its entries ({root})",
            seal.root
        ));
    }
    for e in &sorted {
        match now.iter().find(|n| n.path == e.path) {
            None => errors.push(format!("{}: sealed file is missing", e.path)),
            Some(n) if n.sha256 != e.sha256 => {
                errors.push(format!("{}: content changed since sealing", e.path))
            }
            Some(_) => {}
        }
    }
    for n in &now {
        if !sorted.iter().any(|e| e.path == n.path) {
            errors.push(format!("{}: file is not in the seal", n.path));
        }
    }
    Ok(errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6962 §2.1, written out directly: MTH({d0..dn}) with k the largest power of two < n.
    fn reference_root(entries: &[Entry]) -> Vec<u8> {
        fn mth(leaves: &[Vec<u8>]) -> Vec<u8> {
            if leaves.is_empty() {
                return Sha256::digest([]).to_vec();
            }
            if leaves.len() == 1 {
                let mut data = vec![0u8];
                data.extend_from_slice(&leaves[0]);
                return Sha256::digest(&data).to_vec();
            }
            let mut k = 1;
            while k * 2 < leaves.len() {
                k *= 2;
            }
            let mut data = vec![1u8];
            data.extend(mth(&leaves[..k]));
            data.extend(mth(&leaves[k..]));
            Sha256::digest(&data).to_vec()
        }
        let data: Vec<Vec<u8>> = entries
            .iter()
            .map(|e| {
                format!("{{\"path\":\"{}\",\"sha256\":\"{}\"}}", e.path, e.sha256).into_bytes()
            })
            .collect();
        mth(&data)
    }

    #[test]
    fn merkle_roots_match_rfc6962() {
        for n in [0usize, 1, 2, 3, 7, 8] {
            let entries: Vec<Entry> = (0..n)
                .map(|i| Entry {
                    path: format!("r{i:02}.json"),
                    sha256: sha256_hex(format!("file {i}").as_bytes()),
                })
                .collect();
            assert_eq!(
                merkle_root(&entries),
                hex(&reference_root(&entries)),
                "n = {n}"
            );
        }
        assert_eq!(
            merkle_root(&[]),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
