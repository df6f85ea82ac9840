//! session-order (register workload): ZooKeeper's own promises to one client session, for
//! every read, plain or after a `sync`:
//! - monotonic reads: a client's reads of a key never go back in version;
//! - read your writes: a client reads a key at least at the version its own acknowledged write
//!   of it left;
//! - FIFO client order: a client's acknowledged write gets a zxid above those of its earlier
//!   acknowledged writes.
//!
//! A session is a process: ZooKeeper promises this within one session only, and the workload
//! gives a client a new process number when it moves it to another server (a new session)
//! and after an unknown outcome. Only
//! completed (`ok`) operations say anything here; whether reads are fresh against other
//! clients' writes is `linearizable`'s question (sync reads) and not promised for plain ones.

use super::finding::{EvRef, Finding, Item, KindedItem};
use super::kind::Kind;
use super::linearizable::{bad_values, describe, f_name};
use super::model::{Digest, RegisterOp};
use crate::duration::moment;
use crate::history::test_info::TestInfo;
use crate::history::{EventType, F};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub const NAME: &str = "session-order";

/// What session-order judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOrderMeasurements {
    /// Processes with a completed register operation.
    pub sessions: usize,
    pub reads_judged: usize,
    pub writes_judged: usize,
}

/// The lowest version a session may still read of a key, and the operation that set it.
struct Floor<'a> {
    version: i64,
    by: &'a RegisterOp,
}

/// One pass over the completed operations, per session.
#[derive(Default)]
struct Sessions<'a> {
    floors: HashMap<(&'a str, &'a str), Floor<'a>>,
    /// Each session's last acknowledged write with a zxid.
    last_write: HashMap<&'a str, (u64, &'a RegisterOp)>,
    violations: Vec<KindedItem>,
    reads: usize,
    writes: usize,
}

impl<'a> Sessions<'a> {
    fn read(&mut self, op: &'a RegisterOp, nodes: &[String]) {
        let Some(version) = op.value.version else {
            return;
        };
        self.reads += 1;
        let at = (op.process.as_str(), op.value.key.as_str());
        match self.floors.get(&at) {
            Some(floor) if version < floor.version => {
                let kind = match floor.by.f {
                    F::Read => Kind::ReadWentBack,
                    _ => Kind::ReadBelowOwnWrite,
                };
                self.violations
                    .push((kind, went_back(op, version, floor, nodes)));
            }
            Some(floor) if version == floor.version => {}
            _ => {
                self.floors.insert(at, Floor { version, by: op });
            }
        }
    }

    fn write(&mut self, op: &'a RegisterOp, nodes: &[String]) {
        self.writes += 1;
        let at = (op.process.as_str(), op.value.key.as_str());
        if let Some(version) = op.value.version {
            if self.floors.get(&at).is_none_or(|f| f.version <= version) {
                self.floors.insert(at, Floor { version, by: op });
            }
        }
        let Some(zxid) = op.value.zxid else { return };
        if let Some(&(before, earlier)) = self.last_write.get(op.process.as_str()) {
            if zxid <= before {
                let text = format!(
                    "{} was acknowledged with zxid {zxid:#x}, not above the zxid {before:#x} of the same client's earlier write ({}): its writes were not applied in the order it sent them.",
                    describe(op, nodes),
                    describe(earlier, nodes)
                );
                let evidence = vec![
                    EvRef::new(earlier.pos, "the client's earlier write"),
                    EvRef::new(op.pos, "its later write, with a lower zxid"),
                ];
                self.violations
                    .push((Kind::WritesOutOfOrder, (text, evidence)));
                return;
            }
        }
        self.last_write.insert(&op.process, (zxid, op));
    }
}

