//! stdout for results only, buffered; a closed pipe ends the run quietly.

use std::io::{self, BufWriter, Write};

use super::Failure;

/// Internal marker code: the reader went away. `main` turns it into a quiet exit 0.
pub const BROKEN_PIPE: u8 = 255;

pub struct Out {
    inner: BufWriter<Box<dyn Write>>,
}

impl Out {
    pub fn stdout() -> Out {
        Out {
            inner: BufWriter::new(Box::new(io::stdout())),
        }
    }

    /// Writes `text` followed by a newline.
    pub fn line(&mut self, text: &str) -> Result<(), Failure> {
        self.inner
            .write_all(text.as_bytes())
            .and_then(|()| self.inner.write_all(b"\n"))
            .map_err(io_failure)
    }

    /// Flushes now (JSON Lines output is streamed record by record).
    pub fn flush(&mut self) -> Result<(), Failure> {
        self.inner.flush().map_err(io_failure)
    }

    pub fn finish(&mut self) -> Result<(), Failure> {
        self.flush()
    }
}

fn io_failure(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Failure {
            code: BROKEN_PIPE,
            message: String::new(),
        }
    } else {
        Failure::input(format!("writing output: {e}"))
    }
}

/// A Markdown table cell: pipes escaped, line breaks flattened.
pub fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
