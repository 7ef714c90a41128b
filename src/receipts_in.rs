//! Where receipts come from: files, directories of `*.json` receipts, and JSON Lines bundles
//! (`*.jsonl`, one receipt per line). Shared by `verify` and `replay`.
//!
//! Receipts are streamed: files are read when their turn comes and bundles line by line, and
//! [`process`] works through them in fixed-size chunks in parallel, handing results back in
//! input order. Memory stays bounded whatever the count.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::seal::is_seal_file;

/// One receipt's text and where it came from. `text` is an error message when the receipt
/// could not be read (that is a failed receipt, never a skipped one).
#[derive(Debug, Clone)]
pub struct ReceiptText {
    /// `path` for a file, `path:LINE` for a line of a bundle.
    pub place: String,
    pub text: Result<String, String>,
}

/// A file to read receipts from.
#[derive(Debug, Clone)]
enum Source {
    /// One receipt per file.
    File(PathBuf),
    /// One receipt per line.
    Bundle(PathBuf),
}

/// What `expand` found: the receipt sources in order, and the directories given (for seals).
#[derive(Debug, Default)]
pub struct Found {
    sources: Vec<Source>,
    pub dirs: Vec<PathBuf>,
}

fn source(path: PathBuf) -> Source {
    if path.extension().is_some_and(|e| e == "jsonl") {
        Source::Bundle(path)
    } else {
        Source::File(path)
    }
}

/// Expands the paths given on the command line. A path that does not exist is an input error;
/// nothing is read yet.
pub fn expand(paths: &[PathBuf]) -> Result<Found, String> {
    let mut found = Found::default();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.is_dir() {
            found.dirs.push(path.clone());
            let mut files = Vec::new();
            collect(path, 0, &mut files)?;
            files.sort();
            found.sources.extend(files.into_iter().map(source));
        } else {
            found.sources.push(source(path.clone()));
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
        } else if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(is_seal_file)
        {
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

fn utf8(bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes)
        .map_err(|e| format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()))
}

/// The receipts of a [`Found`], read lazily in order.
pub struct Stream {
    sources: VecDeque<Source>,
    bundle: Option<(String, BufReader<File>, usize)>,
}

impl Found {
    pub fn stream(&self) -> Stream {
        Stream {
            sources: self.sources.iter().cloned().collect(),
            bundle: None,
        }
    }
}

impl Iterator for Stream {
    type Item = ReceiptText;

    fn next(&mut self) -> Option<ReceiptText> {
        loop {
            if let Some((name, reader, line)) = self.bundle.as_mut() {
                let mut buf = Vec::new();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) => self.bundle = None,
                    Ok(_) => {
                        *line += 1;
                        if buf.iter().all(u8::is_ascii_whitespace) {
                            continue;
                        }
                        while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                            buf.pop();
                        }
                        return Some(ReceiptText {
                            place: format!("{name}:{line}"),
                            text: utf8(buf),
                        });
                    }
                    Err(e) => {
                        let place = format!("{name}:{}", *line + 1);
                        self.bundle = None;
                        return Some(ReceiptText {
                            place,
                            text: Err(e.to_string()),
                        });
                    }
                }
                continue;
            }
            match self.sources.pop_front()? {
                Source::File(path) => {
                    return Some(ReceiptText {
                        place: path.display().to_string(),
                        text: std::fs::read(&path)
                            .map_err(|e| e.to_string())
                            .and_then(utf8),
                    });
                }
                Source::Bundle(path) => match File::open(&path) {
                    Ok(f) => {
                        self.bundle = Some((
                            path.display().to_string(),
                            BufReader::with_capacity(1 << 20, f),
                            0,
                        ))
                    }
                    Err(e) => {
                        return Some(ReceiptText {
                            place: path.display().to_string(),
                            text: Err(e.to_string()),
                        });
                    }
                },
            }
        }
    }
}

/// Receipts processed per parallel batch: large enough to keep every core busy, small enough
/// that memory does not grow with the input.
pub const CHUNK: usize = 2048;

/// Runs `work` over every receipt in parallel, chunk by chunk, and hands each result to `emit`
/// in input order. Returns how many receipts there were. (A separate reader thread was
/// measured and made things slower on two cores: it competes with the workers.)
pub fn process<R: Send, E>(
    stream: Stream,
    work: impl Fn(&ReceiptText) -> R + Sync,
    mut emit: impl FnMut(&ReceiptText, R) -> Result<(), E>,
) -> Result<usize, E> {
    let mut stream = stream.peekable();
    let mut count = 0;
    while stream.peek().is_some() {
        let chunk: Vec<ReceiptText> = stream.by_ref().take(CHUNK).collect();
        let results: Vec<R> = chunk.par_iter().map(&work).collect();
        for (r, out) in chunk.iter().zip(results) {
            emit(r, out)?;
        }
        count += chunk.len();
    }
    Ok(count)
}
