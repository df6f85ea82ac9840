//! crash: no node process dies by itself. The controller watches every node's process and
//! records a `node-exit` event for an exit it did not cause (not a nemesis kill, not the
//! teardown), with the exit status or signal and the last lines of the node's log. Any such
//! event makes the run invalid: a system under test that exits unasked (a panic, an abort, an
//! out-of-memory kill) is a bug, whatever the other checkers say. The log lines are the
//! evidence.
//!
//! One exit is an answer, not a crash: a refusal to start on a file a `corrupt` fault damaged
//! (`Digest::refusals`). Refusing is the safe outcome (serving damaged data is what durability
//! and the final reads catch), so it is recorded in the explanation, with its log lines, and
//! is no violation.

use super::finding::{EvRef, Finding, KindedItem};
use super::kind::Kind;
use super::model::{Digest, NodeExit};
use crate::duration::moment;
use crate::history::test_info::TestInfo;

pub const NAME: &str = "crash";

/// ZooKeeper's refusal to start on a txn log without the snapshot under it (`FileTxnSnapLog`),
/// as a power loss leaves it (docs/zookeeper.md).
const NO_SNAPSHOT: &str = "No snapshot found, but there are log entries";

/// ZooKeeper's refusal to start on a txn log that skips a zxid (`ZKDatabase`, since 3.9.4),
/// and the frame that throws it, for a tail recorded before tails reached back to the
/// exception (`run::node_watch`).
const TXN_LOG_GAP: [&str; 2] = [
    "Committed proposal cached out of order",
    "ZKDatabase$1.onTxnLoaded(",
];

pub fn check(d: &Digest, _info: &TestInfo) -> Finding {
    let refusals = d.refusals();
    let mut violations: Vec<KindedItem> = Vec::new();
    let mut refused: Vec<String> = Vec::new();
    for e in &d.node_exits {
        let node = &d.nodes[e.node as usize];
        let (how, tail) = how_and_tail(e);
        if let Some(r) = refusals.iter().find(|r| r.pos == e.pos) {
            refused.push(format!(
                "{node} refused to start at {} {how} on the file its corrupt fault damaged at {} \
                 (a safe answer, no violation); {tail}.",
                moment(e.time),
                moment(r.damaged_at),
            ));
            continue;
        }
        let tail_has = |marks: &[&str]| {
            e.value
                .log_tail
                .iter()
                .any(|l| marks.iter().any(|m| l.contains(m)))
        };
        let kind = if tail_has(&[NO_SNAPSHOT]) {
            Kind::NoSnapshotAtRestart
        } else if tail_has(&TXN_LOG_GAP) {
            Kind::TxnLogGapAtRestart
        } else {
            Kind::Exit
        };
        violations.push((
            kind,
            (
                format!(
                    "{node} exited by itself at {} {how}; {tail}.",
                    moment(e.time)
                ),
                vec![EvRef::new(e.pos, format!("{node} exited unasked"))],
            ),
        ));
    }
    let ok = if refused.is_empty() {
        "No node process exited without the controller stopping it.".to_string()
    } else {
        "No node process crashed.".to_string()
    };
    let mut f = Finding::judge_kinds(violations, Vec::new(), ok);
    for line in refused {
        f.explanation.push(' ');
        f.explanation.push_str(&line);
    }
    f
}

