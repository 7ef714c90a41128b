//! `jev measure`: fill the measurement cache. Also the shared front half of `calibrate`:
//! loading fixtures, grouping them by policy, checking them, and measuring what is missing.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::ValueEnum;
use jev::fixtures::{self, Fixture};
use jev::measure::{self, Backend, Cache, Job, Measured, Stats};
use jev::policy::model::Policy;
use jev::questions;

use super::{Failure, Out, Outcome, policy::PolicyArgs, warn};

#[derive(clap::Args, Clone)]
pub struct MeasureArgs {
    /// Fixture files or directories (repeatable): `*.json` one fixture per file, `*.jsonl`
    /// one per line, native or the upstream calibrate format.
    #[arg(long = "fixtures", value_name = "PATH", default_value = "fixtures")]
    pub fixtures: Vec<PathBuf>,
    /// Only these policy families (NAME@VERSION, repeatable); default: every family found.
    #[arg(long = "family", value_name = "NAME@VERSION")]
    pub families: Vec<String>,
    /// Where answers come from: the fixtures' synthetic `recorded` answers (offline), or a
    /// judge command speaking JSON Lines (`--exec`).
    #[arg(long, value_enum, default_value_t = BackendKind::Recorded)]
    pub backend: BackendKind,
    /// The judge command for `--backend exec`, split like a shell would (no shell is run).
    #[arg(long, value_name = "'CMD ARGS'")]
    pub exec: Option<String>,
    /// The System One API root for `--backend jev`; the key comes from TYPESAFE_API_KEY.
    #[arg(
        long,
        value_name = "URL",
        env = "TYPESAFE_BASE_URL",
        default_value = "https://api.typesafe.ai"
    )]
    pub base_url: String,
    /// Seconds one request may take: one HTTP attempt (`--backend jev`) or one reply of the
    /// judge command (`--backend exec`, which is then stopped).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub timeout: f64,
    /// Seconds all attempts of one request may take, backoff included (`--backend jev`).
    #[arg(long, value_name = "SECS", default_value_t = 120.0)]
    pub retry_budget: f64,
    /// Judge processes working at once (exec backend).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
    /// The model requested from the judge (part of the cache key).
    #[arg(long, default_value = "jev-latest")]
    pub model: String,
    /// The measurement cache (append-only JSON Lines).
    #[arg(long, value_name = "FILE", default_value = ".jev/measurements.jsonl")]
    pub cache: PathBuf,
    /// Measure again even what the cache holds.
    #[arg(long)]
    pub refresh: bool,
    /// Never call a backend: what the cache lacks fails.
    #[arg(long, conflicts_with = "refresh")]
    pub offline: bool,
    /// Question-set directory searched before the bundled sets [default: questions/ when it exists].
    #[arg(long, value_name = "DIR")]
    pub questions: Option<PathBuf>,
    #[command(flatten)]
    pub policies: PolicyArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    Recorded,
    Exec,
    /// TypeSafe's System One HTTP API (`POST {base}/v1/systemone`).
    Jev,
}

/// One policy family: its fixtures and, after measuring, their results.
pub struct Family {
    pub policy: Policy,
    pub fixtures: Vec<Fixture>,
    pub jobs: Vec<Job>,
    pub measured: Vec<Vec<Measured>>,
    pub stats: Stats,
}

impl MeasureArgs {
    pub fn backend(&self) -> Result<Backend, Failure> {
        match (self.backend, &self.exec) {
            (BackendKind::Recorded, None) => Ok(Backend::Recorded),
            (BackendKind::Recorded | BackendKind::Jev, Some(_)) => {
                Err(Failure::input("--exec needs --backend exec"))
            }
            (BackendKind::Jev, None) => {
                let secs = |name: &str, v: f64| {
                    if v.is_finite() && v > 0.0 && v <= 86_400.0 {
                        Ok(std::time::Duration::from_secs_f64(v))
                    } else {
                        Err(Failure::input(format!(
                            "--{name} {v}: expected seconds in (0, 86400]"
                        )))
                    }
                };
                if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://"))
                {
                    return Err(Failure::input(format!(
                        "--base-url {:?}: expected an http:// or https:// URL",
                        self.base_url
                    )));
                }
                Ok(Backend::Jev(measure::http::HttpConfig {
                    base: self.base_url.clone(),
                    key: std::env::var("TYPESAFE_API_KEY")
                        .ok()
                        .filter(|k| !k.is_empty()),
                    jobs: usize::from(self.jobs),
                    timeout: secs("timeout", self.timeout)?,
                    budget: secs("retry-budget", self.retry_budget)?,
                }))
            }
            (BackendKind::Exec, None) => {
                Err(Failure::input("--backend exec needs --exec 'CMD ARGS'"))
            }
            (BackendKind::Exec, Some(cmd)) => {
                let argv = measure::exec::split_command(cmd)
                    .map_err(|e| Failure::input(format!("--exec: {e}")))?;
                if !(self.timeout.is_finite() && self.timeout > 0.0 && self.timeout <= 86_400.0) {
                    return Err(Failure::input(format!(
                        "--timeout {}: expected seconds in (0, 86400]",
                        self.timeout
                    )));
                }
                Ok(Backend::Exec {
                    argv,
                    jobs: usize::from(self.jobs),
                    timeout: std::time::Duration::from_secs_f64(self.timeout),
                })
            }
        }
    }

