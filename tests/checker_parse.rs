//! The file fast path (scanner + parallel parts) must digest a history exactly as the
//! sequential path does: same records, positions, elections and verdicts, whatever the number
//! of parts; a torn tail is skipped and a corrupt middle line is named, also when split.

use fle_chaos::checker::parse::digest_file_in;
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

/// Everything a check concludes from a file split into `parts`, as JSON, with evidence quoted
/// by line offset (equal offsets = the same events).
fn conclusions(dir: &Path, history: &Path, parts: u64) -> serde_json::Value {
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
    let dir = fixtures()
        .into_iter()
        .find(|d| d.ends_with("valid-election"))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut text = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let n = text.lines().count();
    text.push_str(&format!(
        "{{\"index\":{n},\"time\":9000000000,\"process\":\"n7\",\"type\":\"ok\",\"f\":\"status\",\"node\":\"n7\",\"value\":{{\"sid\":7,\"state\":\"LOOKING\",\"leader\":null,\"peer_epoch\":0,\"election_epoch\":1,\"last_zxid\":0,\"last_zxid_hex\":\"0x0\",\"wall_clock_ms\":1,\"uptime_ms\":1,\"last_election\":null}}}}\n"
    ));
    let h = tmp.path().join("history.jsonl");
    std::fs::write(&h, text).unwrap();
    let whole = conclusions(&dir, &h, 1);
    assert_eq!(whole["nodes"].as_array().unwrap().len(), 4);
    assert_eq!(conclusions(&dir, &h, 3), whole);
}

#[test]
fn torn_tail_and_corrupt_middle_whatever_the_parts() {
    let dir = fixtures()
        .into_iter()
        .find(|d| d.ends_with("valid-writes"))
        .unwrap();
    let info = TestInfo::read(&dir.join("test.json")).unwrap();
    let text = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let tmp = tempfile::tempdir().unwrap();
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
                msg.contains(&format!("line {}:", bad + 1)),
                "{parts} parts: {msg}"
            );
        }
    }
}
