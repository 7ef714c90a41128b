//! Project automation, in Rust (`cargo xtask <task>`).
//!
//! - `ci`: the checks CI runs — `cargo fmt --check`, `cargo clippy --all-targets -D warnings`,
//!   and `cargo test --workspace --locked`.
//! - `receipts`: regenerate the bundled example receipts under `receipts/` from the recipes in
//!   `xtask/receipts.json` (fixed timestamps, so the output is reproducible) and seal each
//!   directory. A test in `tests/cli.rs` fails when the committed files differ.
//! - `gen receipts N FILE` / `gen fixtures N FILE`: deterministic synthetic data of any size
//!   (a JSON Lines receipt bundle decided under reliability@policy-v1; tool-call-assessment
//!   fixtures with recorded answers).
//! - `bench [--quick]`: the performance bars of DESIGN §13, measured with the release binary
//!   and printed as medians, ranges and ratios (see BENCHMARKS.md).
//! - `fuzz [SECONDS] [TARGET...]`: runs the cargo-fuzz targets under `fuzz/` for a bounded time
//!   each (default 600 s, every target) and reports executions; not part of CI. Needs
//!   `cargo install cargo-fuzz`; the stable toolchain is used with RUSTC_BOOTSTRAP=1.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("receipts") => receipts(),
        Some("gen") => gen_cmd(&args[1..]),
        Some("bench") => bench(args.iter().any(|a| a == "--quick")),
        Some("fuzz") => fuzz(&args[1..]),
        _ => Err(
            "usage: cargo xtask ci | receipts | gen receipts|fixtures N FILE | bench [--quick] | fuzz [SECONDS] [TARGET...]"
                .to_string(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::from(1)
        }
    }
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .to_owned()
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    eprintln!("xtask: {shown}");
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{shown} failed ({s})")),
        Err(e) => Err(format!("cannot run {shown}: {e}")),
    }
}

fn ci() -> Result<(), String> {
    let steps: [&[&str]; 3] = [
        &["fmt", "--all", "--check"],
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        &["test", "--workspace", "--locked"],
    ];
    for step in steps {
        run(Command::new(cargo()).args(step).current_dir(root()))?;
    }
    Ok(())
}

fn receipts() -> Result<(), String> {
    let root = root();
    let text =
        std::fs::read_to_string(root.join("xtask/receipts.json")).map_err(|e| e.to_string())?;
    let recipes: Value =
        serde_json::from_str(&text).map_err(|e| format!("xtask/receipts.json: {e}"))?;
    let created_at = recipes["created_at"]
        .as_str()
        .ok_or("receipts.json: created_at")?;
    run(Command::new(cargo())
        .args(["build", "--quiet", "--package", "jev"])
        .current_dir(&root))?;
    let jev = root.join("target/debug/jev");
    for set in recipes["sets"].as_array().ok_or("receipts.json: sets")? {
        let field = |k: &str| set[k].as_str().ok_or(format!("receipts.json: sets[].{k}"));
        let (dir, policy, records) = (field("dir")?, field("policy")?, field("records")?);
        let target = root.join(dir);
        if target.exists() {
            std::fs::remove_dir_all(&target).map_err(|e| format!("{dir}: {e}"))?;
        }
        run(Command::new(&jev)
            .args([
                "decide",
                "--policy",
                policy,
                "--receipts",
                dir,
                "--created-at",
                created_at,
                records,
            ])
            .current_dir(&root)
            .stdout(Stdio::null()))?;
        run(Command::new(&jev).args(["seal", dir]).current_dir(&root))?;
    }
    harness_envelopes(&root, &jev)
}

