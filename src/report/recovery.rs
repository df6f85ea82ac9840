//! Time to a quorum-backed leader after each fault.
//!
//! The recovery checker is the authority: when its measurements carry per-fault times the
//! report plots those. Otherwise the report derives them from the history itself, so a run
//! always gets the plot: after a fault at time T, recovery is the first moment at which a node
//! LEADING in epoch E is backed by a quorum (itself included) of nodes FOLLOWING it in E, each
//! read after T, none killed or paused, and none cut off from the leader by a partition.

use super::faults::FaultKind;
use super::lite::LaneState;
use serde_json::Value;
use std::collections::HashMap;

/// One fault and how long the cluster took to have a quorum-backed leader again.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    pub kind: FaultKind,
    pub fault_ns: u64,
    /// None: no quorum-backed leader before the run ended.
    pub recovery_s: Option<f64>,
}

/// Where the recovery times came from, for the plot's note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoverySource {
    Checker,
    History,
}

/// A node's last status read, as far as leadership is concerned.
#[derive(Debug, Clone, Copy)]
struct NodeView {
    state: LaneState,
    leader: Option<u64>,
    epoch: u64,
    read_ns: u64,
    /// Killed or paused by the nemesis and not yet restarted/resumed.
    disabled: bool,
}

/// Follows the cluster's leadership through the history and times each fault's recovery.
#[derive(Debug)]
pub struct RecoveryTracker {
    quorum: usize,
    views: HashMap<String, NodeView>,
    pending: Vec<(FaultKind, u64)>,
    pub done: Vec<Recovery>,
}

impl RecoveryTracker {
    pub fn new(quorum: usize) -> Self {
        Self {
            quorum: quorum.max(1),
            views: HashMap::new(),
            pending: Vec::new(),
            done: Vec::new(),
        }
    }

    pub fn fault_started(&mut self, kind: FaultKind, nodes: &[String], at_ns: u64) {
        if matches!(
            kind,
            FaultKind::Kill | FaultKind::Pause | FaultKind::PowerLoss | FaultKind::Corrupt
        ) {
            for n in nodes {
                if let Some(v) = self.views.get_mut(n) {
                    v.disabled = true;
                }
            }
        }
        self.pending.push((kind, at_ns));
    }

    /// A status read of `node`. `connected` says whether two nodes can talk right now.
    pub fn status(
        &mut self,
        node: &str,
        at_ns: u64,
        state: LaneState,
        leader: Option<u64>,
        epoch: u64,
        connected: impl Fn(&str, &str) -> bool,
    ) {
        // A successful read means the process is running again, whatever the nemesis said.
        let view = NodeView {
            state,
            leader,
            epoch,
            read_ns: at_ns,
            disabled: state == LaneState::Down,
        };
        match self.views.get_mut(node) {
            Some(v) => *v = view,
            None => {
                self.views.insert(node.to_string(), view);
            }
        }
        if self.pending.is_empty() {
            return;
        }
        let since = self.pending.iter().map(|p| p.1).max().unwrap_or(0);
        if self.quorum_backed_leader(since, &connected) {
            for (kind, fault_ns) in self.pending.drain(..) {
                self.done.push(Recovery {
                    kind,
                    fault_ns,
                    recovery_s: Some(at_ns.saturating_sub(fault_ns) as f64 / 1e9),
                });
            }
        }
    }

    fn quorum_backed_leader(&self, since_ns: u64, connected: &impl Fn(&str, &str) -> bool) -> bool {
        let fresh = |v: &NodeView| !v.disabled && v.read_ns >= since_ns;
        self.views.iter().any(|(name, l)| {
            if l.state != LaneState::Leading || !fresh(l) {
                return false;
            }
            let sid = crate::history::sid_of(name);
            let backers = self
                .views
                .iter()
                .filter(|(n, v)| {
                    *n == name
                        || (v.state == LaneState::Following
                            && fresh(v)
                            && v.leader == sid
                            && v.epoch == l.epoch
                            && connected(n, name))
                })
                .count();
            backers >= self.quorum
        })
    }

    /// Faults never followed by a quorum-backed leader are reported as not recovered.
    pub fn finish(mut self) -> Vec<Recovery> {
        for (kind, fault_ns) in self.pending.drain(..) {
            self.done.push(Recovery {
                kind,
                fault_ns,
                recovery_s: None,
            });
        }
        self.done.sort_by_key(|r| r.fault_ns);
        self.done
    }
}

