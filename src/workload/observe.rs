//! Observers: one task per node reading its status at a steady rate (>= 50 Hz by default),
//! recording every read, and keeping the latest view of each node for the workload ("who is
//! the leader?"), the nemesis (target the leader) and the progress line. (Recovery is judged
//! by `history::view`, fed by the `Recorder`.)
//!
//! Each observer has its own task, client and timeout, so a slow, paused or dead node only
//! slows its own observer. Missed ticks are delayed, not burst: after a slow read the observer
//! resumes its rate instead of firing a backlog of reads.

use crate::api::{NodeStatus, ServerState};
use crate::control::sut::{ReadError, Target};
use crate::history::recorder::Recorder;
use crate::history::{EventType, F};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch;

/// The latest read of one node.
#[derive(Debug, Clone, Default)]
pub struct NodeView {
    pub status: Option<NodeStatus>,
    /// When the read completed (ns since run start); 0 = never read.
    pub time: u64,
    /// The read's history index (what a triggered fault records as `trigger_index`).
    pub index: u64,
    pub error: Option<String>,
}

/// The latest view of every node.
pub struct Observations {
    nodes: Vec<String>,
    views: RwLock<HashMap<String, NodeView>>,
}

impl Observations {
    pub fn new(nodes: Vec<String>) -> Self {
        Observations {
            nodes,
            views: RwLock::new(HashMap::new()),
        }
    }

    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// Sets a node's latest read (the observers; the simulator's recorder).
    pub fn set(&self, node: &str, view: NodeView) {
        self.views.write().unwrap().insert(node.to_string(), view);
    }

    /// Sets a node's latest read by hand (tests of what reads the nemesis reacts to).
    #[cfg(test)]
    pub fn set_view(&self, node: &str, view: NodeView) {
        self.set(node, view)
    }

    pub fn latest(&self, node: &str) -> NodeView {
        self.views
            .read()
            .unwrap()
            .get(node)
            .cloned()
            .unwrap_or_default()
    }

    /// The node that most recently claimed to lead (highest epoch wins when several claim),
    /// among statuses read successfully within `max_age_ns` of `now`.
    pub fn leader(&self, now: u64, max_age_ns: u64) -> Option<(String, NodeStatus)> {
        let views = self.views.read().unwrap();
        // Only the winner is cloned: the simulator's clients ask this before every write.
        self.nodes
            .iter()
            .filter_map(|n| {
                let v = views.get(n)?;
                let s = v.status.as_ref()?;
                (v.error.is_none()
                    && now.saturating_sub(v.time) <= max_age_ns
                    && s.state == ServerState::Leading)
                    .then_some((n, s))
            })
            .max_by_key(|(_, s)| (s.peer_epoch, s.zab_phase == crate::api::ZabPhase::Broadcast))
            .map(|(n, s)| (n.clone(), s.clone()))
    }
}

/// Reads `node`'s status every `period` until `stop` turns true.
pub async fn observe(
    node: String,
    target: Arc<dyn Target>,
    recorder: Arc<Recorder>,
    observations: Arc<Observations>,
    period: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let read = tokio::select! {
            r = target.status(&node) => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        let (kind, value, view) = match read {
            Ok(status) => {
                let value = serde_json::to_value(&status).unwrap_or_default();
                (
                    EventType::Ok,
                    value,
                    NodeView {
                        status: Some(status),
                        time: 0,
                        index: 0,
                        error: None,
                    },
                )
            }
            Err(e) => {
                let kind = match e {
                    ReadError::Unreachable(_) => EventType::Fail,
                    ReadError::Timeout(_) => EventType::Info,
                };
                let msg = e.message().to_string();
                (
                    kind,
                    serde_json::json!({ "error": msg }),
                    NodeView {
                        status: observations.latest(&node).status,
                        time: 0,
                        index: 0,
                        error: Some(msg),
                    },
                )
            }
        };
        let event = recorder.record(&node, kind, F::Status, Some(&node), value);
        observations.set(
            &node,
            NodeView {
                time: event.time,
                index: event.index,
                ..view
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ZabPhase;

    fn status(sid: u64, state: ServerState, leader: Option<u64>, epoch: u64) -> NodeStatus {
        NodeStatus {
            config: None,
            sid,
            state,
            leader,
            peer_epoch: epoch,
            accepted_epoch: epoch,
            election_epoch: 1,
            last_zxid: 0,
            last_zxid_hex: "0x0".into(),
            last_committed_zxid: 0,
            zab_phase: ZabPhase::Broadcast,
            wall_clock_ms: 0,
            uptime_ms: 0,
            last_election: None,
            peer_type: Default::default(),
        }
    }

    fn obs(views: &[(u64, Option<NodeStatus>, u64)]) -> Observations {
        let o = Observations::new(views.iter().map(|(s, _, _)| format!("n{s}")).collect());
        for (sid, st, time) in views {
            o.set(
                &format!("n{sid}"),
                NodeView {
                    status: st.clone(),
                    time: *time,
                    index: *time,
                    error: None,
                },
            );
        }
        o
    }

    #[test]
    fn the_leader_is_the_freshest_claim() {
        use ServerState::*;
        let agreed = obs(&[
            (1, Some(status(1, Following, Some(3), 2)), 100),
            (2, Some(status(2, Looking, None, 2)), 100),
            (3, Some(status(3, Leading, Some(3), 2)), 100),
        ]);
        assert_eq!(agreed.leader(100, 10).map(|(n, _)| n), Some("n3".into()));
        // Stale reads do not count.
        assert_eq!(agreed.leader(1000, 10), None);
        // Two claimants: the higher epoch is "the leader".
        let two = obs(&[
            (1, Some(status(1, Leading, Some(1), 1)), 100),
            (2, Some(status(2, Leading, Some(2), 3)), 100),
            (3, None, 0),
        ]);
        assert_eq!(two.leader(100, 10).map(|(n, _)| n), Some("n2".into()));
    }
}
