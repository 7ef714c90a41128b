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

/// A small deterministic generator (the tests need reproducible randomness, not quality).
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
    /// A probability that is a 0.05-grid value most of the time, else any 3-decimal value.
    fn probability(&mut self) -> f64 {
        if self.below(10) < 7 {
            [
                0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7,
                0.75, 0.8, 0.85, 0.9, 0.95, 1.0,
            ][self.below(21) as usize]
        } else {
            self.below(1001) as f64 / 1000.0
        }
    }
}

fn assessment_fixture(id: &str, m: f64, mi: f64, v: f64, expected: &str) -> String {
    serde_json::json!({"id": id, "policy": "tool-call-assessment@v1",
        "state": {"task": format!("task {id}"), "tool": "t", "arguments": {}, "restrictions": []},
        "expected": expected,
        "recorded": {"matches_task": m, "missing_information": mi, "violates_restriction": v}})
    .to_string()
}

#[test]
fn grid_out_matches_an_independent_brute_force_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Lcg(0x5eed);
    let labels = ["allow", "ask", "deny"];
    let mut cases = Vec::new();
    let mut lines = String::new();
    for i in 0..40 {
        let (m, mi, v) = (rng.probability(), rng.probability(), rng.probability());
        let expected = labels[rng.below(3) as usize];
        lines.push_str(&assessment_fixture(&format!("r{i}"), m, mi, v, expected));
        lines.push('\n');
        cases.push((m, mi, v, expected));
    }
    std::fs::write(dir.path().join("random.jsonl"), lines).unwrap();
    let csv_path = dir.path().join("grid.csv");
    jev(&[
        "calibrate",
        "--fixtures",
        dir.path().to_str().unwrap(),
        "--grid-out",
        csv_path.to_str().unwrap(),
        "--format",
        "json",
    ])
    .expect(exit::OK);
    // Written independently of jev's engine: the assessment cascade at one grid point.
    let rank = |a: &str| {
        ["allow", "ask", "hold", "deny"]
            .iter()
            .position(|x| *x == a)
            .unwrap()
    };
    let decide = |m: f64, mi: f64, v: f64, r: f64, mt: f64, tm: f64| {
        if v >= r {
            "deny"
        } else if mi >= mt || m < tm {
            "ask"
        } else {
            "allow"
        }
    };
    let mut reader = csv::Reader::from_path(&csv_path).unwrap();
    assert_eq!(
        reader.headers().unwrap(),
        vec![
            "restriction",
            "missingInformation",
            "taskMatch",
            "agree",
            "under",
            "over",
            "n"
        ]
    );
    let mut rows = 0;
    for rec in reader.records() {
        let rec = rec.unwrap();
        let f = |i: usize| rec[i].parse::<f64>().unwrap();
        let (r, mt, tm) = (f(0), f(1), f(2));
        let (mut agree, mut under, mut over) = (0, 0, 0);
        for (m, mi, v, expected) in &cases {
            let d = decide(*m, *mi, *v, r, mt, tm);
            agree += u32::from(d == *expected);
            under += u32::from(rank(d) < rank(expected));
            over += u32::from(rank(d) > rank(expected));
        }
        let got: Vec<u32> = (3..7).map(|i| rec[i].parse().unwrap()).collect();
        assert_eq!(
            got,
            [agree, under, over, 40],
            "at restriction={r} missingInformation={mt} taskMatch={tm}"
        );
        rows += 1;
    }
    assert_eq!(rows, 19 * 19 * 19);
}

fn judge_log(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn judge_fixtures(dir: &Path, n: usize) {
    let lines: String = (0..n)
        .map(|i| {
            let mut v: serde_json::Value = serde_json::from_str(&assessment_fixture(
                &format!("j{i}"),
                0.9,
                0.1,
                0.1,
                "allow",
            ))
            .unwrap();
            v.as_object_mut().unwrap().remove("recorded");
            format!("{v}\n")
        })
        .collect();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("judged.jsonl"), lines).unwrap();
}

fn judge_cmd(log: &Path) -> String {
    format!(
        "python3 {} {}",
        Path::new(ROOT).join("tests/data/judge.py").display(),
        log.display()
    )
}