/// The account of a read below its session's floor.
fn went_back(op: &RegisterOp, version: i64, floor: &Floor, nodes: &[String]) -> Item {
    let node = floor
        .by
        .node
        .map_or(String::new(), |n| format!(" on {}", nodes[n as usize]));
    let before = match floor.by.f {
        F::Read => format!("had read version {}", floor.version),
        f => format!(
            "had its own {} acknowledged at version {}",
            f_name(f),
            floor.version
        ),
    };
    let text = format!(
        "{} returned version {version}, but the same client {before}{node} at {}.",
        describe(op, nodes),
        moment(floor.by.time),
    );
    let evidence = vec![
        EvRef::new(
            floor.by.pos,
            format!("the client's earlier {}", f_name(floor.by.f)),
        ),
        EvRef::new(op.pos, "its later read, of an older version"),
    ];
    (text, evidence)
}

pub fn check(d: &Digest, info: &TestInfo) -> Finding {
    let mut s = Sessions::default();
    let mut any = false;
    for op in d.register_ops() {
        any = true;
        if op.kind != EventType::Ok {
            continue;
        }
        match op.f {
            F::Read => s.read(op, &d.nodes),
            _ => s.write(op, &d.nodes),
        }
    }
    let mut gaps = bad_values(d);
    if !any {
        let why = format!(
            "The history has no register operations (workload \"{}\"), so {NAME} cannot be judged.",
            info.workload
        );
        gaps.push((why, vec![]));
    }
    let m = SessionOrderMeasurements {
        sessions: (s.floors.keys().map(|(p, _)| *p))
            .chain(s.last_write.keys().copied())
            .collect::<std::collections::HashSet<_>>()
            .len(),
        reads_judged: s.reads,
        writes_judged: s.writes,
    };
    let ok = format!(
        "In each of the {} client sessions, reads never went back in version nor below the client's own writes ({} reads), and writes took zxids in the order sent ({} writes).",
        m.sessions, m.reads_judged, m.writes_judged
    );
    Finding::judge_kinds(s.violations, gaps, ok)
        .with_measurements(super::Measurements::SessionOrder(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::model::digest_lines;
    use crate::checker::Validity;

    fn judge(lines: &[(&str, &str, &str, &str)]) -> Finding {
        let texts: Vec<String> = (lines.iter().enumerate())
            .map(|(i, (p, k, f, v))| {
                format!(
                    r#"{{"index":{i},"time":{},"process":"{p}","type":"{k}","f":"{f}","node":"n1","value":{v}}}"#,
                    i * 1_000_000
                )
            })
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let d = digest_lines(&refs, &["n1".to_string()]).unwrap();
        let mut info = TestInfo::for_tests(&["n1"]);
        info.workload = "register".into();
        check(&d, &info)
    }

    const W5: &str = r#"{"key":"k1","value":5,"version":5,"zxid":9}"#;
    const R4: &str = r#"{"key":"k1","value":4,"version":4,"zxid":9}"#;
    const R5: &str = r#"{"key":"k1","value":5,"version":5,"zxid":9}"#;

    #[test]
    fn each_promise_broken_is_named() {
        let f = judge(&[("1", "ok", "read", R5), ("1", "ok", "read", R4)]);
        assert_eq!(
            f.kinds.get(&Kind::ReadWentBack),
            Some(&1),
            "{}",
            f.explanation
        );
        let f = judge(&[("1", "ok", "set", W5), ("1", "ok", "read", R4)]);
        assert_eq!(
            f.kinds.get(&Kind::ReadBelowOwnWrite),
            Some(&1),
            "{}",
            f.explanation
        );
        let w3 = r#"{"key":"k2","value":3,"version":1,"zxid":8}"#;
        let f = judge(&[("1", "ok", "set", W5), ("1", "ok", "set", w3)]);
        assert_eq!(
            f.kinds.get(&Kind::WritesOutOfOrder),
            Some(&1),
            "{}",
            f.explanation
        );
    }

    #[test]
    fn other_sessions_and_unknown_outcomes_do_not_bind() {
        let f = judge(&[
            ("1", "ok", "read", R5),
            ("2", "ok", "read", R4),
            ("3", "info", "set", W5),
            ("3", "ok", "read", R4),
        ]);
        assert_eq!(f.valid, Validity::True, "{}", f.explanation);
        assert!(judge(&[]).valid == Validity::Unknown);
    }
}
