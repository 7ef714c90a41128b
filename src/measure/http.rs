//! The `jev` backend: TypeSafe's System One API (`POST {base}/v1/systemone`), spoken with
//! ureq (blocking, rustls: no OpenSSL to install, no async runtime for a tool that makes a
//! bounded number of calls from worker threads).
//!
//! Faults become typed failures, never cached and never repaired: connection errors, timeouts,
//! 408, 429 and 5xx are retried with exponential backoff and jitter, honouring `retry-after-ms`
//! and `retry-after`, within a total budget; 401 and 403 stop the run at once; 422 and other
//! 4xx report the server's detail; a body that is not strict JSON fails the request; each
//! answer is then checked against its question by the caller.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Reply, Request, elapsed_ms};
use crate::canonical;

/// How the client talks to the server.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The API root, e.g. `https://api.typesafe.ai`; `/v1/systemone` is appended.
    pub base: String,
    /// Sent as `Authorization: Bearer ...`; never printed, cached or written to receipts.
    pub key: Option<String>,
    pub jobs: usize,
    /// One attempt's limit.
    pub timeout: Duration,
    /// All attempts of one request together, backoff included.
    pub budget: Duration,
}

/// A successful reply: resolved model, answers, the server's request id.
type Answered = (String, serde_json::Map<String, Value>, Option<String>);

/// Why an attempt failed.
enum Attempt {
    /// Worth another try after the given delay (`None`: the backoff decides).
    Retry(String, Option<Duration>),
    /// Final for this request.
    Fail(String),
    /// Final for the run (bad credentials).
    Fatal(String),
}

fn detail(body: &str) -> String {
    let text = match canonical::parse_strict(body) {
        Ok(v) => match v.get("detail") {
            Some(Value::String(s)) => s.clone(),
            Some(d) => d
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| d.to_string()),
            None => v
                .get("error")
                .map(|e| e.to_string())
                .unwrap_or_else(|| v.to_string()),
        },
        Err(_) => body.to_owned(),
    };
    let mut cut: String = text.chars().take(300).collect();
    if text.chars().count() > 300 {
        cut.push('…');
    }
    cut
}

/// `retry-after-ms` (milliseconds) or `retry-after` (seconds), when the server sent one.
fn retry_after(resp: &ureq::http::Response<ureq::Body>) -> Option<Duration> {
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(Duration::from_secs_f64((ms / 1000.0).clamp(0.0, 3600.0)));
    }
    header("retry-after")
        .and_then(|v| v.parse::<f64>().ok())
        .map(|s| Duration::from_secs_f64(s.clamp(0.0, 3600.0)))
}

/// A small xorshift for jitter; seeded per worker from the clock (no cryptographic need).
struct Jitter(u64);

impl Jitter {
    fn new() -> Jitter {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9)
            | 1;
        Jitter(seed)
    }
    /// A factor in [0.5, 1.5).
    fn factor(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        0.5 + (self.0 % 10_000) as f64 / 10_000.0
    }
}

fn attempt(agent: &ureq::Agent, cfg: &HttpConfig, body: &str) -> Result<Answered, Attempt> {
    let url = format!("{}/v1/systemone", cfg.base.trim_end_matches('/'));
    let mut req = agent.post(&url).header("content-type", "application/json");
    if let Some(key) = &cfg.key {
        req = req.header("authorization", &format!("Bearer {key}"));
    }
    let mut resp = match req.send(body) {
        Ok(r) => r,
        Err(e) => return Err(Attempt::Retry(format!("transport: {e}"), None)),
    };
    let status = resp.status().as_u16();
    let request_id = resp
        .headers()
        .get("x-typesafe-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let wait = retry_after(&resp);
    let text = match resp.body_mut().read_to_string() {
        Ok(t) => t,
        Err(e) => return Err(Attempt::Retry(format!("reading the response: {e}"), None)),
    };
    match status {
        200 => {}
        401 | 403 => {
            return Err(Attempt::Fatal(format!(
                "the server refused the credentials (HTTP {status}: {}); check TYPESAFE_API_KEY",
                detail(&text)
            )));
        }
        408 | 429 | 500..=599 => {
            return Err(Attempt::Retry(
                format!("HTTP {status}: {}", detail(&text)),
                wait,
            ));
        }
        _ => return Err(Attempt::Fail(format!("HTTP {status}: {}", detail(&text)))),
    }
    let v = canonical::parse_strict(&text)
        .map_err(|e| Attempt::Fail(format!("malformed body (not JSON): {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| Attempt::Fail("malformed body: expected an object".into()))?;
    let model = obj
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| Attempt::Fail("malformed body: no model".into()))?
        .to_owned();
    let answers = obj
        .get("answers")
        .and_then(Value::as_object)
        .ok_or_else(|| Attempt::Fail("malformed body: no answers object".into()))?
        .clone();
    Ok((model, answers, request_id))
}

/// Runs `requests` with up to `cfg.jobs` concurrent connections, sending each reply on `tx`.
/// After a fatal answer (401/403) the remaining requests are not sent; each gets the fatal
/// reply instead, marked so the caller stops.
pub fn serve(cfg: &HttpConfig, requests: Vec<Request>, tx: Sender<Reply>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(cfg.timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let workers = cfg.jobs.max(1).min(requests.len().max(1));
    let queue = Mutex::new(VecDeque::from(requests));
    let stop = AtomicBool::new(false);
    let fatal = Mutex::new(None::<String>);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (queue, stop, fatal, agent) = (&queue, &stop, &fatal, &agent);
            scope.spawn(move || {
                let mut jitter = Jitter::new();
                while let Some(req) = queue.lock().ok().and_then(|mut q| q.pop_front()) {
                    let started = Instant::now();
                    if stop.load(Ordering::SeqCst) {
                        let reason = fatal.lock().ok().and_then(|f| f.clone()).unwrap_or_default();
                        let _ = tx.send(Reply { job: req.job, result: Err(reason), latency_ms: 0, request_id: None, fatal: true });
                        continue;
                    }
                    let body = json!({"model": req.model, "state": req.state, "questions": req.questions}).to_string();
                    let mut tries = 0u32;
                    let (result, request_id, is_fatal) = loop {
                        tries += 1;
                        match attempt(agent, cfg, &body) {
                            Ok((model, answers, id)) => break (Ok((model, answers)), id, false),
                            Err(Attempt::Fail(e)) => break (Err(e), None, false),
                            Err(Attempt::Fatal(e)) => {
                                stop.store(true, Ordering::SeqCst);
                                if let Ok(mut f) = fatal.lock() {
                                    f.get_or_insert(e.clone());
                                }
                                break (Err(e), None, true);
                            }
                            Err(Attempt::Retry(e, wait)) => {
                                let backoff = Duration::from_millis(200u64.saturating_mul(1 << tries.min(10)))
                                    .mul_f64(jitter.factor());
                                let wait = wait.unwrap_or(backoff);
                                if started.elapsed() + wait >= cfg.budget {
                                    break (Err(format!("{e} (gave up after {tries} attempt{} within the {:?} retry budget)", if tries == 1 { "" } else { "s" }, cfg.budget)), None, false);
                                }
                                std::thread::sleep(wait);
                            }
                        }
                    };
                    let reply = Reply { job: req.job, result, latency_ms: elapsed_ms(started), request_id, fatal: is_fatal };
                    if tx.send(reply).is_err() {
                        break;
                    }
                }
            });
        }
    });
}