#[test]
fn measure_once_with_an_exec_judge() {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    judge_fixtures(&fx, 5);
    let log = dir.path().join("judge.log");
    let cache = dir.path().join("cache.jsonl");
    let cmd = judge_cmd(&log);
    let base = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "measure",
            "--fixtures",
            fx.to_str().unwrap(),
            "--backend",
            "exec",
            "--exec",
            &cmd,
            "--cache",
            cache.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let args = base(&[]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = jev(&refs).expect(exit::OK);
    assert!(
        run.stdout.contains(
            "5 fixtures, 15 questions: 0 cached, 15 measured in 5 backend calls, 0 failed"
        ),
        "{}",
        run.stdout
    );
    let first = judge_log(&log);
    assert_eq!(first.len(), 5, "one request per fixture state");
    assert!(
        first
            .iter()
            .all(|r| r["questions"].as_array().unwrap().len() == 3),
        "questions batched per state"
    );

    // Nothing changed: zero calls.
    let run = jev(&refs).expect(exit::OK);
    assert!(
        run.stdout
            .contains("15 cached, 0 measured in 0 backend calls"),
        "{}",
        run.stdout
    );
    assert_eq!(judge_log(&log).len(), 5);

    // Reword one question (a new question set, bound by a copy of the policy): only it is asked again.
    let qdir = dir.path().join("questions");
    let pdir = dir.path().join("policies");
    std::fs::create_dir_all(&qdir).unwrap();
    std::fs::create_dir_all(&pdir).unwrap();
    let qtext =
        std::fs::read_to_string(Path::new(ROOT).join("questions/tool-call-assessment.v1.json"))
            .unwrap();
    let mut q: serde_json::Value = serde_json::from_str(&qtext).unwrap();
    q["questions"]["matches_task"]["instructions"] =
        "Does the proposed call serve the task the user gave? Answer for this call only.".into();
    let qpath = qdir.join("tool-call-assessment.v1.json");
    std::fs::write(&qpath, serde_json::to_string_pretty(&q).unwrap()).unwrap();
    let digest = jev(&["digest", qpath.to_str().unwrap()])
        .expect(exit::OK)
        .stdout;
    write_edited_policy(&pdir, "tool-call-assessment.v1.json", |d| {
        d["question_set"]["digest"] = digest.trim().into()
    });
    let args = base(&[
        "--questions",
        qdir.to_str().unwrap(),
        "--policies",
        pdir.to_str().unwrap(),
    ]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = jev(&refs).run();
    assert_eq!(run.code, exit::OK, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("10 cached, 5 measured in 5 backend calls"),
        "{}",
        run.stdout
    );
    let after = judge_log(&log);
    assert_eq!(after.len(), 10);
    assert!(
        after[5..]
            .iter()
            .all(|r| r["questions"] == serde_json::json!(["matches_task"])),
        "{:?}",
        &after[5..]
    );

    // --refresh asks everything again; --offline never calls.
    let args = base(&["--offline"]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    jev(&refs).expect(exit::OK);
    assert_eq!(judge_log(&log).len(), 10);
    let args = base(&["--refresh"]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    jev(&refs).expect(exit::OK);
    assert_eq!(judge_log(&log).len(), 15);
}

#[test]
fn a_failed_judge_answer_is_reported_and_never_cached() {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    judge_fixtures(&fx, 3);
    let log = dir.path().join("judge.log");
    let cache = dir.path().join("cache.jsonl");
    let cmd = judge_cmd(&log);
    let args = [
        "measure",
        "--fixtures",
        fx.to_str().unwrap(),
        "--backend",
        "exec",
        "--exec",
        &cmd,
        "--cache",
        cache.to_str().unwrap(),
    ];
    let run = Command::new(assert_cmd::cargo::cargo_bin!("jev"))
        .args(args)
        .env("JUDGE_FAIL_ID", "j1")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(i32::from(exit::FOUND)));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains("FAIL j1 matches_task: UNAVAILABLE (judge error: scripted failure)"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&cache).unwrap().lines().count(),
        6,
        "two states' answers cached, not the failure"
    );
    // Measured again without the fault: only the failed state is asked.
    jev(&args).expect(exit::OK);
    let asked = judge_log(&log);
    assert_eq!(asked.len(), 4);
    assert_eq!(asked[3]["id"], "j1");
}

#[test]
fn killing_a_measurement_loses_nothing_completed() {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    judge_fixtures(&fx, 12);
    let log = dir.path().join("judge.log");
    let cache = dir.path().join("cache.jsonl");
    let cmd = judge_cmd(&log);
    let args = [
        "measure",
        "--fixtures",
        fx.to_str().unwrap(),
        "--backend",
        "exec",
        "--exec",
        &cmd,
        "--jobs",
        "1",
        "--cache",
        cache.to_str().unwrap(),
    ];
    let mut child = Command::new(assert_cmd::cargo::cargo_bin!("jev"))
        .args(args)
        .env("JUDGE_SLEEP", "0.15")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_to_string(&cache)
        .unwrap_or_default()
        .lines()
        .count()
        < 9
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the judge never answered"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&cache).unwrap();
    let complete: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        complete.len() >= 9 && complete.len() < 36,
        "{} lines",
        complete.len()
    );
    let done_states = complete.len() / 3;
    let asked_before = judge_log(&log).len();
    // The rerun asks only for the states the killed run had not finished.
    jev(&args).expect(exit::OK);
    let asked_after = judge_log(&log).len();
    assert_eq!(
        asked_after - asked_before,
        12 - done_states,
        "asked again only what was missing"
    );
    let cached = std::fs::read_to_string(&cache)
        .unwrap()
        .lines()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
        .count();
    assert_eq!(cached, 36);
}

#[test]
fn a_torn_cache_line_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    judge_fixtures(&fx, 2);
    let log = dir.path().join("judge.log");
    let cache = dir.path().join("cache.jsonl");
    let cmd = judge_cmd(&log);
    let args = [
        "measure",
        "--fixtures",
        fx.to_str().unwrap(),
        "--backend",
        "exec",
        "--exec",
        &cmd,
        "--cache",
        cache.to_str().unwrap(),
    ];
    jev(&args).expect(exit::OK);
    let mut text = std::fs::read_to_string(&cache).unwrap();
    let last = text.trim_end().rfind('\n').unwrap();
    text.truncate(last + 30); // tear the last line mid-record
    std::fs::write(&cache, &text).unwrap();
    let run = jev(&args).run();
    assert_eq!(run.code, exit::OK);
    assert!(
        run.stderr.contains("ignoring a torn last line"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout
            .contains("5 cached, 1 measured in 1 backend call"),
        "{}",
        run.stdout
    );
    let again = jev(&args).run();
    assert!(
        again.stdout.contains("6 cached, 0 measured"),
        "{}",
        again.stdout
    );
}

#[test]
fn polarity_warns_when_labels_follow_the_flipped_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = [0.1, 0.2, 0.3, 0.6, 0.7, 0.8]
        .iter()
        .enumerate()
        .map(|(i, v)| {
            assessment_fixture(
                &format!("p{i}"),
                0.9,
                0.1,
                *v,
                if *v < 0.5 { "deny" } else { "allow" },
            ) + "\n"
        })
        .collect();
    std::fs::write(dir.path().join("flipped.jsonl"), lines).unwrap();
    let run = jev(&["calibrate", "--fixtures", dir.path().to_str().unwrap()]).expect(exit::OK);
    assert!(
        run.stdout.contains("POLARITY WARNING: the labels agree better with restriction compared the other way round (6/6 vs 3/6)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("polarity taskMatch: ok"),
        "{}",
        run.stdout
    );
}

// The calibrate report's shape, decoded with unknown fields denied: every field is declared
// even where a test does not read it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalReport {
    families: Vec<CalFamily>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalFamily {
    policy: PolicyRef,
    fixtures: CalFixtures,
    measurement: CalMeasurement,
    grid: CalGrid,
    objective: String,
    defaults: CalDefaults,
    best: CalRegion,
    perfect: CalRegion,
    recommended: Option<CalRecommended>,
    polarity: Vec<CalPolarity>,
    curves: Vec<CalCurve>,
    disagreements: Vec<CalDisagreement>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalFixtures {
    total: usize,
    usable: usize,
    excluded: usize,
    excluded_cases: Vec<CalExcluded>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalExcluded {
    id: String,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalMeasurement {
    calls: usize,
    cached: usize,
    backend: String,
    synthetic: bool,
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalGrid {
    params: Vec<CalGridParam>,
    size: u64,
    exact: bool,
    sweep_ms: u64,
    sweep_us: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalGridParam {
    name: String,
    values: Vec<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalDefaults {
    params: std::collections::BTreeMap<String, f64>,
    agree: u32,
    n: usize,
    wilson95: [f64; 2],
    under: u32,
    over: u32,
    confusion: Option<CalConfusion>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalConfusion {
    labels: Vec<String>,
    rows: Vec<Vec<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalRegion {
    agree: u32,
    count: u64,
    ranges: std::collections::BTreeMap<String, Option<[f64; 2]>>,
    solid: bool,
    defaults_outside: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalRecommended {
    params: std::collections::BTreeMap<String, f64>,
    margin: Option<u64>,
    note: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalPolarity {
    param: String,
    best: u32,
    flipped_best: u32,
    warning: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalCurve {
    param: String,
    values: Vec<f64>,
    agree: Vec<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalDisagreement {
    id: String,
    expected: String,
    decided: String,
    rule: String,
    under: bool,
    over: bool,
    values: serde_json::Map<String, serde_json::Value>,
}

#[test]
fn calibrate_bundled_families_json_report_decodes() {
    let run = jev(&["calibrate", "--format", "json"]).expect(exit::OK);
    let report: CalReport = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<String> = report
        .families
        .iter()
        .map(|f| format!("{}@{}", f.policy.name, f.policy.version))
        .collect();
    assert_eq!(
        names,
        [
            "model-routing@v1",
            "proposal-review@v1",
            "reliability@policy-v2",
            "skill-routing@v1",
            "tool-call-assessment@v1",
            "tool-selection@v1"
        ]
    );
    for f in &report.families {
        assert!(f.policy.digest.starts_with("sha256:"));
        assert_eq!(f.fixtures.total, f.fixtures.usable + f.fixtures.excluded);
        assert_eq!(f.fixtures.excluded, f.fixtures.excluded_cases.len());
        assert!(
            f.measurement.synthetic
                && f.measurement.backend == "recorded"
                && f.measurement.calls == 0
        );
        assert_eq!(
            f.measurement.note.as_deref(),
            Some("recorded answers — plumbing, not a calibration")
        );
        let size: usize = f.grid.params.iter().map(|p| p.values.len()).product();
        assert_eq!(size as u64, f.grid.size);
        assert_eq!(f.defaults.n, f.fixtures.usable);
        assert!(
            f.defaults.wilson95[0] <= f.defaults.agree as f64 / f.defaults.n as f64
                && f.defaults.wilson95[1] >= f.defaults.agree as f64 / f.defaults.n as f64
        );
        assert_eq!(
            f.disagreements.len() as u32,
            f.defaults.n as u32 - f.defaults.agree
        );
        assert!(f.best.agree >= f.defaults.agree || f.objective != "agreement");
        assert_eq!(f.polarity.len(), f.grid.params.len());
        assert_eq!(f.curves.len(), f.grid.params.len());
    }
    let asm = &report.families[4];
    assert_eq!(
        (asm.fixtures.total, asm.fixtures.excluded),
        (31, 2),
        "25+ assessments, 2 excluded"
    );
    assert!(
        asm.fixtures
            .excluded_cases
            .iter()
            .any(|e| e.id == "asm-en-oversized-args" && e.reason.contains("not sent"))
    );
    assert_eq!((asm.defaults.under, asm.defaults.over), (1, 1));
    let confusion = asm.defaults.confusion.as_ref().unwrap();
    assert_eq!(confusion.labels, ["allow", "ask", "hold", "deny"]);
    let rel = &report.families[2];
    assert_eq!(rel.fixtures.total, 20);
    assert!(
        rel.disagreements.iter().all(|d| d.under),
        "the reliability disagreement is an under-escalation"
    );
}

#[test]
fn bad_fixtures_exit_2_naming_file_and_line() {
    let good = assessment_fixture("a", 0.9, 0.1, 0.1, "allow");
    let cases: Vec<(String, &str)> = vec![
        (assessment_fixture("b", 1.4, 0.1, 0.1, "allow"), "bad.jsonl:2: recorded.matches_task: probability 1.4 is outside [0, 1]"),
        (assessment_fixture("b", 0.9, 0.1, 0.1, "maybe"), "bad.jsonl:2: expected: \"maybe\" is not a value of action"),
        (good.replace("\"expected\":\"allow\",", ""), "bad.jsonl:2: fixture \"a\" has no expectation"),
        (good.clone(), "bad.jsonl:2: duplicate fixture id \"a\" (first at "),
        ("{garbage".into(), "bad.jsonl:2: "),
        (
            serde_json::json!({"id": "m", "policy": "model-routing@v1", "state": {"task": "x"}, "expected": "fast",
                "recorded": {"route": {"probabilities": {"fast": 0.5, "balanced": 0.1, "reasoning": 0.1, "default": 0.1}}}})
            .to_string(),
            "bad.jsonl:2: recorded.route: probabilities sum to 0.8",
        ),
        (
            serde_json::json!({"id": "m", "policy": "model-routing@v1", "state": {"task": "x"}, "expected": "fast",
                "recorded": {"route": {"probabilities": {"fast": 0.7, "turbo": 0.3}}}})
            .to_string(),
            "bad.jsonl:2: recorded.route: probabilities: \"turbo\" is not one of",
        ),
    ];
    for (line, message) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.jsonl"), format!("{good}\n{line}\n")).unwrap();
        let run = jev(&["calibrate", "--fixtures", dir.path().to_str().unwrap()])
            .expect(exit::INPUT_ERROR);
        assert!(
            run.stderr.contains(message),
            "want {message:?} in {}",
            run.stderr
        );
        assert_eq!(run.stdout, "");
    }
}

#[test]
fn bad_grid_arguments_exit_2_before_anything_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    judge_fixtures(&fx, 2);
    let log = dir.path().join("judge.log");
    let cmd = judge_cmd(&log);
    let cache = dir.path().join("cache.jsonl");
    let cases = [
        (
            vec!["--grid", "restriction=0.1:0.9:0"],
            "step must be positive",
        ),
        (
            vec!["--grid", "colour=0.1,0.2"],
            "--grid colour: no family being calibrated has such a param",
        ),
        (
            vec![
                "--grid",
                "restriction=0.05:0.95:0.00001",
                "--grid",
                "taskMatch=0.05:0.95:0.00001",
            ],
            "over the limit of 100000000 (raise it with --max-grid)",
        ),
        (
            vec!["--grid", "restriction=0.1,0.9,1.5"],
            "--grid restriction: 1.5 is outside the param's declared range [0.05, 0.95]",
        ),
        (
            vec!["--grid-out", "/no/such/dir/grid.csv"],
            "--grid-out /no/such/dir/grid.csv: /no/such/dir is not a directory",
        ),
        (
            vec!["--fail-under", "2"],
            "--fail-under 2: expected a rate in [0, 1]",
        ),
    ];
    for (extra, message) in cases {
        let mut args = vec![
            "calibrate",
            "--fixtures",
            fx.to_str().unwrap(),
            "--backend",
            "exec",
            "--exec",
            &cmd,
            "--cache",
            cache.to_str().unwrap(),
        ];
        args.extend(extra);
        let run = jev(&args).expect(exit::INPUT_ERROR);
        assert!(
            run.stderr.contains(message),
            "want {message:?} in {}",
            run.stderr
        );
        assert!(!log.exists(), "the judge must not be called");
        assert!(!cache.exists());
    }
}

#[test]
fn an_unwritable_grid_out_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("grid.csv");
    std::fs::create_dir(&target).unwrap(); // a directory where the file should go
    let run = jev(&[
        "calibrate",
        "--family",
        "tool-call-assessment@v1",
        "--grid-out",
        target.to_str().unwrap(),
    ])
    .expect(exit::INPUT_ERROR);
    assert!(run.stderr.contains("--grid-out"), "{}", run.stderr);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers,
        [std::ffi::OsString::from("grid.csv")],
        "no temporary file left behind"
    );
    assert!(target.is_dir());
}

#[test]
fn exact_mode_and_gates() {
    let run = jev(&[
        "calibrate",
        "--family",
        "tool-call-assessment@v1",
        "--exact",
        "--format",
        "json",
    ])
    .expect(exit::OK);
    let report: CalReport = serde_json::from_str(&run.stdout).unwrap();
    let f = &report.families[0];
    assert!(f.grid.exact);
    let restriction = &f.grid.params[0].values;
    assert!(
        restriction.contains(&0.86) && restriction.contains(&0.5),
        "measured values are breakpoints: {restriction:?}"
    );
    // The exact grid can only agree at least as well as the 0.05 grid.
    let coarse: CalReport = serde_json::from_str(
        &jev(&[
            "calibrate",
            "--family",
            "tool-call-assessment@v1",
            "--format",
            "json",
        ])
        .expect(exit::OK)
        .stdout,
    )
    .unwrap();
    assert!(f.best.agree >= coarse.families[0].best.agree);
    // Safe objective: the recommendation has no under-escalation.
    let safe: CalReport = serde_json::from_str(
        &jev(&[
            "calibrate",
            "--family",
            "tool-call-assessment@v1",
            "--objective",
            "safe",
            "--format",
            "json",
        ])
        .expect(exit::OK)
        .stdout,
    )
    .unwrap();
    assert_eq!(safe.families[0].objective, "safe (no under-escalation)");
    // --fail-under trips at the defaults' agreement.
    jev(&[
        "calibrate",
        "--family",
        "tool-call-assessment@v1",
        "--fail-under",
        "0.9",
    ])
    .expect(exit::OK);
    let run = jev(&[
        "calibrate",
        "--family",
        "tool-call-assessment@v1",
        "--fail-under",
        "0.95",
    ])
    .run();
    assert_eq!(run.code, exit::FOUND);
    assert!(
        run.stderr.contains("below 0.95 in tool-call-assessment@v1"),
        "{}",
        run.stderr
    );
}

#[test]
fn every_question_set_file_is_compiled_in() {
    let mut on_disk: Vec<String> = std::fs::read_dir(Path::new(ROOT).join("questions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut bundled: Vec<String> = jev::questions::BUNDLED
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    bundled.sort();
    assert_eq!(on_disk, bundled);
    for (name, text) in jev::questions::BUNDLED {
        let disk = std::fs::read_to_string(Path::new(ROOT).join("questions").join(name)).unwrap();
        assert_eq!(&disk, text, "{name}");
    }
}

#[test]
fn fast_and_brute_engines_give_identical_reports() {
    let strip = |text: &str| {
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        for f in v["families"].as_array_mut().unwrap() {
            f["grid"]["sweep_ms"] = 0.into();
            f["grid"]["sweep_us"] = 0.into();
        }
        v
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Lcg(77);
    let lines: String = (0..30)
        .map(|i| {
            assessment_fixture(
                &format!("e{i}"),
                rng.probability(),
                rng.probability(),
                rng.probability(),
                ["allow", "ask", "deny"][rng.below(3) as usize],
            ) + "\n"
        })
        .collect();
    std::fs::write(dir.path().join("e.jsonl"), lines).unwrap();
    for extra in [&[][..], &["--exact"][..]] {
        let run = |engine: &str| {
            let mut args = vec![
                "calibrate",
                "--fixtures",
                dir.path().to_str().unwrap(),
                "--format",
                "json",
                "--engine",
                engine,
            ];
            args.extend(extra);
            strip(&jev(&args).expect(exit::OK).stdout)
        };
        assert_eq!(run("fast"), run("brute"), "{extra:?}");
    }
    let fast = strip(
        &jev(&["calibrate", "--format", "json"])
            .expect(exit::OK)
            .stdout,
    );
    let brute = strip(
        &jev(&["calibrate", "--format", "json", "--engine", "brute"])
            .expect(exit::OK)
            .stdout,
    );
    assert_eq!(fast, brute);
}

#[test]
fn receipts_stream_from_json_lines_bundles_in_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut names: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("receipts/chapter12"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("SEAL.json"))
        .collect();
    names.sort();
    names.reverse(); // not the order a directory listing would give
    let mut lines = Vec::new();
    for p in &names {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        lines.push(v.to_string());
    }
    let bundle = dir.path().join("bundle.jsonl");
    std::fs::write(&bundle, lines.join("\n") + "\n").unwrap();
    let report = verify_json(&[bundle.to_str().unwrap()], exit::OK);
    let ids: Vec<String> = report
        .receipts
        .iter()
        .map(|r| r.id.clone().unwrap())
        .collect();
    let want: Vec<String> = names
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(ids, want, "results come back in input order");
    assert_eq!(report.receipts[2].path, format!("{}:3", bundle.display()));
    let replayed = replay_json(
        "reliability@policy-v1",
        "reliability@policy-v2",
        bundle.to_str().unwrap(),
    );
    let ids: Vec<String> = replayed
        .rows
        .iter()
        .map(|r| r.id.clone().unwrap())
        .collect();
    assert_eq!(ids, want);
    assert_eq!(replayed.summary.stricter, 1);
    // A changed byte on line 3 fails that line only.
    lines[2] = lines[2].replace("\"PASS\"", "\"PASX\"");
    std::fs::write(&bundle, lines.join("\n") + "\n").unwrap();
    let report = verify_json(&[bundle.to_str().unwrap()], exit::FOUND);
    assert_eq!(report.summary.failed, 1);
    assert!(!report.receipts[2].ok && report.receipts[2].errors[0].starts_with("digest mismatch"));
}

fn signed_copy(dir: &Path, hmac: bool) -> (PathBuf, PathBuf, PathBuf) {
    let receipts = dir.join("receipts");
    copy_dir(&Path::new(ROOT).join("receipts/chapter12"), &receipts);
    let prefix = dir.join("ci-key");
    let mut args = vec!["keygen", "--out", prefix.to_str().unwrap()];
    if hmac {
        args.push("--hmac");
    }
    let run = jev(&args).expect(exit::OK);
    let secret = prefix.with_extension("key");
    let trust = if hmac {
        secret.clone()
    } else {
        prefix.with_extension("pub")
    };
    let secret_text = std::fs::read_to_string(&secret).unwrap();
    let hex: String = secret_text
        .split('"')
        .find(|s| s.len() == 64)
        .unwrap()
        .to_owned();
    assert!(
        !run.stdout.contains(&hex),
        "keygen never prints key material"
    );
    let run = jev(&[
        "seal",
        receipts.to_str().unwrap(),
        "--sign-key",
        secret.to_str().unwrap(),
    ])
    .expect(exit::OK);
    assert!(
        run.stdout.contains("seal 2") && run.stdout.contains("signed"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains(&hex));
    (receipts, secret, trust)
}

#[test]
fn signed_seals_authenticate_with_the_trusted_key() {
    for hmac in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (receipts, _secret, trust) = signed_copy(dir.path(), hmac);
        let r = receipts.to_str().unwrap();
        let t = trust.to_str().unwrap();
        let report = verify_json(&["--trust-key", t, "--require-authenticated", r], exit::OK);
        assert_eq!(report.authenticity, "AUTHENTICATED", "hmac={hmac}");
        // Without the key: not a failure, but not authenticated either.
        let report = verify_json(&[r], exit::OK);
        assert_eq!(report.authenticity, "UNAUTHENTICATED");
        let run = jev(&["verify", "--require-authenticated", r]).expect(exit::FOUND);
        assert!(run.stderr.contains("UNAUTHENTICATED"), "{}", run.stderr);
        // A tampered signature fails.
        let seal_path = receipts.join("SEAL.json");
        let text = std::fs::read_to_string(&seal_path).unwrap();
        let mut seal: serde_json::Value = serde_json::from_str(&text).unwrap();
        let value = seal["signature"]["value"].as_str().unwrap().to_owned();
        let flipped = format!(
            "{}{}",
            if value.starts_with('0') { "1" } else { "0" },
            &value[1..]
        );
        seal["signature"]["value"] = flipped.into();
        std::fs::write(&seal_path, seal.to_string()).unwrap();
        let report = verify_json(&["--trust-key", t, r], exit::FOUND);
        assert!(
            report.seal.errors.iter().any(|e| e.contains("signature")),
            "{:?}",
            report.seal.errors
        );
        assert_eq!(report.authenticity, "UNAUTHENTICATED");
    }
}

#[test]
fn a_directory_rewritten_and_resealed_without_the_key_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (receipts, _secret, trust) = signed_copy(dir.path(), false);
    let r = receipts.to_str().unwrap();
    let t = trust.to_str().unwrap();
    // The forger rewrites a receipt consistently (new timestamp, recomputed digest): the
    // receipt alone verifies...
    let file = receipts.join("clean.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    doc["created_at"] = "2026-06-01T00:00:00Z".into();
    doc.as_object_mut().unwrap().remove("digest");
    let digest = jev(&["digest"])
        .stdin(doc.to_string())
        .expect(exit::OK)
        .stdout;
    doc["digest"] = digest.trim().into();
    std::fs::write(&file, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    // ...and re-seals: unsigned, signed with their own key, or with the history deleted.
    let snapshot = dir.path().join("snapshot");
    copy_dir(&receipts, &snapshot);
    jev(&["seal", r]).expect(exit::OK);
    let report = verify_json(&["--trust-key", t, r], exit::FOUND);
    assert!(
        report
            .seal
            .errors
            .iter()
            .any(|e| e.contains("unsigned but earlier seals were signed")),
        "{:?}",
        report.seal.errors
    );

    std::fs::remove_dir_all(&receipts).unwrap();
    copy_dir(&snapshot, &receipts);
    let forger = dir.path().join("forger");
    jev(&["keygen", "--out", forger.to_str().unwrap()]).expect(exit::OK);
    jev(&[
        "seal",
        r,
        "--sign-key",
        forger.with_extension("key").to_str().unwrap(),
    ])
    .expect(exit::OK);
    let report = verify_json(&["--trust-key", t, r], exit::FOUND);
    assert!(
        report
            .seal
            .errors
            .iter()
            .any(|e| e.contains("not by the trusted key")),
        "{:?}",
        report.seal.errors
    );

    std::fs::remove_dir_all(&receipts).unwrap();
    copy_dir(&snapshot, &receipts);
    std::fs::remove_file(receipts.join("SEAL.history.jsonl")).unwrap();
    std::fs::remove_file(receipts.join("SEAL.json")).unwrap();
    jev(&["seal", r]).expect(exit::OK);
    let report = verify_json(&["--trust-key", t, r], exit::OK);
    assert_eq!(
        report.authenticity, "UNAUTHENTICATED",
        "a fresh unsigned seal is never authenticated"
    );
    jev(&["verify", "--trust-key", t, "--require-authenticated", r]).expect(exit::FOUND);
}

#[test]
fn keys_are_checked_and_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("k");
    jev(&["keygen", "--out", prefix.to_str().unwrap()]).expect(exit::OK);
    let run = jev(&["keygen", "--out", prefix.to_str().unwrap()]).expect(exit::INPUT_ERROR);
    assert!(run.stderr.contains("already exists"), "{}", run.stderr);
    let bad = dir.path().join("bad.key");
    std::fs::write(
        &bad,
        r#"{"jev_key": 1, "algorithm": "rsa", "secret": "00"}"#,
    )
    .unwrap();
    let run = jev(&[
        "verify",
        "--trust-key",
        bad.to_str().unwrap(),
        "receipts/chapter12",
    ])
    .expect(exit::INPUT_ERROR);
    assert!(run.stderr.contains("bad.key: algorithm"), "{}", run.stderr);
    let run = jev(&[
        "seal",
        dir.path().to_str().unwrap(),
        "--sign-key",
        prefix.with_extension("pub").to_str().unwrap(),
    ])
    .expect(exit::INPUT_ERROR);
    assert!(run.stderr.contains("public key"), "{}", run.stderr);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(prefix.with_extension("key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

/// The catalogue of bad inputs: for every file jev reads and for its arguments, hostile or
/// broken input gives the documented exit code, a message naming the file and the place, no
/// panic, a bounded message, and no partial output. Add a row to extend it.
mod catalogue {
    use super::*;

    /// What one entry writes and runs. `{DIR}` in args is the entry's temporary directory.
    struct Case {
        name: &'static str,
        file: &'static str,
        content: Vec<u8>,
        args: Vec<&'static str>,
        code: u8,
        /// Substrings stderr must contain (besides the file name, when `names_file`).
        stderr: Vec<&'static str>,
        names_file: bool,
    }

    fn case(
        name: &'static str,
        file: &'static str,
        content: impl Into<Vec<u8>>,
        args: &[&'static str],
        code: u8,
        stderr: &[&'static str],
    ) -> Case {
        Case {
            name,
            file,
            content: content.into(),
            args: args.to_vec(),
            code,
            stderr: stderr.to_vec(),
            names_file: true,
        }
    }

    const RECORD: &str = r#"{"record": {"containment": "PASS", "relation_fidelity": "PASS", "sensitivity": "PASS", "epistemic_adequacy": "ANSWERABLE", "provenance": "VERIFIED"}}"#;

    fn deep(n: usize) -> String {
        "[".repeat(n) + &"]".repeat(n)
    }

    fn huge_string() -> String {
        format!(
            r#"{{"record": {{"containment": "{}", "relation_fidelity": "PASS", "sensitivity": "PASS", "epistemic_adequacy": "ANSWERABLE", "provenance": "VERIFIED"}}}}"#,
            "A".repeat(60_000_000)
        )
    }

    fn cases() -> Vec<Case> {
        let decide = ["decide", "--policy", "reliability@policy-v2", "{FILE}"];
        let lint = ["policy", "lint", "{FILE}"];
        let fixtures = ["calibrate", "--fixtures", "{FILE}"];
        let verify = ["verify", "{FILE}"];
        let digest = ["digest", "{FILE}"];
        let mut v = vec![
            // Records.
            case(
                "record: malformed JSON",
                "r.jsonl",
                "{\"record\": [1,}",
                &decide,
                exit::INPUT_ERROR,
                &[":1:"],
            ),
            case(
                "record: truncated",
                "r.jsonl",
                &RECORD[..40],
                &decide,
                exit::INPUT_ERROR,
                &[":1:", "EOF"],
            ),
            case(
                "record: duplicate key",
                "r.jsonl",
                RECORD.replace(
                    "\"sensitivity\": \"PASS\"",
                    "\"sensitivity\": \"PASS\", \"sensitivity\": \"FAIL\"",
                ),
                &decide,
                exit::INPUT_ERROR,
                &[":1:", "record.sensitivity", "duplicate key"],
            ),
            case(
                "record: 200,000 levels of nesting",
                "r.jsonl",
                deep(200_000),
                &decide,
                exit::INPUT_ERROR,
                &[":1:", "recursion limit"],
            ),
            case(
                "record: a 60 MB string",
                "r.jsonl",
                huge_string(),
                &decide,
                exit::INPUT_ERROR,
                &[
                    ":1:",
                    "record.containment",
                    "a string of 60000000 characters is not one of",
                ],
            ),
            case(
                "record: non-UTF-8 bytes",
                "r.jsonl",
                b"{\"record\": \"\xff\xfe\"}".to_vec(),
                &decide,
                exit::INPUT_ERROR,
                &["not UTF-8"],
            ),
            case(
                "record: lone surrogate",
                "r.jsonl",
                RECORD.replace("\"PASS\"", "\"\\ud800\""),
                &decide,
                exit::INPUT_ERROR,
                &[":1:", "record.containment"],
            ),
            case(
                "record: unsafe integer",
                "r.jsonl",
                RECORD.replace("}}", "}, \"history\": {\"step_index\": 9007199254740993}}"),
                &decide,
                exit::INPUT_ERROR,
                &[":1:", "history.step_index", "2^53"],
            ),
            case(
                "record: NaN",
                "r.jsonl",
                RECORD.replace("}}", "}, \"history\": {\"step_index\": NaN}}"),
                &decide,
                exit::INPUT_ERROR,
                &[":1:", "history.step_index"],
            ),
            case(
                "record: 1e400",
                "r.jsonl",
                RECORD.replace("}}", "}, \"history\": {\"step_index\": 1e400}}"),
                &decide,
                exit::INPUT_ERROR,
                &[":1:", "history.step_index", "out of range"],
            ),
            case(
                "record: wrong type",
                "r.jsonl",
                RECORD.replace("\"PASS\"", "true"),
                &decide,
                exit::INPUT_ERROR,
                &[":1:", "record.containment", "expected one of"],
            ),
            case(
                "record: unknown enum value",
                "r.jsonl",
                RECORD.replace("\"VERIFIED\"", "\"TRUSTED\""),
                &decide,
                exit::INPUT_ERROR,
                &[":1:", "record.provenance", "\"TRUSTED\" is not one of"],
            ),
            case(
                "record: unknown top-level key",
                "r.jsonl",
                RECORD.replace("{\"record\"", "{\"extra\": {}, \"record\""),
                &decide,
                exit::INPUT_ERROR,
                &[":1:", "extra: unknown top-level section"],
            ),
            // Policies.
            case(
                "policy: malformed JSON",
                "p.json",
                "{\"jev_policy\": 1,",
                &lint,
                exit::INPUT_ERROR,
                &["line 1"],
            ),
            case(
                "policy: duplicate key",
                "p.json",
                r#"{"jev_policy": 1, "jev_policy": 1}"#,
                &lint,
                exit::INPUT_ERROR,
                &["jev_policy: duplicate key"],
            ),
            case(
                "policy: 200,000 levels of nesting",
                "p.json",
                format!("{{\"rules\": {}}}", deep(200_000)),
                &lint,
                exit::INPUT_ERROR,
                &["recursion limit"],
            ),
            case(
                "policy: a 60 MB string",
                "p.json",
                format!(
                    "{{\"jev_policy\": 1, \"name\": \"{}\"}}",
                    "n".repeat(60_000_000)
                ),
                &lint,
                exit::INPUT_ERROR,
                &["missing field"],
            ),
            case(
                "policy: non-UTF-8",
                "p.json",
                b"{\"name\": \"\xc3\x28\"}".to_vec(),
                &lint,
                exit::INPUT_ERROR,
                &["UTF-8"],
            ),
            case(
                "policy: unknown key",
                "p.json",
                r#"{"jev_policy": 1, "colour": "red"}"#,
                &lint,
                exit::INPUT_ERROR,
                &["colour"],
            ),
            case(
                "policy: wrong type",
                "p.json",
                r#"{"jev_policy": "one"}"#,
                &lint,
                exit::INPUT_ERROR,
                &["jev_policy", "invalid type"],
            ),
            // Fixtures, native and upstream.
            case(
                "fixture: malformed line",
                "f.jsonl",
                "{\"id\": \"a\",",
                &fixtures,
                exit::INPUT_ERROR,
                &[":1:"],
            ),
            case(
                "fixture: duplicate key",
                "f.jsonl",
                r#"{"id": "a", "id": "b", "policy": "model-routing@v1", "expected": "fast"}"#,
                &fixtures,
                exit::INPUT_ERROR,
                &[":1:", "duplicate key"],
            ),
            case(
                "fixture: unknown key",
                "f.jsonl",
                r#"{"id": "a", "policy": "model-routing@v1", "expected": "fast", "colour": 1}"#,
                &fixtures,
                exit::INPUT_ERROR,
                &[":1:", "colour"],
            ),
            case(
                "fixture: unsafe integer",
                "f.jsonl",
                r#"{"id": "a", "policy": "model-routing@v1", "state": {"n": 9007199254740993}, "expected": "fast"}"#,
                &fixtures,
                exit::INPUT_ERROR,
                &[":1:", "state.n", "2^53"],
            ),
            case(
                "fixture: unknown policy",
                "f.jsonl",
                r#"{"id": "a", "policy": "nope@v1", "state": {}, "expected": "x"}"#,
                &fixtures,
                exit::INPUT_ERROR,
                &[":1:", "no policy nope@v1"],
            ),
            case(
                "fixture: upstream unknown kind",
                "f.jsonl",
                r#"{"id": "a", "kind": "poem", "expect": {"status": "x"}}"#,
                &fixtures,
                exit::INPUT_ERROR,
                &[":1:", "kind"],
            ),
            case(
                "fixture: upstream choice outside the labels",
                "f.jsonl",
                r#"{"id": "s", "kind": "skill", "task": "t", "candidates": [{"name": "pdf", "description": "d"}], "answers": {"skill": {"choice": "xlsx"}}, "expect": {"status": "none"}}"#,
                &fixtures,
                exit::INPUT_ERROR,
                &[":1:", "\"xlsx\" is not one of"],
            ),
            case(
                "fixture: non-UTF-8",
                "f.jsonl",
                b"\xff".to_vec(),
                &fixtures,
                exit::INPUT_ERROR,
                &["not UTF-8"],
            ),
            // Receipts: a bad receipt is a verification failure (exit 1), named.
            case(
                "receipt: malformed",
                "r.json",
                "{\"jev_receipt\": 1",
                &verify,
                exit::FOUND,
                &[],
            ),
            case(
                "receipt: deep nesting",
                "r.json",
                deep(200_000),
                &verify,
                exit::FOUND,
                &[],
            ),
            case(
                "receipt: non-UTF-8",
                "r.json",
                b"\xfe\xff".to_vec(),
                &verify,
                exit::FOUND,
                &[],
            ),
            case(
                "receipt: a 60 MB string",
                "r.json",
                format!(
                    "{{\"jev_receipt\": 1, \"id\": \"{}\"}}",
                    "i".repeat(60_000_000)
                ),
                &verify,
                exit::FOUND,
                &[],
            ),
            // Any JSON document for digest.
            case(
                "digest: lone surrogate",
                "d.json",
                r#"{"s": "\udc00"}"#,
                &digest,
                exit::INPUT_ERROR,
                &["s:"],
            ),
            case(
                "digest: NaN",
                "d.json",
                "[NaN]",
                &digest,
                exit::INPUT_ERROR,
                &["line 1"],
            ),
        ];
        for c in v.iter_mut() {
            if c.args.contains(&"verify") {
                // verify names failures on stdout; stderr only summarises.
                c.names_file = false;
            }
        }
        v
    }

    #[test]
    fn every_bad_input_gets_its_exit_code_and_a_named_bounded_message() {
        for c in cases() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(c.file);
            std::fs::write(&path, &c.content).unwrap();
            let p = path.to_str().unwrap().to_owned();
            let args: Vec<String> = c.args.iter().map(|a| a.replace("{FILE}", &p)).collect();
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let run = jev(&refs).run();
            assert_eq!(
                run.code,
                c.code,
                "{}: stderr {}",
                c.name,
                &run.stderr[..run.stderr.len().min(500)]
            );
            assert!(
                !run.stderr.contains("panicked"),
                "{}: {}",
                c.name,
                run.stderr
            );
            assert!(
                run.stderr.len() < 10_000,
                "{}: stderr is {} bytes",
                c.name,
                run.stderr.len()
            );
            if c.names_file {
                assert!(
                    run.stderr.contains(c.file),
                    "{}: the message names the file: {}",
                    c.name,
                    run.stderr
                );
            } else {
                assert!(
                    run.stdout.contains(c.file),
                    "{}: the report names the file: {}",
                    c.name,
                    &run.stdout[..run.stdout.len().min(500)]
                );
            }
            for needle in &c.stderr {
                assert!(
                    run.stderr.contains(needle),
                    "{}: want {needle:?} in {}",
                    c.name,
                    &run.stderr[..run.stderr.len().min(2000)]
                );
            }
        }
    }

    #[test]
    fn paths_that_are_missing_empty_looping_or_not_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let missing = format!("{d}/missing.jsonl");
        for args in [
            vec![
                "decide",
                "--policy",
                "reliability@policy-v2",
                missing.as_str(),
            ],
            vec!["calibrate", "--fixtures", missing.as_str()],
            vec!["verify", missing.as_str()],
            vec![
                "replay",
                "--diff",
                "--from",
                "recorded",
                "--to",
                "reliability@policy-v2",
                missing.as_str(),
            ],
            vec!["policy", "lint", missing.as_str()],
            vec!["seal", missing.as_str()],
            vec!["decide", "--policy", "reliability@policy-v2", d], // a directory, not a file
        ] {
            let run = jev(&args).expect(exit::INPUT_ERROR);
            assert!(run.stderr.contains(d), "{args:?}: {}", run.stderr);
        }
        // Empty directories: no fixtures is a usage error, no receipts a verification failure.
        let run = jev(&["calibrate", "--fixtures", d]).expect(exit::INPUT_ERROR);
        assert!(run.stderr.contains("no fixtures found"), "{}", run.stderr);
        jev(&["verify", d]).expect(exit::FOUND);
        // A symlink loop among fixtures stops with a message, not a hang or a stack overflow.
        #[cfg(unix)]
        {
            let fx = dir.path().join("fx");
            std::fs::create_dir(&fx).unwrap();
            std::os::unix::fs::symlink(&fx, fx.join("loop")).unwrap();
            let run =
                jev(&["calibrate", "--fixtures", fx.to_str().unwrap()]).expect(exit::INPUT_ERROR);
            assert!(run.stderr.contains("symlink loop"), "{}", run.stderr);
            // A sealed directory never follows links.
            let sealed = dir.path().join("sealed");
            copy_dir(&Path::new(ROOT).join("receipts/chapter12"), &sealed);
            std::os::unix::fs::symlink(&sealed, sealed.join("loop")).unwrap();
            let run = jev(&["seal", sealed.to_str().unwrap()]).expect(exit::INPUT_ERROR);
            assert!(run.stderr.contains("symbolic link"), "{}", run.stderr);
        }
    }

    #[test]
    fn broken_caches_seals_and_arguments() {
        let dir = tempfile::tempdir().unwrap();
        // A cache path that is a directory: a clear error, nothing measured.
        let fx = dir.path().join("fx");
        judge_fixtures(&fx, 1);
        let log = dir.path().join("judge.log");
        let cmd = judge_cmd(&log);
        let run = jev(&[
            "measure",
            "--fixtures",
            fx.to_str().unwrap(),
            "--backend",
            "exec",
            "--exec",
            &cmd,
            "--cache",
            dir.path().to_str().unwrap(),
        ])
        .expect(exit::INPUT_ERROR);
        assert!(
            run.stderr.contains(dir.path().to_str().unwrap()),
            "{}",
            run.stderr
        );
        // Garbage lines in a cache are skipped with a warning naming the line.
        let cache = dir.path().join("cache.jsonl");
        std::fs::write(&cache, "garbage\n{\"key\": 1}\n").unwrap();
        let run = jev(&[
            "measure",
            "--fixtures",
            fx.to_str().unwrap(),
            "--backend",
            "exec",
            "--exec",
            &cmd,
            "--cache",
            cache.to_str().unwrap(),
        ])
        .run();
        assert_eq!(run.code, exit::OK, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("cache.jsonl:1: ignoring an unreadable line"),
            "{}",
            run.stderr
        );
        // Malformed seals and seal histories fail verification, named.
        for (file, text) in [
            ("SEAL.json", "{\"jev_seal\": 1,"),
            ("SEAL.history.jsonl", "not json\n"),
        ] {
            let sealed = dir.path().join(format!("sealed-{file}"));
            copy_dir(&Path::new(ROOT).join("receipts/chapter12"), &sealed);
            std::fs::write(sealed.join(file), text).unwrap();
            let report = verify_json(&[sealed.to_str().unwrap()], exit::FOUND);
            assert!(
                report.seal.errors.iter().any(|e| e.contains(file)),
                "{file}: {:?}",
                report.seal.errors
            );
        }
        // Arguments.
        for args in [
            vec!["measure", "--jobs", "0"],
            vec!["calibrate", "--max-grid", "-1"],
            vec!["calibrate", "--grid", "restriction"],
            vec!["decide"],
            vec![
                "replay",
                "--from",
                "recorded",
                "--to",
                "reliability@policy-v2",
                "receipts/chapter12",
            ],
            vec!["verify"],
            vec!["--no-such-flag"],
        ] {
            let run = jev(&args).expect(exit::INPUT_ERROR);
            assert!(!run.stderr.is_empty(), "{args:?}");
        }
    }

    #[test]
    fn a_bad_record_midway_leaves_whole_receipts_and_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("receipts");
        let good = |id: &str| RECORD.replacen('{', &format!("{{\"id\": \"{id}\", "), 1);
        let input = format!("{}\n{}\n{{broken\n{}\n", good("a"), good("b"), good("c"));
        jev(&[
            "decide",
            "--policy",
            "reliability@policy-v2",
            "--receipts",
            out.to_str().unwrap(),
        ])
        .stdin(input)
        .expect(exit::INPUT_ERROR);
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["a.json", "b.json"],
            "the receipts before the bad line, whole; no temporary files"
        );
        jev(&["verify", out.to_str().unwrap()]).expect(exit::OK);
    }
}

#[test]
fn secrets_never_reach_the_judge_and_oversized_arguments_are_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    std::fs::create_dir_all(&fx).unwrap();
    let secret_state = serde_json::json!({"task": "call the API", "tool": "http_get",
        "arguments": {"url": "https://api.example/v1", "headers": {"Authorization": "Bearer SECRET-1"},
                      "body": {"nested": [{"db_password": "SECRET-2", "note": "fine"}], "Api_Key": "SECRET-3"}},
        "restrictions": [], "session_cookie": "SECRET-4", "credentials": {"user": "u", "pass": "SECRET-5"}});
    let big = serde_json::json!({"task": "write", "tool": "write_file", "arguments": {"content": "x".repeat(20_000)}, "restrictions": []});
    let lines = [
        serde_json::json!({"id": "secrets", "policy": "tool-call-assessment@v1", "state": secret_state, "expected": "allow"}),
        serde_json::json!({"id": "oversized", "policy": "tool-call-assessment@v1", "state": big, "expected": "allow"}),
    ];
    std::fs::write(
        fx.join("f.jsonl"),
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    let log = dir.path().join("judge.log");
    let cmd = judge_cmd(&log);
    let cache = dir.path().join("cache.jsonl");
    let run = jev(&[
        "measure",
        "--fixtures",
        fx.to_str().unwrap(),
        "--backend",
        "exec",
        "--exec",
        &cmd,
        "--cache",
        cache.to_str().unwrap(),
    ])
    .expect(exit::FOUND);
    assert!(
        run.stdout
            .contains("FAIL oversized matches_task: INCOMPLETE_INPUT"),
        "{}",
        run.stdout
    );
    let seen = std::fs::read_to_string(&log).unwrap();
    for i in 1..=5 {
        assert!(
            !seen.contains(&format!("SECRET-{i}")),
            "SECRET-{i} reached the judge: {seen}"
        );
    }
    assert!(
        seen.contains("[redacted]") && seen.contains("\"note\": \"fine\""),
        "{seen}"
    );
    assert_eq!(
        judge_log(&log).len(),
        1,
        "the oversized state was never sent"
    );
    assert!(
        !std::fs::read_to_string(&cache).unwrap().contains("SECRET"),
        "nor cached"
    );
    // The policy turns an incomplete input into its failure outcome: ask, never allow.
    let rec = r#"{"answers": {"matches_task": "INCOMPLETE_INPUT", "missing_information": 0.1, "violates_restriction": 0.1}}"#;
    let run = jev(&["decide", "--policy", "tool-call-assessment@v1"])
        .stdin(rec)
        .expect(exit::OK);
    assert!(
        run.stdout.contains("\"action\":\"ask\"")
            && run.stdout.contains("assessment.measurement-failed"),
        "{}",
        run.stdout
    );
}

/// The System One HTTP backend, against the `jevcompat` reference mock (PyPI, 0.1.1) and
/// against small scripted servers for the transport faults the mock does not offer.
mod judge_api {
    use super::*;
    use std::io::{BufRead, BufReader, Read};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, OnceLock};
    use std::time::Duration;

    /// `target/venv/bin/jevcompat`, installed on first use. Python is required: without it
    /// these tests fail, they never pass silently.
    fn jevcompat() -> &'static Path {
        static BIN: OnceLock<PathBuf> = OnceLock::new();
        BIN.get_or_init(|| {
            let venv = Path::new(ROOT).join("target/venv");
            let bin = venv.join("bin/jevcompat");
            if !bin.exists() {
                let ok = Command::new("python3")
                    .args(["-m", "venv"])
                    .arg(&venv)
                    .status()
                    .expect("python3 is needed for the System One tests");
                assert!(ok.success(), "python3 -m venv failed");
                let ok = Command::new(venv.join("bin/pip"))
                    .args(["install", "--quiet", "jevcompat==0.1.1"])
                    .status()
                    .expect("pip");
                assert!(ok.success(), "pip install jevcompat==0.1.1 failed");
            }
            bin
        })
    }

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// A running `jevcompat mock`, stopped when dropped.
    struct Mock {
        child: std::process::Child,
        url: String,
    }

    impl Mock {
        fn start(faults: &[&str]) -> Mock {
            let port = free_port();
            let mut cmd = Command::new(jevcompat());
            cmd.args(["mock", "--host", "127.0.0.1", "--port", &port.to_string()]);
            for f in faults {
                cmd.args(["--fault", f]);
            }
            let child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start jevcompat mock");
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "jevcompat mock did not start"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            Mock {
                child,
                url: format!("http://127.0.0.1:{port}"),
            }
        }
    }

    impl Drop for Mock {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn measure(url: &str, fixtures: &Path, cache: &Path, extra: &[&str]) -> Run {
        let mut args = vec![
            "measure",
            "--backend",
            "jev",
            "--base-url",
            url,
            "--fixtures",
            fixtures.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
        ];
        args.extend(extra);
        jev(&args).run()
    }

    #[test]
    fn the_bundled_fixtures_measure_against_the_mock_once() {
        let mock = Mock::start(&[]);
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache.jsonl");
        let fixtures = Path::new(ROOT).join("fixtures");
        let run = measure(&mock.url, &fixtures, &cache, &[]);
        // The one bundled fixture whose arguments exceed the bound is never sent (exit 1).
        assert_eq!(run.code, exit::FOUND, "{}", run.stderr);
        let fails: Vec<&str> = run.stdout.lines().filter(|l| l.contains("FAIL")).collect();
        assert!(
            fails
                .iter()
                .all(|l| l.contains("asm-en-oversized-args") && l.contains("INCOMPLETE_INPUT")),
            "{fails:?}"
        );
        for family in [
            "model-routing@v1",
            "proposal-review@v1",
            "skill-routing@v1",
            "tool-selection@v1",
        ] {
            let line = run.stdout.lines().find(|l| l.starts_with(family)).unwrap();
            assert!(line.contains(" 0 failed"), "{line}");
        }
        // Every answer is cached with the resolved model and the server's request id.
        let first: serde_json::Value = serde_json::from_str(
            std::fs::read_to_string(&cache)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(first["model_requested"], "jev-latest");
        assert_eq!(first["model"], "jevcompat-mock-0.1");
        assert_eq!(first["request_id"], "req_mock");
        let again = measure(&mock.url, &fixtures, &cache, &[]);
        assert!(
            again
                .stdout
                .lines()
                .filter(|l| !l.starts_with(' '))
                .all(|l| l.contains(" 0 measured in 0 backend calls")),
            "{}",
            again.stdout
        );
        // The measurements feed calibrate like recorded ones, without a call.
        let run = jev(&[
            "calibrate",
            "--backend",
            "jev",
            "--base-url",
            &mock.url,
            "--cache",
            cache.to_str().unwrap(),
            "--family",
            "model-routing@v1",
            "--format",
            "json",
        ])
        .expect(exit::OK);
        let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(report["families"][0]["measurement"]["calls"], 0);
        assert_eq!(report["families"][0]["measurement"]["synthetic"], false);
    }

    #[test]
    fn every_response_fault_is_a_named_failure_and_good_answers_are_kept() {
        let faults = [
            ("noul-range", "is outside [0, 1]"),
            ("choice-sum", "probabilities sum to 1.2"),
            ("xssi-200", "malformed body (not JSON)"),
            ("boolean-type", "expected type \"noul\", found \"boolean\""),
            ("extra-answer", "a question nobody asked"),
            ("first-question-only", "the judge gave no answer to"),
            ("nan", "malformed body (not JSON)"),
        ];
        let dir = tempfile::tempdir().unwrap();
        let fixtures = dir.path().join("fx");
        std::fs::create_dir_all(&fixtures).unwrap();
        // Assessment (three nouls) and model routing (one choice): every fault hits one of them.
        for f in ["tool-call-assessment", "model-routing"] {
            let src = if f == "model-routing" {
                "model-routing/model-routing.v1.jsonl"
            } else {
                "assessment/asm-en-grep.json"
            };
            std::fs::copy(
                Path::new(ROOT).join("fixtures").join(src),
                fixtures.join(Path::new(src).file_name().unwrap()),
            )
            .unwrap();
        }
        for (fault, message) in faults {
            let mock = Mock::start(&[fault]);
            let cache = dir.path().join(format!("{fault}.jsonl"));
            let run = measure(&mock.url, &fixtures, &cache, &[]);
            assert_eq!(run.code, exit::FOUND, "{fault}: {}", run.stdout);
            assert!(
                run.stdout.contains(message),
                "{fault}: want {message:?} in {}",
                run.stdout
            );
            // Whatever was answered correctly stays cached; nothing invalid is.
            let cached: Vec<serde_json::Value> = std::fs::read_to_string(&cache)
                .unwrap_or_default()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            for entry in &cached {
                let a = &entry["answer"];
                if a["type"] == "noul" {
                    let p = a["noul"].as_f64().unwrap();
                    assert!(
                        (0.0..=1.0).contains(&p),
                        "{fault}: cached an invalid answer {a}"
                    );
                }
            }
            if [
                "noul-range",
                "boolean-type",
                "first-question-only",
                "extra-answer",
            ]
            .contains(&fault)
            {
                assert!(!cached.is_empty(), "{fault}: the good answers are kept");
            }
        }
    }

    /// A scripted HTTP server: answers request N with `script(N)`; `None` drops the connection.
    fn scripted(
        script: impl Fn(usize) -> Option<(u16, Vec<(&'static str, String)>, Duration)>
        + Send
        + Sync
        + 'static,
    ) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&count);
        let script = Arc::new(script);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let n = seen.fetch_add(1, Ordering::SeqCst);
                let script = Arc::clone(&script);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream);
                    let mut len = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; len];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let Some((status, headers, delay)) = script(n) else {
                        return;
                    };
                    std::thread::sleep(delay);
                    let payload = if status == 200 {
                        let req: serde_json::Value = serde_json::from_slice(&body).unwrap();
                        let answers: serde_json::Map<String, serde_json::Value> = req["questions"]
                            .as_object()
                            .unwrap()
                            .keys()
                            .map(|k| (k.clone(), serde_json::json!({"type": "noul", "noul": 0.7})))
                            .collect();
                        serde_json::json!({"model": "scripted-1", "answers": answers, "usage": {"input_tokens": 1, "output_tokens": 1}}).to_string()
                    } else {
                        serde_json::json!({"detail": {"error_type": "scripted", "message": format!("scripted status {status}")}}).to_string()
                    };
                    let mut head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                        payload.len()
                    );
                    for (k, v) in headers {
                        head.push_str(&format!("{k}: {v}\r\n"));
                    }
                    head.push_str("\r\n");
                    let mut stream = reader.into_inner();
                    let _ = stream.write_all(head.as_bytes());
                    let _ = stream.write_all(payload.as_bytes());
                });
            }
        });
        (url, count)
    }

    fn one_fixture(dir: &Path) -> PathBuf {
        let fx = dir.join("fx");
        judge_fixtures(&fx, 1);
        fx
    }

    #[test]
    fn retries_honour_retry_after_and_recover_from_5xx() {
        for (first, header) in [
            (429u16, Some(("retry-after-ms", "50".to_string()))),
            (429, Some(("retry-after", "0".into()))),
            (503, None),
            (502, None),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let (url, count) = scripted(move |n| {
                let headers = header.clone().into_iter().collect();
                Some(if n == 0 {
                    (first, headers, Duration::ZERO)
                } else {
                    (200, vec![], Duration::ZERO)
                })
            });
            let run = measure(
                &url,
                &one_fixture(dir.path()),
                &dir.path().join("c.jsonl"),
                &["--retry-budget", "20"],
            );
            assert_eq!(run.code, exit::OK, "{first}: {}", run.stdout);
            assert!(
                run.stdout
                    .contains("3 measured in 1 backend call, 0 failed"),
                "{first}: {}",
                run.stdout
            );
            assert_eq!(
                count.load(Ordering::SeqCst),
                2,
                "{first}: one failure, one retry"
            );
        }
    }

    #[test]
    fn timeouts_and_dropped_connections_fail_within_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let (slow, _) = scripted(|_| Some((200, vec![], Duration::from_secs(5))));
        let started = std::time::Instant::now();
        let run = measure(
            &slow,
            &one_fixture(dir.path()),
            &dir.path().join("a.jsonl"),
            &["--timeout", "0.3", "--retry-budget", "1"],
        );
        assert_eq!(run.code, exit::FOUND, "{}", run.stdout);
        assert!(run.stdout.contains("retry budget"), "{}", run.stdout);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "bounded by the budget, not the slow server"
        );
        let (dropping, count) = scripted(|_| None);
        let run = measure(
            &dropping,
            &one_fixture(dir.path()),
            &dir.path().join("b.jsonl"),
            &["--retry-budget", "1"],
        );
        assert_eq!(run.code, exit::FOUND, "{}", run.stdout);
        assert!(run.stdout.contains("transport"), "{}", run.stdout);
        assert!(
            count.load(Ordering::SeqCst) >= 2,
            "connection errors are retried"
        );
        assert!(!dir.path().join("b.jsonl").exists(), "no failure is cached");
    }

    #[test]
    fn refused_credentials_stop_the_run_and_other_client_errors_report_the_detail() {
        let dir = tempfile::tempdir().unwrap();
        let (url, count) = scripted(|_| Some((401, vec![], Duration::ZERO)));
        let fx = dir.path().join("fx");
        judge_fixtures(&fx, 6);
        let run = Command::new(assert_cmd::cargo::cargo_bin!("jev"))
            .args([
                "measure",
                "--backend",
                "jev",
                "--base-url",
                &url,
                "--fixtures",
                fx.to_str().unwrap(),
                "--jobs",
                "1",
                "--cache",
                dir.path().join("c.jsonl").to_str().unwrap(),
            ])
            .env("TYPESAFE_API_KEY", "sk-test-NEVER-PRINTED")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(
            run.status.code(),
            Some(i32::from(exit::INPUT_ERROR)),
            "{stderr}"
        );
        assert!(
            stderr.contains("refused the credentials (HTTP 401"),
            "{stderr}"
        );
        assert!(
            !stderr.contains("NEVER-PRINTED")
                && !String::from_utf8_lossy(&run.stdout).contains("NEVER-PRINTED")
        );
        assert!(count.load(Ordering::SeqCst) < 6, "the run stops at once");
        let (url, _) = scripted(|_| Some((422, vec![], Duration::ZERO)));
        let run = measure(
            &url,
            &one_fixture(dir.path()),
            &dir.path().join("d.jsonl"),
            &[],
        );
        assert_eq!(run.code, exit::FOUND);
        assert!(
            run.stdout.contains("HTTP 422: scripted status 422"),
            "{}",
            run.stdout
        );
    }
}

#[test]
fn harness_bound_receipts_verify_and_fail_when_changed() {
    let report = verify_json(&["receipts/harness"], exit::OK);
    assert_eq!(report.summary.total, 3);
    assert!(
        report
            .receipts
            .iter()
            .any(|r| r.id.as_deref() == Some("sum-off-by-one/good"))
    );
    // The committed envelopes are what xtask/harness.json gives (digest over the canonical
    // {bindingVersion, receipt, binding}).
    let source: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(ROOT).join("xtask/harness.json")).unwrap(),
    )
    .unwrap();
    for e in source["envelopes"].as_array().unwrap() {
        let name = format!(
            "{}-{}.json",
            e["receipt"]["fixtureId"].as_str().unwrap(),
            e["receipt"]["arm"].as_str().unwrap()
        );
        let committed: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(Path::new(ROOT).join("receipts/harness").join(&name)).unwrap(),
        )
        .unwrap();
        let payload = serde_json::json!({"bindingVersion": 1, "receipt": e["receipt"], "binding": e["binding"]});
        let digest = jev(&["digest"])
            .stdin(payload.to_string())
            .expect(exit::OK)
            .stdout;
        assert_eq!(
            format!(
                "sha256:{}",
                committed["integrity"]["digest"].as_str().unwrap()
            ),
            digest.trim(),
            "{name}: run `cargo xtask receipts`"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let original =
        std::fs::read_to_string(Path::new(ROOT).join("receipts/harness/sum-off-by-one-good.json"))
            .unwrap();
    let write = |text: &str| {
        let p = dir.path().join("envelope.json");
        std::fs::write(&p, text).unwrap();
        verify_json(&[p.to_str().unwrap()], exit::FOUND)
            .receipts
            .remove(0)
            .errors
    };
    // A changed byte: the digest fails.
    let errors = write(&original.replacen("0.93", "0.39", 1));
    assert!(
        errors.iter().any(|e| e.starts_with("digest mismatch")),
        "{errors:?}"
    );
    // A forged verdict with a recomputed digest: re-derivation at the binding's threshold fails.
    let reseal = |mut v: serde_json::Value| {
        let payload = serde_json::json!({"bindingVersion": 1, "receipt": v["receipt"], "binding": v["binding"]});
        let d = jev(&["digest"])
            .stdin(payload.to_string())
            .expect(exit::OK)
            .stdout;
        v["integrity"]["digest"] = d.trim().trim_start_matches("sha256:").into();
        v.to_string()
    };
    let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
    v["binding"]["threshold"] = 0.95.into();
    let errors = write(&reseal(v));
    assert!(
        errors
            .iter()
            .any(|e| e.contains("re-derived \"proposal_only\" at threshold 0.95")),
        "{errors:?}"
    );
    let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
    v["binding"]["questionSetVersion"] = 2.into();
    let errors = write(&reseal(v));
    assert!(
        errors.iter().any(|e| e.contains("questionSetVersion")),
        "{errors:?}"
    );
}

#[test]
fn a_silent_exec_judge_times_out_and_nothing_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    judge_fixtures(&fx, 2);
    let log = dir.path().join("judge.log");
    let cache = dir.path().join("cache.jsonl");
    let started = std::time::Instant::now();
    let out = Command::new(assert_cmd::cargo::cargo_bin!("jev"))
        .args([
            "measure",
            "--fixtures",
            fx.to_str().unwrap(),
            "--backend",
            "exec",
            "--exec",
            &judge_cmd(&log),
            "--jobs",
            "2",
            "--timeout",
            "0.5",
            "--cache",
            cache.to_str().unwrap(),
        ])
        .env("JUDGE_SLEEP", "5")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(i32::from(exit::FOUND)), "{stdout}");
    assert!(
        stdout.contains("the judge gave no reply within 500ms; it was stopped"),
        "{stdout}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "bounded by --timeout, not by the judge"
    );
    assert!(!cache.exists());
}

#[test]
fn a_broken_question_set_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let q = dir.path().join("questions");
    std::fs::create_dir(&q).unwrap();
    std::fs::write(
        q.join("broken.json"),
        r#"{"jev_questions": 1, "id": "x", "id": "y"}"#,
    )
    .unwrap();
    let run = jev(&[
        "calibrate",
        "--family",
        "model-routing@v1",
        "--questions",
        q.to_str().unwrap(),
    ])
    .expect(exit::INPUT_ERROR);
    assert!(
        run.stderr.contains("broken.json") && run.stderr.contains("duplicate key"),
        "{}",
        run.stderr
    );
}
