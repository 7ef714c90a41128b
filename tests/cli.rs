//! The jev binary, end to end: every test runs the real executable through [`Jev`] and checks
//! the exit code (by name), stdout and stderr together.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use jev::exit;
use serde::Deserialize;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A jev invocation under construction.
struct Jev {
    args: Vec<String>,
    stdin: Option<String>,
    dir: PathBuf,
}

/// What a finished invocation produced.
#[derive(Debug)]
struct Run {
    code: u8,
    stdout: String,
    stderr: String,
}

fn jev(args: &[&str]) -> Jev {
    Jev {
        args: args.iter().map(|s| s.to_string()).collect(),
        stdin: None,
        dir: PathBuf::from(ROOT),
    }
}

impl Jev {
    fn stdin(mut self, text: impl Into<String>) -> Jev {
        self.stdin = Some(text.into());
        self
    }
    fn in_dir(mut self, dir: &Path) -> Jev {
        self.dir = dir.to_owned();
        self
    }
    fn run(self) -> Run {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin!("jev"))
            .args(&self.args)
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn jev");
        let input = self.stdin.unwrap_or_default();
        let mut pipe = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
        let out = child.wait_with_output().expect("wait for jev");
        writer.join().unwrap();
        Run {
            code: out.status.code().expect("jev ended by a signal") as u8,
            stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
        }
    }
    /// Runs and asserts the exit code, and that a success leaves stderr empty.
    fn expect(self, code: u8) -> Run {
        let what = self.args.join(" ");
        let run = self.run();
        assert_eq!(
            run.code, code,
            "jev {what}\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        );
        if code == exit::OK {
            assert_eq!(run.stderr, "", "jev {what}: unexpected stderr");
        }
        run
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyRef {
    name: String,
    version: String,
    digest: String,
}

/// The `decide --format jsonl` line of a reliability policy (DESIGN §11).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReliabilityDecision {
    id: Option<String>,
    commitment: String,
    next_action: String,
    matched_rule: String,
    suppressed_rules: Vec<String>,
    reason_codes: Vec<String>,
    obligations: Vec<String>,
    policy: PolicyRef,
}

fn decode<T: for<'de> Deserialize<'de>>(stdout: &str) -> Vec<T> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

const CHAPTER12: &str = "examples/chapter12.jsonl";

#[test]
fn decide_chapter_records_under_v1_and_v2() {
    let expected = [
        ("clean", "PERMIT/NONE", "PERMIT/NONE"),
        ("provenance-unverified", "PERMIT/NONE", "HOLD/VERIFY"),
        ("recoverable-evidence-gap", "HOLD/RETRIEVE", "HOLD/RETRIEVE"),
        ("sensitivity-failure", "HOLD/REVIEW", "HOLD/REVIEW"),
        (
            "prohibited-request",
            "DENY/REFUSE_REQUEST",
            "DENY/REFUSE_REQUEST",
        ),
    ];
    let v1 = decode::<ReliabilityDecision>(
        &jev(&["decide", "--policy", "reliability@policy-v1", CHAPTER12])
            .expect(exit::OK)
            .stdout,
    );
    let v2 = decode::<ReliabilityDecision>(
        &jev(&["decide", "--policy", "reliability@policy-v2", CHAPTER12])
            .expect(exit::OK)
            .stdout,
    );
    assert_eq!(v1.len(), 5);
    assert_eq!(v2.len(), 5);
    for ((id, want1, want2), (d1, d2)) in expected.iter().zip(v1.iter().zip(&v2)) {
        assert_eq!(d1.id.as_deref(), Some(*id));
        assert_eq!(
            format!("{}/{}", d1.commitment, d1.next_action),
            *want1,
            "v1 {id}"
        );
        assert_eq!(
            format!("{}/{}", d2.commitment, d2.next_action),
            *want2,
            "v2 {id}"
        );
        assert_eq!(d1.policy.name, "reliability");
        assert_eq!(d1.policy.version, "policy-v1");
        assert_eq!(d2.policy.version, "policy-v2");
    }
    let digest = jev(&["policy", "digest", "reliability@policy-v2"])
        .expect(exit::OK)
        .stdout;
    assert_eq!(v2[0].policy.digest, digest.trim());
    assert_eq!(v2[1].matched_rule, "VERIFIED_PROVENANCE_REQUIRED");
    assert_eq!(v2[1].obligations, ["verify_provenance"]);
    assert_eq!(v2[4].reason_codes, ["POLICY_PROHIBITED"]);
    assert!(v2[4].suppressed_rules.is_empty());
}

#[test]
fn decide_table_output() {
    let run = jev(&[
        "decide",
        "--policy",
        "reliability@policy-v2",
        "--format",
        "table",
        CHAPTER12,
    ])
    .expect(exit::OK);
    insta::assert_snapshot!(run.stdout);
}

#[test]
fn decide_json_array_and_whole_document_input() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("one.json");
    std::fs::write(
        &doc,
        "{\n  \"answers\": {\n    \"matches_task\": 0.9,\n    \"missing_information\": 0.1,\n    \"violates_restriction\": 0.5\n  }\n}\n",
    )
    .unwrap();
    let run = jev(&[
        "decide",
        "--policy",
        "tool-call-assessment@v1",
        "--format",
        "json",
    ])
    .expect(exit::OK);
    assert_eq!(run.stdout.trim(), "[]", "no records, no decisions");
    let run = jev(&[
        "decide",
        "--policy",
        "tool-call-assessment@v1",
        "--format",
        "json",
        doc.to_str().unwrap(),
    ])
    .expect(exit::OK);
    let all: Vec<serde_json::Value> = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(
        all[0]["action"], "deny",
        "0.5 equals the restriction threshold: at/above"
    );
}