    /// Loads, groups and checks the fixtures; nothing is measured yet.
    pub fn families(&self) -> Result<Vec<Family>, Failure> {
        let all = fixtures::load(&self.fixtures).map_err(Failure::input)?;
        if all.is_empty() {
            return Err(Failure::input(format!(
                "no fixtures found in {}",
                self.fixtures
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let mut refs: Vec<String> = Vec::new();
        for f in &all {
            if !refs.contains(&f.policy) {
                refs.push(f.policy.clone());
            }
        }
        refs.sort();
        for wanted in &self.families {
            if !refs.contains(wanted) {
                return Err(Failure::input(format!(
                    "--family {wanted}: no fixture calibrates it (found: {})",
                    refs.join(", ")
                )));
            }
        }
        let qdir = self.questions.clone().or_else(questions::default_dir);
        let mut out = Vec::new();
        for reference in refs {
            if !self.families.is_empty() && !self.families.contains(&reference) {
                continue;
            }
            let members: Vec<Fixture> = all
                .iter()
                .filter(|f| f.policy == reference)
                .cloned()
                .collect();
            let policy = self
                .policies
                .resolve(&reference)
                .map_err(|f| Failure::input(format!("{}: {}", members[0].place, f.message)))?;
            let questions = match &policy.question_set {
                Some(qs) => Some(
                    questions::resolve(&qs.id, &qs.digest, qdir.as_deref())
                        .map_err(Failure::input)?,
                ),
                None => None,
            };
            let refs: Vec<&Fixture> = members.iter().collect();
            let jobs =
                jev::calibrate::jobs(&policy, questions.as_ref(), &refs).map_err(Failure::input)?;
            out.push(Family {
                policy,
                fixtures: members,
                jobs,
                measured: Vec::new(),
                stats: Stats::default(),
            });
        }
        Ok(out)
    }

    /// Measures every family's jobs through the cache.
    pub fn measure(&self, families: &mut [Family]) -> Result<(), Failure> {
        let backend = self.backend()?;
        let mut cache = Cache::open(&self.cache).map_err(Failure::input)?;
        warn(&cache.warnings);
        let opts = measure::Options {
            model: self.model.clone(),
            refresh: self.refresh,
            offline: self.offline,
        };
        let show = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
        for fam in families.iter_mut() {
            let bar = show.then(|| {
                let b = indicatif::ProgressBar::new(fam.jobs.len() as u64);
                b.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{msg} [{bar:30}] {pos}/{len} {elapsed}",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                b.set_message(fam.policy.reference());
                b
            });
            let mut progress = |done: usize, _total: usize| {
                if let Some(b) = &bar {
                    b.set_position(done as u64);
                }
            };
            let (measured, stats) =
                measure::run(&fam.jobs, &backend, &mut cache, &opts, &now, &mut progress)
                    .map_err(Failure::input)?;
            if let Some(b) = bar {
                b.finish_and_clear();
            }
            fam.measured = measured;
            fam.stats = stats;
        }
        Ok(())
    }
}

/// The current time as RFC 3339 UTC.
pub fn now() -> String {
    jev::receipt::rfc3339_utc(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    )
}

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub measure: MeasureArgs,
}

pub fn run(args: Args, out: &mut Out) -> Outcome {
    let mut families = args.measure.families()?;
    args.measure.measure(&mut families)?;
    let mut failed_any = false;
    for fam in &families {
        let s = &fam.stats;
        let questions: usize = fam.jobs.iter().map(|j| j.questions.len()).sum();
        out.line(&format!(
            "{}: {} fixtures, {questions} questions: {} cached, {} measured in {} backend call{}, {} failed ({})",
            fam.policy.reference(),
            fam.fixtures.len(),
            s.cached,
            s.measured,
            s.calls,
            if s.calls == 1 { "" } else { "s" },
            s.failed,
            args.measure.backend().map(|b| b.name()).unwrap_or("?"),
        ))?;
        for p in &s.problems {
            failed_any = true;
            out.line(&format!("  FAIL {p}"))?;
        }
        for (f, results) in fam.fixtures.iter().zip(&fam.measured) {
            for (q, m) in fam
                .jobs
                .iter()
                .find(|j| j.id == f.id)
                .map(|j| j.questions.as_slice())
                .unwrap_or(&[])
                .iter()
                .zip(results)
            {
                if let Measured::Failed { kind, reason } = m {
                    failed_any = true;
                    out.line(&format!(
                        "  FAIL {} {}: {} ({reason})",
                        f.id,
                        q.id,
                        kind.code()
                    ))?;
                }
            }
        }
    }
    Ok(if failed_any {
        jev::exit::FOUND
    } else {
        jev::exit::OK
    })
}
