//! The `exec` backend: a judge command speaking JSON Lines. One request per line on its stdin
//! (`{id, model, questions, state}`), one reply per line on its stdout (`{id, model, answers}`
//! or `{id, error}`). `jobs` worker processes run side by side so their latencies overlap.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;
use std::time::Instant;

use serde_json::{Value, json};

use super::{Reply, Request, elapsed_ms};
use crate::canonical;

/// How many times one worker starts its judge again after it died.
const RESTARTS: usize = 2;

struct Worker {
    child: Child,
    stdin: ChildStdin,
    /// Reply lines, read by a thread of their own so a silent judge can time out.
    lines: Receiver<std::io::Result<String>>,
    timeout: Duration,
}

impl Worker {
    fn start(argv: &[String], timeout: Duration) -> Result<Worker, String> {
        let (program, args) = argv.split_first().ok_or("--exec: empty command")?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start judge {program:?}: {e}"))?;
        let stdin = child.stdin.take().ok_or("judge stdin unavailable")?;
        let mut stdout: BufReader<ChildStdout> =
            BufReader::new(child.stdout.take().ok_or("judge stdout unavailable")?);
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let mut line = String::new();
                let r = stdout.read_line(&mut line).map(|_| line);
                let end = !matches!(&r, Ok(l) if !l.is_empty());
                if tx.send(r).is_err() || end {
                    break;
                }
            }
        });
        Ok(Worker {
            child,
            stdin,
            lines,
            timeout,
        })
    }

    /// Sends one request and reads one reply line.
    fn ask(&mut self, req: &Request) -> Result<(String, serde_json::Map<String, Value>), Ask> {
        let line = json!({"id": req.id, "model": req.model, "questions": req.questions, "state": req.state}).to_string();
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.write_all(b"\n"))
            .and_then(|()| self.stdin.flush())
            .map_err(|e| Ask::Died(format!("writing to the judge: {e}")))?;
        let reply = match self.lines.recv_timeout(self.timeout) {
            Ok(Ok(line)) if !line.is_empty() => line,
            Ok(Ok(_)) | Err(RecvTimeoutError::Disconnected) => {
                return Err(Ask::Died("the judge closed its output".into()));
            }
            Ok(Err(e)) => return Err(Ask::Died(format!("reading from the judge: {e}"))),
            Err(RecvTimeoutError::Timeout) => {
                return Err(Ask::Died(format!(
                    "the judge gave no reply within {:?}; it was stopped",
                    self.timeout
                )));
            }
        };
        parse_reply(&req.id, &reply).map_err(Ask::Bad)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

enum Ask {
    /// The process is gone or the pipe broke: restart before the next request.
    Died(String),
    /// A reply that is not acceptable; the process may go on.
    Bad(String),
}

/// Checks a reply line: strict JSON, the right id, and either `error` or `model` + `answers`.
pub fn parse_reply(
    id: &str,
    line: &str,
) -> Result<(String, serde_json::Map<String, Value>), String> {
    let v =
        canonical::parse_strict(line.trim_end()).map_err(|e| format!("malformed reply: {e}"))?;
    let obj = v.as_object().ok_or("malformed reply: expected an object")?;
    match obj.get("id").and_then(Value::as_str) {
        Some(got) if got == id => {}
        Some(got) => return Err(format!("reply for {got:?} while waiting for {id:?}")),
        None => return Err("malformed reply: no id".into()),
    }
    if let Some(e) = obj.get("error") {
        return Err(format!(
            "judge error: {}",
            e.as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| e.to_string())
        ));
    }
    let model = obj
        .get("model")
        .and_then(Value::as_str)
        .ok_or("malformed reply: no model")?
        .to_owned();
    let answers = obj
        .get("answers")
        .and_then(Value::as_object)
        .ok_or("malformed reply: no answers object")?
        .clone();
    Ok((model, answers))
}

/// Runs `requests` over up to `jobs` judge processes, sending each reply on `tx` as it comes.
/// Every request gets exactly one reply, an error when its judge could not answer.
pub fn serve(
    argv: &[String],
    jobs: usize,
    timeout: Duration,
    requests: Vec<Request>,
    tx: Sender<Reply>,
) {
    let workers = jobs.max(1).min(requests.len().max(1));
    let queue = Mutex::new(VecDeque::from(requests));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            let queue = &queue;
            scope.spawn(move || {
                let mut worker: Option<Worker> = None;
                let mut restarts = 0;
                let mut last_error = String::new();
                while let Some(req) = queue.lock().ok().and_then(|mut q| q.pop_front()) {
                    let started = Instant::now();
                    if worker.is_none() && restarts <= RESTARTS {
                        match Worker::start(argv, timeout) {
                            Ok(w) => worker = Some(w),
                            Err(e) => {
                                last_error = e;
                                restarts = RESTARTS + 1;
                            }
                        }
                    }
                    let result = match worker.as_mut() {
                        None => Err(last_error.clone()),
                        Some(w) => match w.ask(&req) {
                            Ok(ok) => Ok(ok),
                            Err(Ask::Bad(e)) => Err(e),
                            Err(Ask::Died(e)) => {
                                worker = None;
                                restarts += 1;
                                last_error = e.clone();
                                Err(e)
                            }
                        },
                    };
                    let reply = Reply {
                        job: req.job,
                        result,
                        latency_ms: elapsed_ms(started),
                        request_id: None,
                        fatal: false,
                    };
                    if tx.send(reply).is_err() {
                        break;
                    }
                }
            });
        }
    });
}

/// Splits a command line like a POSIX shell would split words (quotes and backslashes), but
/// runs no shell.
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => cur.push(x),
                            Some(x) => {
                                cur.push('\\');
                                cur.push(x);
                            }
                            None => return Err("unterminated double quote".into()),
                        },
                        Some(x) => cur.push(x),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(x) => cur.push(x),
                    None => return Err("trailing backslash".into()),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    if out.is_empty() {
        return Err("empty command".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_like_a_shell() {
        assert_eq!(
            split_command("python3 judge.py --x 'a b' \"c\\\"d\" e\\ f").unwrap(),
            ["python3", "judge.py", "--x", "a b", "c\"d", "e f"]
        );
        assert!(split_command("  ").is_err());
        assert!(split_command("a 'b").is_err());
    }

    #[test]
    fn replies_are_checked() {
        assert!(parse_reply("a", r#"{"id":"a","model":"m","answers":{}}"#).is_ok());
        assert!(
            parse_reply("a", r#"{"id":"b","model":"m","answers":{}}"#)
                .unwrap_err()
                .contains("while waiting")
        );
        assert_eq!(
            parse_reply("a", r#"{"id":"a","error":"overloaded"}"#).unwrap_err(),
            "judge error: overloaded"
        );
        assert!(
            parse_reply("a", "not json")
                .unwrap_err()
                .starts_with("malformed reply")
        );
    }
}
