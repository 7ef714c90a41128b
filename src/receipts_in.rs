//! Where receipts come from: files, directories of `*.json` receipts, and JSON Lines bundles
//! (`*.jsonl`, one receipt per line). Shared by `verify` and `replay`.

use std::path::{Path, PathBuf};

use crate::seal::SEAL_FILE;

/// One receipt's text and where it came from. `text` is an error message when the file could
/// not be read (that is a failed receipt, never a skipped one).
#[derive(Debug, Clone)]
pub struct ReceiptText {
    /// `path` for a file, `path:LINE` for a line of a bundle.
    pub place: String,
    pub path: PathBuf,
    pub text: Result<String, String>,
}

/// What `expand` found: the receipts in order, and the directories given (for seal checks).
#[derive(Debug, Default)]
pub struct Found {
    pub receipts: Vec<ReceiptText>,
    pub dirs: Vec<PathBuf>,
}

/// Expands the paths given on the command line. A path that does not exist is an input error;
/// a file that cannot be read becomes a failed receipt.
pub fn expand(paths: &[PathBuf]) -> Result<Found, String> {
    let mut found = Found::default();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.is_dir() {
            found.dirs.push(path.clone());
            let mut files = Vec::new();
            collect(path, 0, &mut files)?;
            files.sort();
            for f in files {
                push_file(&f, &mut found.receipts);
            }
        } else {
            push_file(path, &mut found.receipts);
        }
    }
    Ok(found)
}

fn collect(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), String> {
    if depth > 64 {
        return Err(format!(
            "{}: directories nested deeper than 64 levels",
            dir.display()
        ));
    }
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if kind.is_dir() {
            collect(&path, depth + 1, out)?;
        } else if path.file_name().is_some_and(|n| n == SEAL_FILE) {
            continue;
        } else if path
            .extension()
            .is_some_and(|e| e == "json" || e == "jsonl")
        {
            out.push(path);
        }
    }
    Ok(())
}

fn push_file(path: &Path, out: &mut Vec<ReceiptText>) {
    let place = path.display().to_string();
    let text = std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| {
            String::from_utf8(b)
                .map_err(|e| format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()))
        });
    let is_bundle = path.extension().is_some_and(|e| e == "jsonl");
    match text {
        Ok(text) if is_bundle => {
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                out.push(ReceiptText {
                    place: format!("{place}:{}", i + 1),
                    path: path.to_owned(),
                    text: Ok(line.to_owned()),
                });
            }
        }
        text => out.push(ReceiptText {
            place,
            path: path.to_owned(),
            text,
        }),
    }
}
