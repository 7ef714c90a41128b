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
    pub count: usize,
    /// Lowercase hex Merkle root.
    pub root: String,
    pub entries: Vec<Entry>,
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
        if rel == SEAL_FILE {
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

/// Builds the seal of `dir` as it is now.
pub fn seal_dir(dir: &Path) -> Result<Seal, SealError> {
    let entries = scan(dir)?;
    Ok(Seal {
        jev_seal: FORMAT_VERSION,
        count: entries.len(),
        root: merkle_root(&entries),
        entries,
    })
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
    let value = canonical::parse_strict(&text).map_err(|e| SealError::Invalid {
        path: path.clone(),
        message: e.to_string(),
    })?;
    let seal: Seal = serde_path_to_error::deserialize(&value).map_err(|e| SealError::Invalid {
        path: path.clone(),
        message: format!("{}: {}", e.path(), e.inner()),
    })?;
    if seal.jev_seal != FORMAT_VERSION {
        return Err(SealError::Invalid {
            path,
            message: format!("seal format {} is not supported", seal.jev_seal),
        });
    }
    Ok(Some(seal))
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
