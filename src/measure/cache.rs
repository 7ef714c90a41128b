//! The measurement cache: an append-only JSON Lines file, content-addressed.
//!
//! Key = SHA-256 of the canonical `{state, question, model, backend}` (the state as sent,
//! the question as asked, the model as requested). Each line stores one answer with the
//! resolved model, latency and time, and is written whole and flushed before the next, so
//! killing a run loses nothing already measured. A torn last line (a crash mid-write) is
//! skipped with a warning; errors are never cached.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::canonical;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub key: String,
    pub question: String,
    /// The answer in the System One shape.
    pub answer: Value,
    pub model_requested: String,
    pub model: String,
    pub backend: String,
    pub latency_ms: u64,
    pub time: String,
    /// The server's request id, for backends that send one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// The cache key of one question on one state.
pub fn key(
    state: &Value,
    question_id: &str,
    question: &Value,
    model: &str,
    backend: &str,
) -> String {
    let material = json!({
        "state": state,
        "question": {"id": question_id, "definition": question},
        "model": model,
        "backend": backend,
    });
    canonical::sha256_hex(canonical::canonical_string(&material).as_bytes())
}

#[derive(Debug)]
pub struct Cache {
    path: PathBuf,
    entries: HashMap<String, Entry>,
    file: Option<File>,
    /// The file does not end with a newline (a torn last line): start appends on a new line.
    needs_newline: bool,
    /// Problems met while reading, for the caller to show.
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: {error}")]
pub struct CacheError {
    pub path: PathBuf,
    pub error: std::io::Error,
}

impl Cache {
    /// Reads the cache at `path` (missing: empty). Nothing is created until the first append.
    pub fn open(path: &Path) -> Result<Cache, CacheError> {
        let io = |error| CacheError {
            path: path.to_owned(),
            error,
        };
        let mut cache = Cache {
            path: path.to_owned(),
            entries: HashMap::new(),
            file: None,
            needs_newline: false,
            warnings: Vec::new(),
        };
        let mut bytes = Vec::new();
        match File::open(path) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes).map_err(io)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(cache),
            Err(e) => return Err(io(e)),
        }
        cache.needs_newline = !bytes.is_empty() && !bytes.ends_with(b"\n");
        let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        let last = lines.len().saturating_sub(1);
        for (i, line) in lines.iter().enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let parsed = std::str::from_utf8(line)
                .map_err(|e| e.to_string())
                .and_then(|t| canonical::parse_strict(t).map_err(|e| e.to_string()))
                .and_then(|v| serde_json::from_value::<Entry>(v).map_err(|e| e.to_string()));
            match parsed {
                Ok(entry) => {
                    cache.entries.insert(entry.key.clone(), entry);
                }
                Err(e) if i == last => cache.warnings.push(format!(
                    "{}:{}: ignoring a torn last line ({e}); everything before it is kept",
                    path.display(),
                    i + 1
                )),
                Err(e) => cache.warnings.push(format!(
                    "{}:{}: ignoring an unreadable line ({e})",
                    path.display(),
                    i + 1
                )),
            }
        }
        Ok(cache)
    }

    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Appends one entry as a whole line and flushes it.
    pub fn append(&mut self, entry: Entry) -> Result<(), CacheError> {
        let io = |error| CacheError {
            path: self.path.clone(),
            error,
        };
        if self.file.is_none() {
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(io)?;
            self.file = Some(f);
        }
        let mut line = serde_json::to_string(&entry).unwrap_or_default();
        line.push('\n');
        if self.needs_newline {
            line.insert(0, '\n');
            self.needs_newline = false;
        }
        if let Some(f) = self.file.as_mut() {
            // One write call per line: with O_APPEND the line lands whole or (on a crash) torn
            // at the end, where the next open skips it.
            f.write_all(line.as_bytes()).map_err(io)?;
            f.flush().map_err(io)?;
        }
        self.entries.insert(entry.key.clone(), entry);
        Ok(())
    }
}
