//! Damaged copies of a fixture run, shared by the `check` and `report` CLI tests: both
//! commands must give the same exit code on each (254 for a damaged history, the verdict's
//! code when the damage is the forgiven torn tail or harmless).
//!
//! Use: `for case in super::history::damaged_runs() { let code = run(bin, &["check"],
//! &case); assert_eq!(code, case.expect_check) }`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One damaged run folder (test.json + history.jsonl) and what `check` must exit with.
pub struct Damaged {
    pub name: &'static str,
    /// Holds the run folder `run`: `report` writes its index next to the run, so that goes
    /// here too, never into the system's temporary folder.
    holder: tempfile::TempDir,
    /// `fle-chaos check`'s exit code: 254 for a refused history, else the verdict's (0).
    pub expect_check: i32,
}

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(case)
}

/// The status line `line` rewritten exactly as the controller writes one (the decoder's fast
/// template), so damage to it exercises the fast path, not only serde.
pub fn as_controller_writes(line: &str) -> String {
    let mut e: fle_chaos::history::Event = serde_json::from_str(line).unwrap();
    let s: fle_chaos::api::NodeStatus = serde_json::from_value(e.value.clone()).unwrap();
    e.value = serde_json::to_value(&s).unwrap();
    serde_json::to_string(&e).unwrap()
}

/// A copy of the valid-writes fixture with its history's text given by `damage`.
fn damaged(name: &'static str, expect_check: i32, damage: impl Fn(&str) -> Vec<u8>) -> Damaged {
    let holder = tempfile::tempdir().unwrap();
    let dir = holder.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    let src = fixture("valid-writes");
    std::fs::copy(src.join("test.json"), dir.join("test.json")).unwrap();
    let text = std::fs::read_to_string(src.join("history.jsonl")).unwrap();
    std::fs::write(dir.join("history.jsonl"), damage(&text)).unwrap();
    Damaged {
        name,
        holder,
        expect_check,
    }
}

impl Damaged {
    /// The damaged run folder.
    pub fn dir(&self) -> PathBuf {
        self.holder.path().join("run")
    }
}

/// Replaces, in the middle status line (in the controller's layout), `from` by `to`.
fn corrupt_middle(text: &str, from: &str, to: &str) -> Vec<u8> {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let k = (lines.len() / 2..lines.len())
        .find(|&i| lines[i].contains(r#""f":"status""#) && lines[i].contains(r#""type":"ok""#))
        .expect("a status read in the second half");
    let line = as_controller_writes(&lines[k]);
    let bad = line.replacen(from, to, 1);
    assert_ne!(bad, line, "{from} not in {line}");
    lines[k] = bad;
    (lines.join("\n") + "\n").into_bytes()
}

/// The last line's index and time.
fn last_order(t: &str) -> (u64, u64) {
    let last: serde_json::Value = serde_json::from_str(t.lines().last().unwrap()).unwrap();
    (
        last["index"].as_u64().unwrap(),
        last["time"].as_u64().unwrap(),
    )
}

/// Every kind of damage the tests know.
pub fn damaged_runs() -> Vec<Damaged> {
    vec![
        damaged("intact", 0, |t| t.as_bytes().to_vec()),
        // The four corruptions an old fast path judged valid.
        damaged("uptime 1-345", 254, |t| {
            corrupt_middle(t, r#""uptime_ms":"#, r#""uptime_ms":1-345,"x":"#)
        }),
        damaged("election_epoch +5", 254, |t| {
            corrupt_middle(t, r#""election_epoch":"#, r#""election_epoch":+5,"x":"#)
        }),
        damaged("bad escape", 254, |t| {
            corrupt_middle(t, r#""last_zxid_hex":"0x"#, r#""last_zxid_hex":"\x"#)
        }),
        damaged("exponent e+e", 254, |t| {
            corrupt_middle(
                t,
                r#""wall_clock_ms":"#,
                r#""wall_clock_ms":1796036e+e,"x":"#,
            )
        }),
        damaged("garbage middle line", 254, |t| {
            let mut lines: Vec<&str> = t.lines().collect();
            lines[3] = r#"{"index": 3, "garbage""#;
            (lines.join("\n") + "\n").into_bytes()
        }),
        damaged("not UTF-8 in the middle", 254, |t| {
            let mut b = t.as_bytes().to_vec();
            let k = b.len() / 2;
            b[k] = 0xff;
            b
        }),
        damaged("bad election summary", 254, |t| {
            corrupt_middle(
                t,
                r#""last_election":"#,
                r#""last_election":{"leader":"x"},"y":"#,
            )
        }),
        damaged("bad last line, terminated", 254, |t| {
            format!("{t}{{\"index\":999,\"time\":12\n").into_bytes()
        }),
        // Forgiven: an unterminated last line (the controller died writing it), also one cut
        // inside a UTF-8 sequence; blank lines; an f this version does not know.
        damaged("torn tail", 0, |t| {
            format!("{t}{{\"index\":999,\"time\":12").into_bytes()
        }),
        damaged("torn inside UTF-8", 0, |t| {
            let mut b = format!("{t}{{\"index\":999,\"process\":\"").into_bytes();
            b.push(0xc3);
            b
        }),
        damaged("blank lines", 0, |t| {
            t.replacen('\n', "\n\n  \n", 3).into_bytes()
        }),
        damaged("unknown f", 0, |t| {
            let (index, time) = last_order(t);
            format!(
                r#"{t}{{"index":{},"time":{time},"process":"nemesis","type":"info","f":"power-loss-v9","value":{{"nodes":["n1"]}}}}"#,
                index + 1
            )
            .into_bytes()
        }),
        // Out of recorded order: the last two lines swapped (an index going back).
        damaged("lines swapped", 254, |t| {
            let mut lines: Vec<&str> = t.lines().collect();
            let n = lines.len();
            lines.swap(n - 2, n - 1);
            (lines.join("\n") + "\n").into_bytes()
        }),
    ]
}

/// Runs `fle-chaos ARGS RUN_DIR` on a damaged run; its exit code and stderr.
pub fn run(args: &[&str], case: &Damaged) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fle-chaos"))
        .args(args)
        .arg(case.dir())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
