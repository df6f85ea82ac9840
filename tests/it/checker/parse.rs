//! The file path (history::read in parallel parts + the fast decoder) must digest a history
//! exactly as the sequential path does: same records, positions, elections and verdicts, whatever the number
//! of parts; a torn tail is skipped and a corrupt middle line is named, also when split.

use fle_chaos::checker::load::digest_file_in;
use fle_chaos::checker::{check_digest, CheckOptions};
use fle_chaos::history::test_info::TestInfo;
use std::path::{Path, PathBuf};

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The fixture folder named `case`.
fn fixture(case: &str) -> PathBuf {
    fixtures().into_iter().find(|d| d.ends_with(case)).unwrap()
}

/// valid-writes' test.json and history text, and a folder to write damaged copies in.
fn valid_writes() -> (TestInfo, String, tempfile::TempDir) {
    let dir = fixture("valid-writes");
    let info = TestInfo::read(&dir.join("test.json")).unwrap();
    let text = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    (info, text, tempfile::tempdir().unwrap())
}

/// Everything a check concludes from a file split into `parts`, as JSON, with evidence quoted
/// by line offset (equal offsets = the same events).
fn conclusions(dir: &Path, history: &Path, parts: usize) -> serde_json::Value {
    let info = TestInfo::read(&dir.join("test.json")).unwrap();
    let (d, offsets) = digest_file_in(history, &info.nodes, parts).unwrap();
    let results = check_digest(&d, &info, &CheckOptions::default(), |pos| {
        serde_json::json!(offsets[pos as usize])
    });
    serde_json::json!({
        "results": serde_json::to_value(&results).unwrap(),
        "events": d.events, "recs": d.records().count(), "elections": d.elections.len(),
        "reads": d.reads, "nodes": d.nodes, "offsets": offsets,
    })
}

#[test]
fn any_number_of_parts_gives_the_same_conclusions() {
    let dirs = fixtures();
    assert!(dirs.len() >= 20);
    for dir in dirs {
        let h = dir.join("history.jsonl");
        let whole = conclusions(&dir, &h, 1);
        for parts in [2, 3, 7] {
            assert_eq!(
                conclusions(&dir, &h, parts),
                whole,
                "{} in {parts} parts",
                dir.display()
            );
        }
    }
}

#[test]
fn a_node_missing_from_test_json_is_joined_by_name() {
    // n7 is not in test.json and first appears in the last part.
    let dir = fixture("valid-election");
    let tmp = tempfile::tempdir().unwrap();
    let mut text = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let n = text.lines().count();
    text.push_str(&format!(
        "{{\"index\":{n},\"time\":9000000000,\"process\":\"n7\",\"type\":\"ok\",\"f\":\"status\",\"node\":\"n7\",\"value\":{{\"sid\":7,\"state\":\"LOOKING\",\"leader\":null,\"peer_epoch\":0,\"accepted_epoch\":0,\"zab_phase\":\"election\",\"election_epoch\":1,\"last_zxid\":0,\"last_committed_zxid\":0,\"last_zxid_hex\":\"0x0\",\"wall_clock_ms\":1,\"uptime_ms\":1,\"last_election\":null}}}}\n"
    ));
    let h = tmp.path().join("history.jsonl");
    std::fs::write(&h, text).unwrap();
    let whole = conclusions(&dir, &h, 1);
    assert_eq!(whole["nodes"].as_array().unwrap().len(), 4);
    assert_eq!(conclusions(&dir, &h, 3), whole);
}

#[test]
fn torn_tail_and_corrupt_middle_whatever_the_parts() {
    let (info, text, tmp) = valid_writes();
    let lines: Vec<&str> = text.lines().collect();
    let h = tmp.path().join("history.jsonl");

    std::fs::write(&h, format!("{text}{{\"index\":99999,\"ti")).unwrap();
    for parts in [1, 3] {
        let (d, _) = digest_file_in(&h, &info.nodes, parts).unwrap();
        assert_eq!(
            d.events as usize,
            lines.len(),
            "torn tail skipped ({parts} parts)"
        );
    }

    // Corrupt the line in the middle of each part, one at a time.
    for bad in [lines.len() / 6, lines.len() / 2, lines.len() * 5 / 6] {
        let mut copy: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        copy[bad] = copy[bad].replace("\"time\"", "\"time\":,");
        std::fs::write(&h, copy.join("\n") + "\n").unwrap();
        for parts in [1, 3] {
            let err = digest_file_in(&h, &info.nodes, parts).unwrap_err();
            let msg = format!("{err:#}");
            assert!(
                msg.contains(&format!("line {},", bad + 1)),
                "{parts} parts: {msg}"
            );
        }
    }
}