#[test]
fn bundled_policies_work_from_any_directory() {
    let dir = tempfile::tempdir().unwrap();
    let records = std::fs::read_to_string(Path::new(ROOT).join(CHAPTER12)).unwrap();
    let run = jev(&["decide", "--policy", "reliability@policy-v2"])
        .stdin(records)
        .in_dir(dir.path())
        .expect(exit::OK);
    assert_eq!(run.stdout.lines().count(), 5);
    let run = jev(&["policy", "list"]).in_dir(dir.path()).expect(exit::OK);
    assert!(
        run.stdout.contains("(bundled) proposal-review.v1.json"),
        "{}",
        run.stdout
    );
}

#[test]
fn bad_records_exit_2_naming_line_and_field_and_write_nothing_for_them() {
    let good = r#"{"record": {"containment": "PASS", "relation_fidelity": "PASS", "sensitivity": "PASS", "epistemic_adequacy": "ANSWERABLE", "provenance": "VERIFIED"}}"#;
    let bad = |edit: &str| good.replacen("\"provenance\": \"VERIFIED\"", edit, 1);
    let cases = [
        (
            bad(r#""provenance": "MAYBE""#),
            "<stdin>:2: record.provenance: \"MAYBE\" is not one of",
        ),
        (
            bad(r#""other": 1"#),
            "<stdin>:2: missing required field record.provenance (required by reliability@policy-v2)",
        ),
        (
            format!(
                "{}, \"history\": {{\"step_index\": \"3\"}}}}",
                &good[..good.len() - 1]
            ),
            "<stdin>:2: history.step_index: expected an integer, found \"3\"",
        ),
        (
            bad(r#""provenance": 1e400"#),
            "<stdin>:2: record.provenance: number out of range",
        ),
        (
            format!(
                "{}, \"history\": {{\"verify_attempts\": -1}}}}",
                &good[..good.len() - 1]
            ),
            "<stdin>:2: history.verify_attempts: -1 is below the minimum 0",
        ),
        (
            format!("{}, \"extra\": {{}}}}", &good[..good.len() - 1]),
            "<stdin>:2: extra: unknown top-level section",
        ),
        ("{not json".to_string(), "<stdin>:2: key must be a string"),
        (
            bad(r#""provenance": "VERIFIED", "provenance": "VERIFIED""#),
            "<stdin>:2: record.provenance: duplicate key",
        ),
    ];
    for (line, message) in cases {
        let run = jev(&["decide", "--policy", "reliability@policy-v2"])
            .stdin(format!("{good}\n{line}\n{good}\n"))
            .expect(exit::INPUT_ERROR);
        assert!(run.stderr.starts_with("jev: "), "{}", run.stderr);
        assert!(
            run.stderr.contains(message),
            "want {message:?} in {:?}",
            run.stderr
        );
        assert_eq!(
            run.stdout.lines().count(),
            1,
            "only the good line before the bad one is decided"
        );
    }
}

#[test]
fn param_overrides_are_range_checked() {
    let rec = r#"{"record": {"validation": "passed"}, "answers": {"addresses_task": 0.7, "evidence_supports": 0.9, "unrelated_changes": 0.1, "needs_clarification": 0.1}}"#;
    let run = jev(&["decide", "--policy", "proposal-review@v1"])
        .stdin(rec)
        .expect(exit::OK);
    assert!(
        run.stdout.contains("\"verdict\":\"proposal_only\""),
        "{}",
        run.stdout
    );
    let run = jev(&[
        "decide",
        "--policy",
        "proposal-review@v1",
        "--param",
        "threshold=0.7",
    ])
    .stdin(rec)
    .expect(exit::OK);
    assert!(
        run.stdout.contains("\"verdict\":\"permit\""),
        "{}",
        run.stdout
    );
    let run = jev(&[
        "decide",
        "--policy",
        "proposal-review@v1",
        "--param",
        "threshold=0.45",
    ])
    .stdin(rec)
    .expect(exit::INPUT_ERROR);
    assert!(
        run.stderr.contains("outside the declared range [0.5, 1]"),
        "{}",
        run.stderr
    );
    let run = jev(&[
        "decide",
        "--policy",
        "proposal-review@v1",
        "--param",
        "nope=1",
    ])
    .stdin(rec)
    .expect(exit::INPUT_ERROR);
    assert!(
        run.stderr.contains("has no such param (it has: threshold)"),
        "{}",
        run.stderr
    );
}

fn write_edited_policy(
    dir: &Path,
    file: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> PathBuf {
    let text = std::fs::read_to_string(Path::new(ROOT).join("policies").join(file)).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut doc);
    let path = dir.join(file);
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

#[test]
fn policy_lint_exit_codes() {
    let run = jev(&["policy", "lint"]).expect(exit::OK);
    assert_eq!(
        run.stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        8,
        "{}",
        run.stdout
    );

    let dir = tempfile::tempdir().unwrap();
    let allow = write_edited_policy(dir.path(), "tool-call-assessment.v1.json", |d| {
        d["failure"]["outcome"]["action"] = "allow".into();
    });
    let run = jev(&["policy", "lint", allow.to_str().unwrap()]).expect(exit::FOUND);
    assert!(
        run.stdout
            .contains("failure.outcome.action: a failed measurement could yield \"allow\""),
        "{}",
        run.stdout
    );

    let exclusion = write_edited_policy(dir.path(), "reliability.policy-v2.json", |d| {
        d["fallback"][0]["when"]["all"][3] = serde_json::json!({"input": "record.provenance", "op": "not_in", "values": ["UNVERIFIED"]});
    });
    let run = jev(&["policy", "lint", exclusion.to_str().unwrap()]).expect(exit::FOUND);
    assert!(
        run.stdout
            .contains("accepts record.provenance by excluding values"),
        "{}",
        run.stdout
    );

    let broken = write_edited_policy(dir.path(), "model-routing.v1.json", |d| {
        d["rules"][0]["outcome"]["route"] = "turbo".into();
    });
    let run = jev(&["policy", "lint", broken.to_str().unwrap()]).expect(exit::INPUT_ERROR);
    assert!(
        run.stderr
            .contains("model-routing.v1.json: rules[0].outcome.route: \"turbo\" is not a value"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_local_policy_that_differs_from_the_bundled_copy_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    write_edited_policy(dir.path(), "reliability.policy-v1.json", |d| {
        d["rules"][1]["priority"] = 96.into();
    });
    let run = jev(&[
        "policy",
        "digest",
        "reliability@policy-v1",
        "--policies",
        dir.path().to_str().unwrap(),
    ])
    .run();
    assert_eq!(run.code, exit::OK);
    assert!(
        run.stderr.contains("differs from the bundled copy"),
        "{}",
        run.stderr
    );
    let bundled = jev(&["policy", "digest", "reliability@policy-v1"])
        .in_dir(dir.path())
        .expect(exit::OK);
    assert_ne!(run.stdout, bundled.stdout);
    let run = jev(&["policy", "show", "nope@v9"]).expect(exit::INPUT_ERROR);
    assert!(run.stderr.contains("no policy nope@v9"), "{}", run.stderr);
}

#[test]
fn policy_digest_is_the_canonical_digest_of_the_file() {
    for file in ["reliability.policy-v3.json", "tool-selection.v1.json"] {
        let path = format!("policies/{file}");
        let a = jev(&["policy", "digest", &path]).expect(exit::OK).stdout;
        let b = jev(&["digest", &path]).expect(exit::OK).stdout;
        assert_eq!(a, b);
        assert!(a.starts_with("sha256:") && a.trim().len() == 71);
    }
}

#[test]
fn policy_show_explains_rules() {
    let run = jev(&["policy", "show", "reliability@policy-v3"]).expect(exit::OK);
    assert!(
        run.stdout
            .contains("record.source_freshness not_in [FRESH, NOT_APPLICABLE]"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains(
        "route terminal: REVIEW if context.human_review_available == true; else ABSTAIN"
    ));
    let run = jev(&["policy", "show", "skill-routing@v1", "--format", "json"]).expect(exit::OK);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["name"], "skill-routing");
}

#[test]
fn canonical_form_matches_the_rfc8785_vectors() {
    let dir = Path::new(ROOT).join("tests/data/jcs");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir.join("input")).unwrap() {
        let input = entry.unwrap().path();
        let name = input.file_name().unwrap();
        let want = std::fs::read(dir.join("output").join(name)).unwrap();
        let run = jev(&["digest", "--canonical", input.to_str().unwrap()]).expect(exit::OK);
        assert_eq!(
            run.stdout.as_bytes(),
            [want.as_slice(), b"\n"].concat(),
            "{}",
            input.display()
        );
        seen += 1;
    }
    assert_eq!(seen, 6);
}

#[test]
fn digest_refuses_ambiguous_documents() {
    let run = jev(&["digest", "-"])
        .stdin(r#"{"a": 1, "a": 2}"#)
        .expect(exit::INPUT_ERROR);
    assert!(
        run.stderr.contains("<stdin>: a: duplicate key \"a\""),
        "{}",
        run.stderr
    );
    let run = jev(&["digest"])
        .stdin("[9007199254740993]")
        .expect(exit::INPUT_ERROR);
    assert!(run.stderr.contains("2^53"), "{}", run.stderr);
    let run = jev(&["digest", "no/such/file.json"]).expect(exit::INPUT_ERROR);
    assert!(
        run.stderr.starts_with("jev: no/such/file.json: "),
        "{}",
        run.stderr
    );
}

#[test]
fn usage_errors_and_help() {
    jev(&["--help"]).expect(exit::OK);
    jev(&["frobnicate"]).expect(exit::INPUT_ERROR);
    jev(&["decide"]).expect(exit::INPUT_ERROR);
    let run = jev(&[
        "decide",
        "--policy",
        "reliability@policy-v2",
        "--format",
        "yaml",
    ])
    .expect(exit::INPUT_ERROR);
    assert!(
        run.stderr.contains("invalid value 'yaml'"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let line = r#"{"answers": {"matches_task": 0.9, "missing_information": 0.1, "violates_restriction": 0.1}}"#;
    let input = format!("{line}\n").repeat(20_000);
    let mut child = Command::new(assert_cmd::cargo::cargo_bin!("jev"))
        .args(["decide", "--policy", "tool-call-assessment@v1"])
        .current_dir(ROOT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_eq!(out.status.code(), Some(exit::OK as i32));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// Tidy checks on the repository itself.
mod tidy {
    use super::*;

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn no_unfinished_or_debugging_code() {
        let mut files = Vec::new();
        for dir in ["src", "xtask/src", "tests"] {
            rust_files(&Path::new(ROOT).join(dir), &mut files);
        }
        assert!(files.len() > 10);
        let banned = [
            concat!("to", "do!("),
            concat!("unimpl", "emented!("),
            concat!("db", "g!("),
            concat!("FIX", "ME"),
        ];
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for b in banned {
                assert!(!text.contains(b), "{} contains {b}", file.display());
            }
        }
    }

    #[test]
    fn every_policy_file_is_compiled_in_and_identical() {
        let mut on_disk: Vec<String> = std::fs::read_dir(Path::new(ROOT).join("policies"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut bundled: Vec<String> = jev::policy::registry::BUNDLED
            .iter()
            .map(|(n, _)| n.to_string())
            .collect();
        bundled.sort();
        assert_eq!(on_disk, bundled);
        // The default `policies/` copies and the compiled-in ones agree: no drift warning.
        let run = jev(&["policy", "list"]).expect(exit::OK);
        assert_eq!(run.stdout.matches("policies/").count(), 8, "{}", run.stdout);
    }

    #[test]
    fn policies_bind_the_digest_of_their_question_set_file() {
        let mut bound = 0;
        for (file, text) in jev::policy::registry::BUNDLED {
            let doc: serde_json::Value = serde_json::from_str(text).unwrap();
            let Some(qs) = doc.get("question_set") else {
                continue;
            };
            let id = qs["id"].as_str().unwrap();
            let path = format!("questions/{}.json", id.replace('@', "."));
            let digest = jev(&["digest", &path]).expect(exit::OK).stdout;
            assert_eq!(
                qs["digest"].as_str().unwrap(),
                digest.trim(),
                "{file} binds a stale digest of {path}"
            );
            bound += 1;
        }
        assert!(bound >= 1);
    }

    #[test]
    fn readme_quick_start_commands_exist() {
        let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
        assert!(readme.contains("cargo test --workspace --locked"));
        let ci = std::fs::read_to_string(Path::new(ROOT).join(".ci/run")).unwrap();
        assert!(
            ci.contains("cargo test --workspace --locked"),
            ".ci/run runs the README's test command"
        );
    }
}

/// Copies a directory tree (receipt fixtures) into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn receipts(name: &str) -> String {
    format!("receipts/{name}")
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaySummary {
    total: usize,
    same: usize,
    stricter: usize,
    looser: usize,
    lateral: usize,
    indeterminate: usize,
    invalid: usize,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Transition {
    from: String,
    to: String,
    count: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayRow {
    id: Option<String>,
    path: String,
    status: String,
    from: Option<serde_json::Map<String, serde_json::Value>>,
    to: Option<serde_json::Map<String, serde_json::Value>>,
    changed_fields: Vec<String>,
    missing_required_fields: Vec<String>,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayReport {
    from: serde_json::Value,
    to: PolicyRef,
    summary: ReplaySummary,
    transitions: Vec<Transition>,
    rows: Vec<ReplayRow>,
}

fn replay_json(from: &str, to: &str, path: &str) -> ReplayReport {
    let run = jev(&[
        "replay", "--diff", "--from", from, "--to", to, "--format", "json", path,
    ])
    .expect(exit::OK);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{}", run.stdout))
}

#[test]
fn replay_chapter_records_v1_to_v2_shows_one_stricter_change() {
    let report = replay_json(
        "reliability@policy-v1",
        "reliability@policy-v2",
        &receipts("chapter12"),
    );
    assert_eq!(report.from["version"], "policy-v1");
    assert_eq!(report.to.version, "policy-v2");
    let s = &report.summary;
    assert_eq!(
        (
            s.total,
            s.same,
            s.stricter,
            s.looser,
            s.lateral,
            s.indeterminate,
            s.invalid
        ),
        (5, 4, 1, 0, 0, 0, 0)
    );
    assert_eq!(
        report.transitions,
        [Transition {
            from: "PERMIT/NONE".into(),
            to: "HOLD/VERIFY".into(),
            count: 1
        }]
    );
    let changed: Vec<&ReplayRow> = report.rows.iter().filter(|r| r.status != "same").collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].id.as_deref(), Some("provenance-unverified"));
    assert_eq!(changed[0].status, "stricter");
    assert_eq!(
        changed[0].changed_fields,
        ["outcome", "matched_rule", "reason_codes", "obligations"]
    );
    assert_eq!(changed[0].to.as_ref().unwrap()["next_action"], "VERIFY");
    assert!(changed[0].path.ends_with("provenance-unverified.json"));

    // The table says the same, with the transition line.
    let run = jev(&[
        "replay",
        "--diff",
        "--from",
        "reliability@policy-v1",
        "--to",
        "reliability@policy-v2",
        &receipts("chapter12"),
    ])
    .expect(exit::OK);
    assert!(
        run.stdout.contains("PERMIT/NONE → HOLD/VERIFY: 1"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("5 receipts: 4 same, 1 changed (1 stricter, 0 looser, 0 lateral), 0 indeterminate, 0 invalid"));
    // --from recorded agrees with re-deciding under v1.
    let recorded = replay_json("recorded", "reliability@policy-v2", &receipts("chapter12"));
    assert_eq!(recorded.from, "recorded");
    for (a, b) in recorded.rows.iter().zip(&report.rows) {
        assert_eq!(
            (&a.id, &a.status, &a.from, &a.to),
            (&b.id, &b.status, &b.from, &b.to)
        );
    }
}

#[test]
fn replay_marks_missing_fields_indeterminate_never_defaulted() {
    let report = replay_json(
        "reliability@policy-v1",
        "reliability@policy-v3",
        &receipts("chapter12"),
    );
    assert_eq!(report.summary.indeterminate, 5);
    for row in &report.rows {
        assert_eq!(row.status, "POLICY_REPLAY_INDETERMINATE");
        assert_eq!(row.missing_required_fields, ["record.source_freshness"]);
        assert!(row.from.is_some() && row.to.is_none());
    }
    let report = replay_json(
        "reliability@policy-v1",
        "reliability@policy-v2",
        &receipts("v1-era"),
    );
    assert_eq!(report.summary.indeterminate, 3);
    assert!(
        report
            .rows
            .iter()
            .all(|r| r.missing_required_fields == ["record.provenance"])
    );

    // --fail-on: 3 when only indeterminate tripped, 1 when a change trips.
    let base = [
        "replay",
        "--diff",
        "--from",
        "reliability@policy-v1",
        "--to",
        "reliability@policy-v3",
    ];
    jev(&[
        &base[..],
        &["--fail-on", "indeterminate", "receipts/chapter12"],
    ]
    .concat())
    .expect(exit::INDETERMINATE);
    jev(&[&base[..], &["--fail-on", "changed", "receipts/chapter12"]].concat()).expect(exit::OK);
    let to_v2 = [
        "replay",
        "--diff",
        "--from",
        "reliability@policy-v1",
        "--to",
        "reliability@policy-v2",
    ];
    jev(&[
        &to_v2[..],
        &["--fail-on", "changed,indeterminate", "receipts/chapter12"],
    ]
    .concat())
    .expect(exit::FOUND);
    jev(&[&to_v2[..], &["--fail-on", "looser", "receipts/chapter12"]].concat()).expect(exit::OK);
    // Replaying back from v2 to v1 is looser.
    let run = jev(&[
        "replay",
        "--diff",
        "--from",
        "reliability@policy-v2",
        "--to",
        "reliability@policy-v1",
        "--fail-on",
        "looser",
        "receipts/chapter12",
    ])
    .expect(exit::FOUND);
    assert!(
        run.stdout.contains("HOLD/VERIFY → PERMIT/NONE: 1"),
        "{}",
        run.stdout
    );
}

#[test]
fn replay_output_formats() {
    let args = [
        "replay",
        "--diff",
        "--from",
        "reliability@policy-v1",
        "--to",
        "reliability@policy-v2",
        "--only-changed",
    ];
    let run =
        jev(&[&args[..], &["--format", "jsonl", "receipts/chapter12"]].concat()).expect(exit::OK);
    let lines: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "one changed row, then the summary");
    assert_eq!(lines[0]["status"], "stricter");
    assert_eq!(lines[1]["summary"]["total"], 5);
    let run =
        jev(&[&args[..], &["--format", "csv", "receipts/chapter12"]].concat()).expect(exit::OK);
    let mut csv = csv::Reader::from_reader(run.stdout.as_bytes());
    let rows: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(&rows[0][2], "stricter");
    assert_eq!(&rows[0][3], "PERMIT/NONE");
    assert_eq!(&rows[0][4], "HOLD/VERIFY");
    let run = jev(&[&args[..], &["--format", "markdown", "receipts/chapter12"]].concat())
        .expect(exit::OK);
    insta::assert_snapshot!(run.stdout);
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyReport {
    summary: VerifySummary,
    authenticity: String,
    seal: VerifySeal,
    receipts: Vec<VerifyReceipt>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifySummary {
    total: usize,
    ok: usize,
    failed: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifySeal {
    present: bool,
    ok: bool,
    errors: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyReceipt {
    path: String,
    id: Option<String>,
    ok: bool,
    errors: Vec<String>,
}

fn verify_json(args: &[&str], code: u8) -> VerifyReport {
    let run = jev(&[&["verify", "--format", "json"], args].concat()).expect(code);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{}", run.stdout))
}

#[test]
fn bundled_receipts_verify_unauthenticated() {
    let report = verify_json(
        &[
            "receipts/chapter12",
            "receipts/v1-era",
            "receipts/assessment",
        ],
        exit::OK,
    );
    assert_eq!(
        (
            report.summary.total,
            report.summary.ok,
            report.summary.failed
        ),
        (13, 13, 0)
    );
    assert_eq!(report.authenticity, "UNAUTHENTICATED");
    assert!(report.seal.present && report.seal.ok && report.seal.errors.is_empty());
    assert!(
        report
            .receipts
            .iter()
            .all(|r| r.ok && r.errors.is_empty() && r.id.is_some())
    );
    let run = jev(&["verify", "receipts/assessment"]).expect(exit::OK);
    assert!(
        run.stdout
            .contains("5 receipts: 5 ok, 0 failed; seal ok; UNAUTHENTICATED"),
        "{}",
        run.stdout
    );
}

#[test]
fn any_changed_byte_fails_verification() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&Path::new(ROOT).join("receipts/chapter12"), dir.path());
    let file = dir.path().join("provenance-unverified.json");
    let original = std::fs::read(&file).unwrap();
    // Every 5th byte, flipped: whatever it hits (content, key, whitespace), verify fails.
    for i in (0..original.len()).step_by(5) {
        let mut bytes = original.clone();
        bytes[i] ^= 0x01;
        std::fs::write(&file, &bytes).unwrap();
        let run = jev(&["verify", dir.path().to_str().unwrap()]).run();
        assert_eq!(run.code, exit::FOUND, "byte {i}: {}", run.stdout);
        assert!(
            run.stdout.contains("provenance-unverified.json"),
            "byte {i}: {}",
            run.stdout
        );
    }
    // Unsealed, a content change is caught by the digest, and replay reports the row INVALID.
    let loose = tempfile::tempdir().unwrap();
    let text = String::from_utf8(original)
        .unwrap()
        .replace("\"UNVERIFIED\"", "\"VERIFIED\"");
    std::fs::write(loose.path().join("tampered.json"), text).unwrap();
    let report = verify_json(&[loose.path().to_str().unwrap()], exit::FOUND);
    assert_eq!(report.summary.failed, 1);
    assert!(report.receipts[0].path.ends_with("tampered.json"));
    assert!(
        report.receipts[0].errors[0].starts_with("digest mismatch"),
        "{:?}",
        report.receipts[0].errors
    );
    assert!(!report.seal.present);
    let replayed = jev(&[
        "replay",
        "--diff",
        "--from",
        "reliability@policy-v1",
        "--to",
        "reliability@policy-v2",
        "--format",
        "json",
        loose.path().to_str().unwrap(),
    ])
    .expect(exit::OK);
    let report: ReplayReport = serde_json::from_str(&replayed.stdout).unwrap();
    assert_eq!(report.rows[0].status, "INVALID");
    assert!(
        report.rows[0]
            .error
            .as_deref()
            .unwrap()
            .starts_with("digest mismatch")
    );
    assert!(
        report.rows[0].from.is_none() && report.rows[0].to.is_none(),
        "an invalid receipt is not replayed"
    );
    assert_eq!(report.summary.invalid, 1);
}

#[test]
fn sealed_directory_changes_fail() {
    let fresh = || {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&Path::new(ROOT).join("receipts/chapter12"), dir.path());
        dir
    };
    let removed = fresh();
    std::fs::remove_file(removed.path().join("clean.json")).unwrap();
    let r = verify_json(&[removed.path().to_str().unwrap()], exit::FOUND);
    assert!(
        r.seal
            .errors
            .iter()
            .any(|e| e.ends_with("clean.json: sealed file is missing")),
        "{:?}",
        r.seal.errors
    );

    let added = fresh();
    std::fs::copy(
        added.path().join("clean.json"),
        added.path().join("clean-copy.json"),
    )
    .unwrap();
    let r = verify_json(&[added.path().to_str().unwrap()], exit::FOUND);
    assert!(
        r.seal
            .errors
            .iter()
            .any(|e| e.ends_with("clean-copy.json: file is not in the seal")),
        "{:?}",
        r.seal.errors
    );
    assert_eq!(
        r.summary.failed, 0,
        "the receipts themselves are fine; the seal is not"
    );

    let renamed = fresh();
    std::fs::rename(
        renamed.path().join("clean.json"),
        renamed.path().join("renamed.json"),
    )
    .unwrap();
    let r = verify_json(&[renamed.path().to_str().unwrap()], exit::FOUND);
    assert_eq!(r.seal.errors.len(), 2, "{:?}", r.seal.errors);

    // Re-sealing after the change makes it verify again (without a key, anyone can re-seal:
    // hence UNAUTHENTICATED).
    jev(&["seal", renamed.path().to_str().unwrap()]).expect(exit::OK);
    verify_json(&[renamed.path().to_str().unwrap()], exit::OK);
}

#[test]
fn editing_a_policy_without_a_version_bump_is_policy_drift() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&Path::new(ROOT).join("policies"), dir.path());
    write_edited_policy(dir.path(), "reliability.policy-v1.json", |d| {
        d["rules"][6]["obligations"] =
            serde_json::json!(["review_context_dependence", "notify_owner"]);
    });
    let run = jev(&[
        "verify",
        "--policies",
        dir.path().to_str().unwrap(),
        "receipts/chapter12",
    ])
    .run();
    assert_eq!(run.code, exit::FOUND);
    assert_eq!(
        run.stdout
            .matches("policy drift: reliability@policy-v1")
            .count(),
        5,
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("differs from the bundled copy"),
        "{}",
        run.stderr
    );
    // Receipts bound to other policies are unaffected.
    jev(&[
        "verify",
        "--policies",
        dir.path().to_str().unwrap(),
        "receipts/assessment",
    ])
    .expect(exit::OK);
}

#[test]
fn verify_fails_closed() {
    let empty = tempfile::tempdir().unwrap();
    let run = jev(&["verify", empty.path().to_str().unwrap()]).expect(exit::FOUND);
    assert!(run.stderr.contains("no receipts found"), "{}", run.stderr);
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(bad.path().join("garbage.json"), "{\"jev_receipt\": 1,").unwrap();
    std::fs::write(bad.path().join("binary.json"), [0xff, 0xfe, 0x00]).unwrap();
    std::fs::write(bad.path().join("dup.json"), r#"{"id": "a", "id": "b"}"#).unwrap();
    let r = verify_json(&[bad.path().to_str().unwrap()], exit::FOUND);
    assert_eq!(r.summary.failed, 3);
    let errors: Vec<&str> = r.receipts.iter().map(|x| x.errors[0].as_str()).collect();
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("unreadable: not UTF-8")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("duplicate key")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.starts_with("parse: ")),
        "{errors:?}"
    );
    jev(&["verify", "no/such/dir"]).expect(exit::INPUT_ERROR);
    let run =
        jev(&["verify", "--format", "junit", bad.path().to_str().unwrap()]).expect(exit::FOUND);
    assert!(
        run.stdout
            .contains("<testsuite name=\"jev verify\" tests=\"3\" failures=\"3\">"),
        "{}",
        run.stdout
    );
}

#[test]
fn re_derivation_catches_a_rewritten_decision_with_a_fresh_digest() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(
        Path::new(ROOT).join("receipts/chapter12/sensitivity-failure.json"),
    )
    .unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["decision"]["commitment"] = "PERMIT".into();
    doc["decision"]["next_action"] = "NONE".into();
    doc.as_object_mut().unwrap().remove("digest");
    let digest = jev(&["digest"])
        .stdin(doc.to_string())
        .expect(exit::OK)
        .stdout;
    doc["digest"] = digest.trim().into();
    std::fs::write(dir.path().join("forged.json"), doc.to_string()).unwrap();
    let r = verify_json(&[dir.path().to_str().unwrap()], exit::FOUND);
    let errors = &r.receipts[0].errors;
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(
        errors[0],
        "decision.commitment: recorded \"PERMIT\", re-derived \"HOLD\""
    );
    assert_eq!(
        errors[1],
        "decision.next_action: recorded \"NONE\", re-derived \"REVIEW\""
    );
}

#[test]
fn committed_receipts_are_what_xtask_receipts_writes() {
    let recipes: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(ROOT).join("xtask/receipts.json")).unwrap(),
    )
    .unwrap();
    let created_at = recipes["created_at"].as_str().unwrap();
    let out = tempfile::tempdir().unwrap();
    for set in recipes["sets"].as_array().unwrap() {
        let dir = set["dir"].as_str().unwrap();
        let target = out.path().join(dir);
        let target_s = target.to_str().unwrap();
        jev(&[
            "decide",
            "--policy",
            set["policy"].as_str().unwrap(),
            "--receipts",
            target_s,
            "--created-at",
            created_at,
            set["records"].as_str().unwrap(),
        ])
        .expect(exit::OK);
        jev(&["seal", target_s]).expect(exit::OK);
        let mut want: Vec<String> = std::fs::read_dir(Path::new(ROOT).join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        want.sort();
        let mut got: Vec<String> = std::fs::read_dir(&target)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        got.sort();
        assert_eq!(got, want, "{dir}: run `cargo xtask receipts`");
        for name in got {
            let a = std::fs::read(target.join(&name)).unwrap();
            let b = std::fs::read(Path::new(ROOT).join(dir).join(&name)).unwrap();
            assert!(a == b, "{dir}/{name} is stale: run `cargo xtask receipts`");
        }
    }
}

#[test]
fn decide_receipts_need_unique_ids() {
    let dir = tempfile::tempdir().unwrap();
    let line = r#"{"id": "same", "answers": {"matches_task": 0.9, "missing_information": 0.1, "violates_restriction": 0.1}}"#;
    let run = jev(&[
        "decide",
        "--policy",
        "tool-call-assessment@v1",
        "--receipts",
        dir.path().to_str().unwrap(),
    ])
    .stdin(format!("{line}\n{line}\n"))
    .expect(exit::INPUT_ERROR);
    assert!(
        run.stderr
            .contains("<stdin>:2: id \"same\" gives receipt file same.json, already written"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "the first receipt stays, nothing partial"
    );
    jev(&[
        "decide",
        "--policy",
        "tool-call-assessment@v1",
        "--receipts",
        dir.path().to_str().unwrap(),
        "--created-at",
        "yesterday",
    ])
    .stdin(line)
    .expect(exit::INPUT_ERROR);
}