/// `receipts/harness/`: bound receipt envelopes in the TypeScript harness's format, built from
/// `xtask/harness.json` (the digest is the hex SHA-256 of the canonical
/// `{bindingVersion, receipt, binding}`), then sealed.
fn harness_envelopes(root: &Path, jev: &Path) -> Result<(), String> {
    let text =
        std::fs::read_to_string(root.join("xtask/harness.json")).map_err(|e| e.to_string())?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| format!("xtask/harness.json: {e}"))?;
    let dir = root.join("receipts/harness");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| e.to_string())?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    for e in doc["envelopes"]
        .as_array()
        .ok_or("harness.json: envelopes")?
    {
        let payload =
            json!({"bindingVersion": 1, "receipt": e["receipt"], "binding": e["binding"]});
        let digest =
            jev::canonical::sha256_hex(jev::canonical::canonical_string(&payload).as_bytes());
        let mut envelope = payload;
        envelope["integrity"] = json!({"algorithm": "sha256", "digest": digest});
        let name = format!(
            "{}-{}.json",
            e["receipt"]["fixtureId"].as_str().unwrap_or("envelope"),
            e["receipt"]["arm"].as_str().unwrap_or("x")
        );
        let text = serde_json::to_string_pretty(&envelope).map_err(|e| e.to_string())? + "\n";
        std::fs::write(dir.join(name), text).map_err(|e| e.to_string())?;
    }
    run(Command::new(jev)
        .args(["seal", "receipts/harness"])
        .current_dir(root))
}

/// A small deterministic generator: the same seed gives the same data on every machine.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
    /// A probability with two decimals (so many values tie with grid points).
    fn prob(&mut self) -> f64 {
        self.below(101) as f64 / 100.0
    }
}