/// Lines out of recorded order (an index not growing, a time going back) are named like any
/// damaged line, also where a part boundary falls between the two.
#[test]
fn lines_out_of_order_are_named_whatever_the_parts() {
    let (info, text, tmp) = valid_writes();
    let lines: Vec<&str> = text.lines().collect();
    let h = tmp.path().join("history.jsonl");
    for at in [1, lines.len() / 3, lines.len() / 2, lines.len() - 1] {
        // Swapped with the line before it: index (and maybe time) go back at line `at + 1`.
        let mut copy = lines.clone();
        copy.swap(at - 1, at);
        std::fs::write(&h, copy.join("\n") + "\n").unwrap();
        for parts in [1, 2, 3] {
            let msg = format!("{:#}", digest_file_in(&h, &info.nodes, parts).unwrap_err());
            assert!(
                msg.contains(&format!("line {},", at + 1)) && msg.contains("index"),
                "{parts} parts, swap at {at}: {msg}"
            );
        }
    }
}

/// Everything a digest holds, as text (records, elections, counts, node names).
fn digest_text(d: &fle_chaos::checker::model::Digest) -> String {
    format!(
        "nodes {:?}\nrecords {:#?}\nelections {:#?}\nreads {:?} with election {} events {}",
        d.nodes,
        d.records().collect::<Vec<_>>(),
        d.elections,
        d.reads,
        d.reads_with_election,
        d.events
    )
}

