//! Measuring fixtures: ask a backend once per (state, question, model), never twice.
//!
//! Every question of a state is looked up in the cache first; the missing ones are batched
//! into one request per state. Answers are validated against the question (type, labels,
//! probabilities) before they are cached; failures are reported, never cached, never repaired.

pub mod bounds;
pub mod cache;
pub mod exec;
pub mod http;

use std::sync::mpsc;
use std::time::Instant;

use serde_json::{Map, Value};

use crate::policy::model::InputType;
use crate::value::{MeasurementFailure, parse_value};
pub use cache::Cache;

/// Where answers come from.
#[derive(Debug, Clone)]
pub enum Backend {
    /// The synthetic answers stored in each fixture (offline, no calls).
    Recorded,
    /// A judge command speaking JSON Lines on stdin/stdout, `jobs` worker processes; a judge
    /// silent for `timeout` on one request is stopped and the request fails.
    Exec {
        argv: Vec<String>,
        jobs: usize,
        timeout: std::time::Duration,
    },
    /// The System One HTTP API.
    Jev(http::HttpConfig),
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Recorded => "recorded",
            Backend::Exec { .. } => "exec",
            Backend::Jev(_) => "jev",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    /// The model requested from the backend.
    pub model: String,
    /// Ignore cached answers and measure again (the new answers are appended).
    pub refresh: bool,
    /// Fail every measurement that would need a backend call.
    pub offline: bool,
}

/// One concrete question on one state.
#[derive(Debug, Clone)]
pub struct Asked {
    /// The concrete id (`pick_files`).
    pub id: String,
    /// `{type, instructions, criteria}` as sent.
    pub definition: Value,
    /// What a valid answer is.
    pub ty: InputType,
}

/// Everything to measure for one fixture.
#[derive(Debug, Clone)]
pub struct Job {
    /// An id for the request (the fixture id).
    pub id: String,
    pub state: bounds::Bounded,
    pub questions: Vec<Asked>,
    /// The fixture's recorded answers (record syntax), for the recorded backend.
    pub recorded: Option<Map<String, Value>>,
}

/// One question's result: an answer in record syntax, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Measured {
    Answer(Value),
    Failed {
        kind: MeasurementFailure,
        reason: String,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Backend requests made.
    pub calls: usize,
    /// Questions answered from the cache.
    pub cached: usize,
    /// Questions answered by the backend (or read from recorded answers) this run.
    pub measured: usize,
    /// Questions that failed.
    pub failed: usize,
    /// Replies that broke the protocol without failing a question (an answer to a question
    /// nobody asked): reported, and the answer ignored.
    pub problems: Vec<String>,
}

/// A request to a judge: the missing questions of one state.
#[derive(Debug, Clone)]
pub struct Request {
    pub job: usize,
    pub id: String,
    pub model: String,
    pub state: Value,
    pub questions: Map<String, Value>,
}

/// A judge's reply to one request.
#[derive(Debug, Clone)]
pub struct Reply {
    pub job: usize,
    /// `Ok((resolved model, answers))` or the error the judge or transport gave.
    pub result: Result<(String, Map<String, Value>), String>,
    pub latency_ms: u64,
    /// The server's request id (`x-typesafe-request-id`), when it sent one.
    pub request_id: Option<String>,
    /// The error stops the whole run (refused credentials).
    pub fatal: bool,
}

/// Why measuring stopped.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("writing the cache: {0}")]
    Cache(#[from] cache::CacheError),
    /// The backend refused to work at all (401/403); answers already received are cached.
    #[error("{0}")]
    Fatal(String),
}