fn gen_cmd(args: &[String]) -> Result<(), String> {
    let usage = "usage: cargo xtask gen receipts|fixtures N FILE";
    let (kind, n, file) = match args {
        [k, n, f] => (
            k.as_str(),
            n.parse::<usize>().map_err(|_| usage.to_string())?,
            PathBuf::from(f),
        ),
        _ => return Err(usage.into()),
    };
    let started = Instant::now();
    match kind {
        "receipts" => gen_receipts(n, &file)?,
        "fixtures" => gen_fixtures(n, &file)?,
        _ => return Err(usage.into()),
    }
    eprintln!(
        "xtask: wrote {n} {kind} to {} in {:.1} s",
        file.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn writer(file: &Path) -> Result<BufWriter<std::fs::File>, String> {
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::File::create(file)
        .map(|f| BufWriter::with_capacity(1 << 20, f))
        .map_err(|e| format!("{}: {e}", file.display()))
}

/// Receipts decided under reliability@policy-v1 over random records (all with provenance, so
/// a replay to policy-v2 decides every one).
fn gen_receipts(n: usize, file: &Path) -> Result<(), String> {
    const DIAG: [&str; 7] = [
        "PASS",
        "PASS",
        "PASS",
        "FAIL",
        "UNCERTAIN",
        "NOT_MEASURED",
        "UNAVAILABLE",
    ];
    const ADEQ: [&str; 5] = [
        "ANSWERABLE",
        "ANSWERABLE",
        "USER_GAP",
        "RECOVERABLE_EVIDENCE_GAP",
        "NOT_RUN",
    ];
    const PROV: [&str; 4] = ["VERIFIED", "VERIFIED", "UNVERIFIED", "NOT_MEASURED"];
    let policy = jev::policy::registry::resolve("reliability@policy-v1", None)
        .map_err(|e| e.to_string())?
        .located
        .policy;
    let mut rng = Lcg(0x00c0_ffee);
    let mut out = writer(file)?;
    for i in 0..n {
        let record = json!({
            "record": {
                "containment": rng.pick(&DIAG), "relation_fidelity": rng.pick(&DIAG),
                "sensitivity": rng.pick(&DIAG), "epistemic_adequacy": rng.pick(&ADEQ),
                "provenance": rng.pick(&PROV), "policy_restricted": rng.below(20) == 0
            },
            "context": {"risk_tier": rng.pick(&["low", "medium", "high", "high"])},
            "history": {"step_index": rng.below(5), "retrieve_attempts": rng.below(2),
                        "verify_attempts": rng.below(2), "ask_attempts": rng.below(3)}
        });
        let parsed = jev::record::parse_record(&policy, &record).map_err(|e| e.to_string())?;
        let params = policy.default_params();
        let decision = jev::policy::decide(&policy, &parsed, &params);
        let receipt = jev::receipt::build(
            &policy,
            &format!("r{i:07}"),
            "2026-01-01T00:00:00Z",
            record,
            None,
            &params,
            &decision,
        );
        writeln!(out, "{receipt}").map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}

/// tool-call-assessment fixtures: random recorded answers, labelled by a hidden set of
/// thresholds with 5% label noise.
fn gen_fixtures(n: usize, file: &Path) -> Result<(), String> {
    let mut rng = Lcg(0x0f1e_5eed);
    let mut out = writer(file)?;
    for i in 0..n {
        let (m, mi, v) = (rng.prob(), rng.prob(), rng.prob());
        let mut expected = if v >= 0.62 {
            "deny"
        } else if mi >= 0.47 || m < 0.31 {
            "ask"
        } else {
            "allow"
        };
        if rng.below(20) == 0 {
            expected = rng.pick(&["allow", "ask", "deny"]);
        }
        let fx = json!({"id": format!("gen-{i:06}"), "policy": "tool-call-assessment@v1",
            "state": {"task": format!("synthetic task {i}"), "tool": "tool", "arguments": {"n": i}, "restrictions": []},
            "expected": expected,
            "recorded": {"matches_task": m, "missing_information": mi, "violates_restriction": v}});
        writeln!(out, "{fx}").map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}

/// Runs a command `runs` times; returns (median, min, max) seconds and the JSON of the last
/// stdout (when it is JSON) and the peak RSS in KiB (via /usr/bin/time when available).
struct Timed {
    median: f64,
    min: f64,
    max: f64,
    stdout: String,
    peak_kib: Option<u64>,
}

fn timed(
    program: &Path,
    args: &[&str],
    runs: usize,
    stdout_to_null: bool,
) -> Result<Timed, String> {
    let gnu_time = Path::new("/usr/bin/time").exists();
    let mut times = Vec::new();
    let mut last = String::new();
    let mut peak = None;
    for _ in 0..runs {
        let mut cmd = if gnu_time {
            let mut c = Command::new("/usr/bin/time");
            c.arg("-f").arg("peak_kib=%M").arg(program).args(args);
            c
        } else {
            let mut c = Command::new(program);
            c.args(args);
            c
        };
        cmd.stdout(if stdout_to_null {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stderr(Stdio::piped());
        let started = Instant::now();
        let out = cmd
            .output()
            .map_err(|e| format!("{}: {e}", program.display()))?;
        times.push(started.elapsed().as_secs_f64());
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && out.status.code() != Some(1) {
            return Err(format!(
                "{} {}: {}\n{stderr}",
                program.display(),
                args.join(" "),
                out.status
            ));
        }
        if let Some(kib) = stderr
            .lines()
            .find_map(|l| l.strip_prefix("peak_kib="))
            .and_then(|v| v.trim().parse().ok())
        {
            peak = Some(peak.map_or(kib, |p: u64| p.max(kib)));
        }
        last = String::from_utf8_lossy(&out.stdout).into_owned();
    }
    times.sort_by(f64::total_cmp);
    Ok(Timed {
        median: times[times.len() / 2],
        min: times[0],
        max: times[times.len() - 1],
        stdout: last,
        peak_kib: peak,
    })
}

fn sweep_ms(report: &str) -> Result<f64, String> {
    let v: Value = serde_json::from_str(report).map_err(|e| format!("calibrate json: {e}"))?;
    v["families"][0]["grid"]["sweep_us"]
        .as_f64()
        .map(|us| us / 1000.0)
        .ok_or("no sweep_us".into())
}

fn grid_args(step: &str, slice: bool) -> Vec<String> {
    let (lo, hi) = if step == "0.01" {
        ("0.01", "0.99")
    } else {
        ("0.05", "0.95")
    };
    let axis = |name: &str| format!("{name}={lo}:{hi}:{step}");
    if slice {
        // One line of the full grid: the brute force's cost per point, measured honestly.
        vec![
            "--grid".into(),
            axis("restriction"),
            "--grid".into(),
            "missingInformation=0.5".into(),
            "--grid".into(),
            "taskMatch=0.35".into(),
        ]
    } else {
        vec![
            "--grid".into(),
            axis("restriction"),
            "--grid".into(),
            axis("missingInformation"),
            "--grid".into(),
            axis("taskMatch"),
        ]
    }
}

fn bench(quick: bool) -> Result<(), String> {
    let root = root();
    run(Command::new(cargo())
        .args(["build", "--release", "--quiet", "--package", "jev"])
        .current_dir(&root))?;
    let jev = root.join("target/release/jev");
    let dir = root.join("target/bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let runs = if quick { 1 } else { 3 };
    // The bundled policy declares its thresholds on 0.05..0.95; the 99-point axes of DESIGN
    // §13 need 0.01..0.99, so the bench uses a copy whose only change is the declared range.
    let pdir = dir.join("policies");
    std::fs::create_dir_all(&pdir).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(root.join("policies/tool-call-assessment.v1.json"))
        .map_err(|e| e.to_string())?;
    let mut doc: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    for p in ["restriction", "missingInformation", "taskMatch"] {
        doc["params"][p]["lo"] = json!(0.01);
        doc["params"][p]["hi"] = json!(0.99);
    }
    std::fs::write(pdir.join("tool-call-assessment.v1.json"), doc.to_string())
        .map_err(|e| e.to_string())?;
    println!(
        "# jev bench ({} run{} per measurement; medians, min..max)",
        runs,
        if runs == 1 { "" } else { "s" }
    );
    println!(
        "machine: {} cores, {}",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        cpu_model()
    );

    // 1. Sweep: fast engine vs brute force.
    println!("\n## sweep (tool-call-assessment, 3 params)");
    let sizes: &[(usize, &str, usize)] = if quick {
        &[(1000, "0.05", 19)]
    } else {
        &[
            (1000, "0.05", 19),
            (10_000, "0.05", 19),
            (10_000, "0.01", 99),
        ]
    };
    for &(n, step, per_axis) in sizes {
        let file = dir.join(format!("fixtures-{n}.jsonl"));
        if !file.exists() {
            gen_fixtures(n, &file)?;
        }
        let points = per_axis.pow(3);
        let base = |engine: &str, slice: bool| -> Vec<String> {
            let mut a: Vec<String> = [
                "calibrate",
                "--fixtures",
                file.to_str().unwrap_or_default(),
                "--policies",
                pdir.to_str().unwrap_or_default(),
                "--format",
                "json",
                "--engine",
                engine,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            a.extend(grid_args(step, slice));
            a
        };
        let fast_args = base("fast", false);
        let fast_refs: Vec<&str> = fast_args.iter().map(String::as_str).collect();
        let mut fast_ms = Vec::new();
        let mut fast_wall = None;
        for _ in 0..runs {
            let t = timed(&jev, &fast_refs, 1, false)?;
            fast_ms.push(sweep_ms(&t.stdout)?);
            fast_wall = Some(t);
        }
        fast_ms.sort_by(f64::total_cmp);
        let fast_med = fast_ms[fast_ms.len() / 2];
        // Brute force: the full grid when it is small, else one line of it, extrapolated.
        let full = n * points <= 70_000_000;
        let brute_args = base("brute", !full);
        let brute_refs: Vec<&str> = brute_args.iter().map(String::as_str).collect();
        let t = timed(&jev, &brute_refs, 1, false)?;
        let measured_ms = sweep_ms(&t.stdout)?;
        let brute_ms = if full {
            measured_ms
        } else {
            measured_ms * points as f64 / per_axis as f64
        };
        let wall = fast_wall.map(|w| w.median).unwrap_or(0.0);
        println!(
            "{n} fixtures × {per_axis}³ = {points} points: fast sweep {:.1} ms (median; {:.1}..{:.1}; whole calibrate run {:.2} s), brute force {} {:.0} ms → fast is {:.0}× faster",
            fast_med,
            fast_ms[0],
            fast_ms[fast_ms.len() - 1],
            wall,
            if full {
                "measured"
            } else {
                "extrapolated from one full line of the grid,"
            },
            brute_ms,
            brute_ms / fast_med
        );
    }

    // 2. Replay + verify of a receipt bundle vs sha256sum over the same bytes.
    println!("\n## replay + verify (reliability receipts, JSON Lines bundle)");
    let n = if quick { 100_000 } else { 1_000_000 };
    let bundle = dir.join(format!("receipts-{n}.jsonl"));
    if !bundle.exists() {
        gen_receipts(n, &bundle)?;
    }
    let bytes = std::fs::metadata(&bundle).map(|m| m.len()).unwrap_or(0);
    let b = bundle.to_str().unwrap_or_default();
    let sha = timed(Path::new("sha256sum"), &[b], runs, true)?;
    let verify = timed(&jev, &["verify", "--format", "json", b], runs, true)?;
    let replay = timed(
        &jev,
        &[
            "replay",
            "--diff",
            "--from",
            "reliability@policy-v1",
            "--to",
            "reliability@policy-v2",
            "--format",
            "jsonl",
            "--only-changed",
            b,
        ],
        runs,
        true,
    )?;
    let mib = bytes as f64 / (1 << 20) as f64;
    let line = |name: &str, t: &Timed| {
        println!(
            "{name}: {:.2} s (median; {:.2}..{:.2}), {:.0} MiB/s{}",
            t.median,
            t.min,
            t.max,
            mib / t.median,
            t.peak_kib
                .map(|k| format!(", peak RSS {:.1} MiB", k as f64 / 1024.0))
                .unwrap_or_default()
        )
    };
    println!("{n} receipts, {mib:.0} MiB");
    line("sha256sum", &sha);
    line("jev verify", &verify);
    line("jev replay --diff", &replay);
    println!(
        "verify / sha256sum = {:.2}×, replay / sha256sum = {:.2}×, verify + replay / sha256sum = {:.2}×",
        verify.median / sha.median,
        replay.median / sha.median,
        (verify.median + replay.median) / sha.median
    );
    Ok(())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

const FUZZ_TARGETS: [&str; 5] = [
    "strict_json",
    "canonical",
    "policy_load",
    "fixtures_load",
    "receipt_verify",
];

fn fuzz(args: &[String]) -> Result<(), String> {
    let seconds: u64 = match args.first() {
        Some(s) if s.chars().all(|c| c.is_ascii_digit()) => s.parse().map_err(|_| "SECONDS")?,
        _ => 600,
    };
    let named: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.chars().all(|c| c.is_ascii_digit()))
        .collect();
    let targets: Vec<&str> = if named.is_empty() {
        FUZZ_TARGETS.to_vec()
    } else {
        named
    };
    let root = root();
    let fuzz_dir = root.join("fuzz");
    let mut summary = Vec::new();
    for t in targets {
        if !FUZZ_TARGETS.contains(&t) {
            return Err(format!(
                "unknown fuzz target {t:?} (have: {})",
                FUZZ_TARGETS.join(", ")
            ));
        }
        let corpus = root.join("target/fuzz-corpus").join(t);
        std::fs::create_dir_all(&corpus).map_err(|e| e.to_string())?;
        let seeds = fuzz_dir.join("seeds").join(t);
        eprintln!("xtask: fuzzing {t} for {seconds} s");
        let out = Command::new(cargo())
            .args(["fuzz", "run", t])
            .arg(&corpus)
            .arg(&seeds)
            .args([
                "--",
                &format!("-max_total_time={seconds}"),
                "-max_len=65536",
                "-timeout=10",
                "-rss_limit_mb=2048",
            ])
            .env("RUSTC_BOOTSTRAP", "1")
            .current_dir(&fuzz_dir)
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cargo fuzz: {e} (install it with `cargo install cargo-fuzz`)"))?;
        let log = String::from_utf8_lossy(&out.stderr);
        let done = log
            .lines()
            .rev()
            .find(|l| l.starts_with("Done "))
            .unwrap_or("no 'Done' line")
            .to_owned();
        if !out.status.success() {
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            return Err(format!(
                "{t}: the fuzzer stopped ({}):\n{}",
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
        summary.push(format!("{t}: {done}"));
    }
    for line in summary {
        println!("{line}");
    }
    Ok(())
}