/// The valid-writes history with lines the fast paths must not take at face value: escapes,
/// unicode, other key orders and whitespace, unknown fields, odd write values and zxids,
/// unreachable reads with and without a node, blank and CRLF lines, a torn last line.
fn tricky_history() -> String {
    let dir = fixture("valid-writes");
    let text = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let status: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(r#""type":"ok","f":"status""#))
        .collect();
    let with_election = status
        .iter()
        .find(|l| l.contains(r#""last_election":{"#))
        .unwrap();
    // Keys sorted (serde_json's map), unknown fields with unicode and escapes, spaces.
    let mut v: serde_json::Value = serde_json::from_str(with_election).unwrap();
    v["value"]["note"] = serde_json::json!("héllo ☃ \u{1F600} \"quoted\" \\ back");
    v["extra"] = serde_json::json!({"y": [1, 2.5e3, true, null, "\u{7f}"]});
    let reordered = serde_json::to_string(&v).unwrap().replace(",\"", " , \"");
    let escaped = status[4]
        .replacen(r#""process":"n"#, r#""process":"\u006e"#, 1)
        .replacen(r#""node":"n"#, r#""node":"\u006e"#, 1);
    // The same summary with other whitespace: other raw text, the same election.
    let spaced = with_election.replace(r#""votes":["#, r#""votes" : [ "#);
    let unknown_node = status[5]
        .replace(r#""process":"n1""#, r#""process":"nø""#)
        .replace(r#""node":"n1""#, r#""node":"nø""#)
        .replace(r#""node":"n2""#, r#""node":"nø""#)
        .replace(r#""node":"n3""#, r#""node":"nø""#);
    let t = 2_000_000_000u64;
    let extra = [
        format!(
            r#"{{"index":900,"time":{t},"process":"7","type":"invoke","f":"write","value":{{"value":"w\"9\\é\/\u0041"}}}}"#
        ),
        format!(
            r#"{{"index":901,"time":{t},"process":"7","type":"ok","f":"write","value":{{"value":"w\"9\\é\/\u0041","zxid":4294967299}}}}"#
        ),
        format!(
            r#"{{"index":902,"time":{t},"process":"8","type":"ok","f":"write","value":{{"value":12,"zxid":5}}}}"#
        ),
        format!(
            r#"{{"index":903,"time":{t},"process":"8","type":"info","f":"write","value":{{"value":18446744073709551616}}}}"#
        ),
        format!(
            r#"{{"index":904,"time":{t},"process":"8","type":"fail","f":"write","value":{{"value":{{"k":[1,"a"]}},"why":"x"}}}}"#
        ),
        format!(
            r#"{{"index":905,"time":{t},"process":"8","type":"invoke","f":"write","node":"n2","value":null}}"#
        ),
        format!(
            r#"{{"index":906,"time":{t},"process":"ü","type":"invoke","f":"write","value":{{"zxid":7,"value":"ü"}}}}"#
        ),
        format!(
            r#"{{"index":907,"time":{t},"process":"n2","type":"info","f":"status","node":"n2","value":{{"error":"timed out"}}}}"#
        ),
        format!(
            r#"{{"index":908,"time":{t},"process":"n3","type":"fail","f":"status","value":{{"error":"refused"}}}}"#
        ),
        format!(
            r#"{{"time":{t},"index":909,"f":"status","type":"info","node":"n\u0033","process":"n3","value":null}}"#
        ),
        format!(
            r#"{{"index":910,"time":{t},"process":"n3","type":"info","f":"status","node":"n3"}}"#
        ),
    ];
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        out.push_str(l);
        out.push_str(if i == 3 { "\r\n" } else { "\n" });
        match i {
            5 => {
                out.push_str(&format!("{reordered}\n\n   \n{escaped}\n"));
                out.push_str(&extra[..6].join("\n"));
                out.push('\n');
            }
            20 => out.push_str(&format!("{spaced}\n\t\n{unknown_node}\n")),
            30 => {
                out.push_str(&extra[6..].join("\n"));
                out.push('\n');
            }
            _ => {}
        }
    }
    let mut out = in_recorded_order(&out);
    out.push_str(r#"{"index":999,"time":9,"process":"n1","type":"ok","f":"sta"#);
    out
}

/// `text` with each line's `"index"` renumbered in file order and its `"time"` raised to the
/// latest before it: the order a recorder writes (the reader refuses any other), every other
/// byte kept.
fn in_recorded_order(text: &str) -> String {
    let mut latest = 0u64;
    let mut index = 0u64;
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let mut line = line.to_string();
        if !line.trim().is_empty() {
            for key in ["\"index\":", "\"time\":"] {
                let at = line.find(key).unwrap() + key.len();
                let end = at + line[at..].find(|c: char| !c.is_ascii_digit()).unwrap();
                let n: u64 = line[at..end].parse().unwrap();
                let n = if key == "\"index\":" {
                    index += 1;
                    index
                } else {
                    latest = latest.max(n);
                    latest
                };
                line.replace_range(at..end, &n.to_string());
            }
        }
        out.push_str(&line);
    }
    out
}

#[test]
fn the_fast_parse_digests_tricky_lines_exactly_as_serde_does() {
    let dir = fixture("valid-writes");
    let info = TestInfo::read(&dir.join("test.json")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path().join("history.jsonl");
    std::fs::write(&h, tricky_history()).unwrap();

    // The straightforward way: every line through serde_json into an `Event`.
    let events = fle_chaos::history::store::read_history(&h).unwrap();
    let reference = fle_chaos::checker::model::digest_events(&events, &info.nodes).unwrap();
    let quote = |pos: u32| serde_json::to_value(&events[pos as usize]).unwrap();
    let opts = CheckOptions::default();
    let want = serde_json::to_value(check_digest(&reference, &info, &opts, quote)).unwrap();
    assert!(reference.nodes.iter().any(|n| n == "nø"));

    for parts in [1, 2, 3, 5, 9] {
        let (d, offsets) = digest_file_in(&h, &info.nodes, parts).unwrap();
        assert_eq!(digest_text(&d), digest_text(&reference), "{parts} parts");
        assert_eq!(offsets.len(), events.len());
        let got = serde_json::to_value(check_digest(&d, &info, &opts, quote)).unwrap();
        assert_eq!(got, want, "{parts} parts");
    }

    // A key given twice is no event for serde: nor for the fast path, wherever it is.
    let text = tricky_history();
    let first = text.lines().next().unwrap();
    let twice = first.replacen(r#""time":"#, r#""index":0,"time":"#, 1);
    std::fs::write(&h, text.replacen(first, &twice, 1)).unwrap();
    assert!(fle_chaos::history::store::read_history(&h).is_err());
    for parts in [1, 3] {
        assert!(digest_file_in(&h, &info.nodes, parts).is_err(), "{parts}");
    }
}

/// The report's fold rides along the same pass in the same parts: read in 2, 3 or 7 parts it
/// must come out as one sequential pass leaves it (lanes joined across a cut, an operation
/// invoked in one part and completed in the next, the schedule's invocations, line numbers).
#[test]
fn the_reports_fold_of_any_number_of_parts_is_the_whole_ones() {
    use fle_chaos::checker::RunFiles;
    use fle_chaos::report::scan::LineFold;
    use fle_chaos::store::RunDir;
    let dirs = fixtures();
    assert!(dirs.len() >= 20);
    let mut compared_ops = 0;
    for dir in dirs {
        let load = |parts| {
            let mut files = RunFiles::open(&RunDir::open(&dir).unwrap()).unwrap();
            files.parts = Some(parts);
            files.load::<LineFold>().unwrap().1
        };
        let whole = load(1);
        compared_ops += whole.ops.ok.points().count();
        for parts in [2, 3, 7] {
            assert!(load(parts) == whole, "{} in {parts} parts", dir.display());
        }
    }
    // Some fixture has completed operations, so their pairing across cuts was compared.
    assert!(compared_ops > 0);
}