/// Measures every job. `progress(done, total)` is called as states complete; `now` gives the
/// RFC 3339 time stored with each cached answer.
pub fn run(
    jobs: &[Job],
    backend: &Backend,
    cache: &mut Cache,
    opts: &Options,
    now: &dyn Fn() -> String,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Vec<Measured>>, Stats), MeasureError> {
    let mut stats = Stats::default();
    let mut results: Vec<Vec<Option<Measured>>> =
        jobs.iter().map(|j| vec![None; j.questions.len()]).collect();
    let mut requests = Vec::new();
    let mut keys: Vec<Vec<String>> = Vec::with_capacity(jobs.len());
    let mut done = 0;
    for (ji, job) in jobs.iter().enumerate() {
        let state = match &job.state {
            bounds::Bounded::Incomplete { bytes } => {
                for r in results[ji].iter_mut() {
                    *r = Some(Measured::Failed {
                        kind: MeasurementFailure::IncompleteInput,
                        reason: format!(
                            "tool-call arguments are {bytes} bytes, over the {} byte bound; not sent",
                            bounds::MAX_ARGUMENTS_BYTES
                        ),
                    });
                }
                keys.push(Vec::new());
                stats.failed += job.questions.len();
                continue;
            }
            bounds::Bounded::Send { state, .. } => state,
        };
        let job_keys: Vec<String> = job
            .questions
            .iter()
            .map(|q| cache::key(state, &q.id, &q.definition, &opts.model, backend.name()))
            .collect();
        let mut missing = Map::new();
        for (qi, q) in job.questions.iter().enumerate() {
            if matches!(backend, Backend::Recorded) {
                results[ji][qi] = Some(recorded_answer(job, q));
                continue;
            }
            if !opts.refresh {
                if let Some(entry) = cache.get(&job_keys[qi]) {
                    results[ji][qi] = Some(validate(q, &entry.answer));
                    stats.cached += 1;
                    continue;
                }
            }
            if opts.offline {
                results[ji][qi] = Some(Measured::Failed {
                    kind: MeasurementFailure::Unavailable,
                    reason: "not in the cache and --offline forbids calling the backend".into(),
                });
                continue;
            }
            missing.insert(q.id.clone(), q.definition.clone());
        }
        if missing.is_empty() {
            done += 1;
        } else {
            requests.push(Request {
                job: ji,
                id: job.id.clone(),
                model: opts.model.clone(),
                state: state.clone(),
                questions: missing,
            });
        }
        keys.push(job_keys);
    }
    let total = jobs.len();
    progress(done, total);
    if !matches!(backend, Backend::Recorded) {
        stats.calls = requests.len();
        let (tx, rx) = mpsc::channel::<Reply>();
        let pending = requests.len();
        std::thread::scope(|scope| -> Result<(), MeasureError> {
            let reqs = std::mem::take(&mut requests);
            scope.spawn(move || match backend {
                Backend::Exec {
                    argv,
                    jobs: workers,
                    timeout,
                } => exec::serve(argv, *workers, *timeout, reqs, tx),
                Backend::Jev(cfg) => http::serve(cfg, reqs, tx),
                Backend::Recorded => {}
            });
            for _ in 0..pending {
                let Ok(reply) = rx.recv() else { break };
                if reply.fatal {
                    // Dropping the receiver stops the workers after their current request.
                    return Err(MeasureError::Fatal(reply.result.err().unwrap_or_default()));
                }
                let job = &jobs[reply.job];
                match reply.result {
                    Err(reason) => {
                        for (qi, _) in job.questions.iter().enumerate() {
                            if results[reply.job][qi].is_none() {
                                results[reply.job][qi] = Some(Measured::Failed {
                                    kind: MeasurementFailure::Unavailable,
                                    reason: reason.clone(),
                                });
                            }
                        }
                    }
                    Ok((model, answers)) => {
                        for extra in answers
                            .keys()
                            .filter(|k| !job.questions.iter().any(|q| &q.id == *k))
                        {
                            stats.problems.push(format!(
                                "{}: the judge answered {extra:?}, a question nobody asked; the answer is ignored",
                                job.id
                            ));
                        }
                        for (qi, q) in job.questions.iter().enumerate() {
                            if results[reply.job][qi].is_some() {
                                continue;
                            }
                            let measured = match answers.get(&q.id) {
                                None => Measured::Failed {
                                    kind: MeasurementFailure::Unavailable,
                                    reason: format!("the judge gave no answer to {}", q.id),
                                },
                                Some(a) => validate(q, a),
                            };
                            if let Measured::Answer(_) = measured {
                                cache.append(cache::Entry {
                                    key: keys[reply.job][qi].clone(),
                                    question: q.id.clone(),
                                    answer: answers[&q.id].clone(),
                                    model_requested: opts.model.clone(),
                                    model: model.clone(),
                                    backend: backend.name().into(),
                                    latency_ms: reply.latency_ms,
                                    time: now(),
                                    request_id: reply.request_id.clone(),
                                })?;
                                stats.measured += 1;
                            }
                            results[reply.job][qi] = Some(measured);
                        }
                    }
                }
                done += 1;
                progress(done, total);
            }
            Ok(())
        })?;
    }
    progress(total, total);
    let out: Vec<Vec<Measured>> = results
        .into_iter()
        .map(|qs| {
            qs.into_iter()
                .map(|m| {
                    m.unwrap_or(Measured::Failed {
                        kind: MeasurementFailure::Unavailable,
                        reason: "the judge process ended before answering".into(),
                    })
                })
                .collect()
        })
        .collect();
    stats.failed = out
        .iter()
        .flatten()
        .filter(|m| matches!(m, Measured::Failed { .. }))
        .count();
    if matches!(backend, Backend::Recorded) {
        stats.measured = out
            .iter()
            .flatten()
            .filter(|m| matches!(m, Measured::Answer(_)))
            .count();
    }
    Ok((out, stats))
}

fn recorded_answer(job: &Job, q: &Asked) -> Measured {
    match job.recorded.as_ref().and_then(|r| r.get(&q.id)) {
        None => Measured::Failed {
            kind: MeasurementFailure::Unavailable,
            reason: format!("no recorded answer for {}", q.id),
        },
        Some(a) => validate(q, a),
    }
}

/// Checks an answer against its question; a failure marker stays a failure.
pub fn validate(q: &Asked, answer: &Value) -> Measured {
    match parse_value(&q.ty, answer) {
        Ok(crate::value::TypedValue::Failed(kind)) => Measured::Failed {
            kind,
            reason: format!("{} measured as {}", q.id, kind.code()),
        },
        Ok(_) => Measured::Answer(answer.clone()),
        Err(e) => Measured::Failed {
            kind: MeasurementFailure::Unavailable,
            reason: format!("{}: invalid answer: {e}", q.id),
        },
    }
}

/// Milliseconds since `start`, saturating.
pub fn elapsed_ms(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}