/// "with status 1" and "its log ends: ..." of an exit.
fn how_and_tail(e: &NodeExit) -> (String, String) {
    let how = match (&e.value.status, &e.value.signal) {
        (Some(code), _) => format!("with status {code}"),
        (None, Some(sig)) => format!("killed by {sig}"),
        (None, None) => "(status unknown)".to_string(),
    };
    let tail = match e.value.log_tail.as_slice() {
        [] => "its log is empty".to_string(),
        lines => format!("its log ends: \"{}\"", lines.join(" | ")),
    };
    (how, tail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::model::digest_lines;
    use crate::checker::Validity;

    const READ_N2: &str = r#"{"index":0,"time":1000000,"process":"n2","type":"ok","f":"status","node":"n2","value":{"state":"FOLLOWING","leader":1,"peer_epoch":1,"accepted_epoch":1,"zab_phase":"broadcast","last_zxid":0,"last_committed_zxid":0}}"#;
    const CORRUPT_N2: &str = r#"{"index":1,"time":2000000000,"process":"nemesis","type":"info","f":"corrupt","value":{"nodes":["n2"],"damage":{"n2":{"file":"data/version-2/log.100000001","op":"flip-bits","offset":90,"length":2,"size":400}}}}"#;
    const START_N2: &str = r#"{"index":2,"time":5000000000,"process":"nemesis","type":"info","f":"start","value":{"nodes":["n2"],"undoes":"corrupt"}}"#;

    fn exit(status: &str, signal: &str) -> String {
        format!(
            r#"{{"index":3,"time":6000000000,"process":"n2","type":"info","f":"node-exit","node":"n2","value":{{"status":{status},"signal":{signal},"caused_by_controller":false,"log_tail":["ERROR Unable to load database on disk"]}}}}"#
        )
    }

    fn judge(lines: &[&str]) -> Finding {
        let nodes: Vec<String> = ["n1", "n2", "n3"].map(String::from).to_vec();
        let d = digest_lines(lines, &nodes).unwrap();
        check(&d, &TestInfo::for_tests(&["n1", "n2", "n3"]))
    }

    #[test]
    fn a_refusal_to_start_on_a_damaged_file_is_recorded_not_a_violation() {
        // Over SSH the exit status is not known: the quoted log says why.
        let unknown = exit("null", "null");
        let f = judge(&[READ_N2, CORRUPT_N2, START_N2, &unknown]);
        assert_eq!(f.valid, Validity::True, "{}", f.explanation);
        assert!(
            f.explanation.contains("(status unknown)"),
            "{}",
            f.explanation
        );
        // A read sent before the kill that lands after the damage (slow over SSH) is not the
        // restarted process answering: still a refusal.
        let stale = READ_N2.replace(
            "\"index\":0,\"time\":1000000",
            "\"index\":2,\"time\":2100000000",
        );
        let start = START_N2.replace("\"index\":2", "\"index\":3");
        let late = exit("1", "null").replace("\"index\":3", "\"index\":4");
        let f = judge(&[READ_N2, CORRUPT_N2, &stale, &start, &late]);
        assert_eq!(f.valid, Validity::True, "{}", f.explanation);
        let e = exit("1", "null");
        let f = judge(&[READ_N2, CORRUPT_N2, START_N2, &e]);
        assert_eq!(f.valid, Validity::True, "{}", f.explanation);
        assert!(
            f.explanation
                .contains("n2 refused to start at 6.000 s with status 1")
                && f.explanation.contains("damaged at 2.000 s")
                && f.explanation.contains("Unable to load database"),
            "{}",
            f.explanation
        );
    }

    #[test]
    fn a_panic_a_signal_or_an_exit_after_serving_again_is_a_crash() {
        for (status, signal) in [("101", "null"), ("null", "\"SIGSEGV\"")] {
            let e = exit(status, signal);
            let f = judge(&[READ_N2, CORRUPT_N2, START_N2, &e]);
            assert_eq!(
                f.valid,
                Validity::False,
                "{status} {signal}: {}",
                f.explanation
            );
        }
        // It answered a read after the damage: it started, then died.
        let served = READ_N2.replace(
            "\"index\":0,\"time\":1000000",
            "\"index\":3,\"time\":5500000000",
        );
        let e = exit("1", "null").replace("\"index\":3", "\"index\":4");
        let f = judge(&[READ_N2, CORRUPT_N2, START_N2, &served, &e]);
        assert_eq!(f.valid, Validity::False, "{}", f.explanation);
        // No corrupt fault: any exit is a crash.
        let f = judge(&[READ_N2, START_N2, &exit("1", "null")]);
        assert_eq!(f.valid, Validity::False, "{}", f.explanation);
    }

    #[test]
    fn a_zookeeper_refusal_names_its_kind_by_the_exception_or_the_frame_that_throws_it() {
        let with_tail = |tail: &str| {
            format!(
                r#"{{"index":0,"time":6000000000,"process":"n1","type":"info","f":"node-exit","node":"n1","value":{{"status":1,"signal":null,"caused_by_controller":false,"log_tail":[{tail}]}}}}"#
            )
        };
        for (tail, kind) in [
            (
                r#""java.io.IOException: No snapshot found, but there are log entries""#,
                Kind::NoSnapshotAtRestart,
            ),
            (
                r#""java.lang.IllegalStateException: Committed proposal cached out of order: 0x900000073 is not the next proposal of 0x900000071""#,
                Kind::TxnLogGapAtRestart,
            ),
            (
                r#""\tat org.apache.zookeeper.server.ZKDatabase$1.onTxnLoaded(ZKDatabase.java:278)""#,
                Kind::TxnLogGapAtRestart,
            ),
            (r#""ERROR Unable to load database on disk""#, Kind::Exit),
        ] {
            let f = judge(&[&with_tail(tail)]);
            assert_eq!(f.valid, Validity::False, "{tail}: {}", f.explanation);
            assert_eq!(f.kinds.keys().collect::<Vec<_>>(), vec![&kind], "{tail}");
        }
    }
}