/// Per-fault recovery times from the recovery checker's measurements, read defensively: any
/// array of objects naming a fault kind and a recovery time (seconds or milliseconds) counts.
/// None when the checker gave nothing usable.
pub fn from_checker(measurements: &Value) -> Option<Vec<Recovery>> {
    let mut found = Vec::new();
    collect(measurements, &mut found, 0);
    if found.is_empty() {
        None
    } else {
        found.sort_by_key(|r| r.fault_ns);
        Some(found)
    }
}

fn collect(v: &Value, out: &mut Vec<Recovery>, depth: usize) {
    if depth > 4 {
        return;
    }
    match v {
        Value::Array(items) => {
            for item in items {
                if let Some(r) = recovery_of(item) {
                    out.push(r);
                } else {
                    collect(item, out, depth + 1);
                }
            }
        }
        Value::Object(map) => map.values().for_each(|x| collect(x, out, depth + 1)),
        _ => {}
    }
}

fn recovery_of(item: &Value) -> Option<Recovery> {
    let obj = item.as_object()?;
    let kind = ["kind", "fault", "f", "fault_kind", "nemesis"]
        .iter()
        .find_map(|k| obj.get(*k)?.as_str().and_then(FaultKind::parse))?;
    let mut recovery_s = None;
    let mut time_known = false;
    for (key, val) in obj {
        let k = key.to_ascii_lowercase();
        if !(k.contains("recover") || k.contains("to_leader") || k.contains("leaderless")) {
            continue;
        }
        time_known = true;
        recovery_s = match val.as_f64() {
            Some(x) if k.ends_with("_ms") => Some(x / 1e3),
            Some(x) if k.ends_with("_ns") => Some(x / 1e9),
            Some(x) => Some(x),
            None => None,
        };
        break;
    }
    if !time_known {
        return None;
    }
    let fault_ns = ["time", "at", "fault_time", "start"]
        .iter()
        .find_map(|k| {
            let (key, v) = obj.iter().find(|(name, _)| name.starts_with(*k))?;
            let x = v.as_f64()?;
            Some(if key.ends_with("_ms") {
                x * 1e6
            } else if key.ends_with("_s") {
                x * 1e9
            } else {
                x
            })
        })
        .unwrap_or(0.0) as u64;
    Some(Recovery {
        kind,
        fault_ns,
        recovery_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const S: u64 = 1_000_000_000;

    #[test]
    fn leader_kill_recovers_when_a_quorum_follows_a_new_leader() {
        let all = |_: &str, _: &str| true;
        let mut r = RecoveryTracker::new(2);
        r.status("n1", 0, LaneState::Leading, Some(1), 1, all);
        r.status("n2", 0, LaneState::Following, Some(1), 1, all);
        r.status("n3", 0, LaneState::Following, Some(1), 1, all);
        r.fault_started(FaultKind::Kill, &["n1".into()], S);
        // Stale followers of the killed leader do not count.
        r.status("n2", S + 1, LaneState::Following, Some(1), 1, all);
        r.status("n3", S + 1, LaneState::Looking, None, 1, all);
        assert!(r.done.is_empty());
        r.status("n3", 3 * S, LaneState::Leading, Some(3), 2, all);
        r.status("n2", 3 * S + S / 2, LaneState::Following, Some(3), 2, all);
        let done = r.finish();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].recovery_s, Some(2.5));
    }

    #[test]
    fn partitioned_followers_do_not_back_a_leader() {
        let cut = |a: &str, b: &str| !(a == "n2" && b == "n1" || a == "n1" && b == "n2");
        let mut r = RecoveryTracker::new(2);
        r.fault_started(FaultKind::Partition, &["n1".into()], 0);
        r.status("n1", 1, LaneState::Leading, Some(1), 1, cut);
        r.status("n2", 1, LaneState::Following, Some(1), 1, cut);
        let done = r.finish();
        assert_eq!(done[0].recovery_s, None);
    }

    #[test]
    fn checker_measurements_are_read_in_several_shapes() {
        let m = json!({"per_fault": [
            {"kind": "kill", "time_ms": 2000, "recovery_ms": 1500},
            {"fault": "partition", "at_s": 9.0, "time_to_leader_s": null},
        ], "leaderless_windows": 3});
        let r = from_checker(&m).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].kind, r[0].fault_ns, r[0].recovery_s),
            (FaultKind::Kill, 2 * S, Some(1.5))
        );
        assert_eq!((r[1].kind, r[1].recovery_s), (FaultKind::Partition, None));
        assert!(from_checker(&json!({"bound_s": 30})).is_none());
        assert!(from_checker(&Value::Null).is_none());
    }
}
