//! The simulated run's history: the same lines the controller's `Recorder` writes (the one
//! `Event` serializer), stamped with virtual time, kept in memory, and fed as they are made to
//! the same live pieces a real run feeds: the view (settled? the final heal) and the
//! observations (triggers, the clients' leader); and, decoded once with the view, the checkers'
//! digest (what `fle-chaos check` would build from the written file).

use crate::checker::model::{Digest, LineDigester};
use crate::history::situation::Situations;
use crate::history::view::View;
use crate::history::{Event, EventType, F};
use crate::workload::observe::{NodeView, Observations};
use fle_node::api::{ElectionSummary, NodeStatus};
use memchr::memmem::Finder;
use std::collections::BTreeMap;
use std::sync::LazyLock;

pub struct SimRecorder {
    /// Virtual nanoseconds since the run started.
    pub now: u64,
    /// The history as `history.jsonl` holds it, one line per event.
    pub text: String,
    /// One line's bytes as they are serialized.
    scratch: Vec<u8>,
    /// Each node's last `last_election` and its JSON: a summary changes once per election but
    /// is most of every status line, and serializing it again was a third of a run's time.
    elections: BTreeMap<String, (ElectionSummary, String)>,
    /// The checkers' digest, fed each line as it is written (one decode for it and the view).
    digest: LineDigester,
    /// Why a line the simulator wrote could not be read back (a bug of the simulator).
    pub unreadable: Option<String>,
    next_index: u64,
    pub view: View,
    /// The situations the faults met, fed each line before the view (as the real
    /// `Recorder` feeds them): steering and goals read them.
    pub situations: Situations,
    pub observations: Observations,
}

impl SimRecorder {
    /// A recorder for `nodes`, of which `observers` do not vote.
    pub fn new(nodes: &[String], observers: &[String]) -> Self {
        SimRecorder {
            now: 0,
            text: String::new(),
            scratch: Vec::new(),
            elections: BTreeMap::new(),
            digest: LineDigester::new(nodes),
            unreadable: None,
            next_index: 0,
            view: View::of_ensemble(nodes, observers),
            situations: Situations::new(),
            observations: Observations::new(nodes.to_vec()),
        }
    }

    /// Appends one event stamped now; returns its index.
    pub fn record(
        &mut self,
        process: &str,
        kind: EventType,
        f: F,
        node: Option<&str>,
        value: serde_json::Value,
    ) -> u64 {
        self.serialize(process, kind, f, node, &value);
        self.append_scratch()
    }

    /// Serializes the next event, stamped now, into `scratch`.
    fn serialize<V: serde::Serialize>(
        &mut self,
        process: &str,
        kind: EventType,
        f: F,
        node: Option<&str>,
        value: V,
    ) {
        let event = Event {
            index: self.next_index,
            time: self.now,
            process: process.to_string(),
            kind,
            f,
            node: node.map(str::to_string),
            value,
        };
        self.scratch.clear();
        // An Event of derived Serialize impls cannot fail.
        let _ = serde_json::to_writer(&mut self.scratch, &event);
    }

    /// A successful status read's line, most of a history: the status serialized as it is
    /// (building a `serde_json::Value` map of it was most of a run's time) without its
    /// `last_election`, which is then spliced in from the node's cached JSON (the same bytes
    /// serde writes: the field's `null` stands where the object goes).
    fn record_status(&mut self, node: &str, mut status: NodeStatus) -> (u64, NodeStatus) {
        const NULL: &[u8] = br#""last_election":null"#;
        static FIND_NULL: LazyLock<Finder> = LazyLock::new(|| Finder::new(NULL));
        let election = status.last_election.take();
        self.serialize(node, EventType::Ok, F::Status, Some(node), &status);
        let null_at = FIND_NULL.find(&self.scratch);
        status.last_election = election;
        let (Some(e), Some(at)) = (&status.last_election, null_at) else {
            if status.last_election.is_some() {
                // No `null` to replace (never with serde's layout): the whole status, as is.
                self.serialize(node, EventType::Ok, F::Status, Some(node), &status);
            }
            return (self.append_scratch(), status);
        };
        if !matches!(self.elections.get(node), Some((same, _)) if same == e) {
            let json = serde_json::to_string(e).unwrap_or_default();
            self.elections.insert(node.to_string(), (e.clone(), json));
        }
        let at = at + NULL.len() - b"null".len();
        // serde_json writes UTF-8 only, and the splits are at ASCII bytes.
        let line = std::str::from_utf8(&self.scratch).unwrap_or_default();
        let start = self.text.len();
        self.text.push_str(&line[..at]);
        self.text.push_str(&self.elections[node].1);
        self.text.push_str(&line[at + b"null".len()..]);
        (self.end_line(start), status)
    }

    /// Appends the line in `scratch` to the history; returns its index.
    fn append_scratch(&mut self) -> u64 {
        let start = self.text.len();
        // serde_json writes UTF-8 only.
        self.text
            .push_str(std::str::from_utf8(&self.scratch).unwrap_or_default());
        self.end_line(start)
    }

    /// Ends the line written from `start`, feeding it to the digest and the view; returns its
    /// index.
    fn end_line(&mut self, start: usize) -> u64 {
        let index = self.next_index;
        self.next_index += 1;
        let line_text = &self.text[start..];
        let (view, situations) = (&mut self.view, &mut self.situations);
        let fed = self.digest.line(line_text, |pos, line| {
            let e = view.of_line(pos, line);
            situations.line(view, &e, line);
            view.feed(e);
        });
        if let Err(why) = fed {
            self.unreadable.get_or_insert(why);
        }
        self.text.push('\n');
        index
    }

    /// The history's digest, for the checkers; or why it could not be read.
    pub fn digest(&mut self) -> Result<Digest, String> {
        let d = std::mem::replace(&mut self.digest, LineDigester::new(&[]));
        match self.unreadable.take() {
            Some(why) => Err(why),
            None => Ok(d.finish()),
        }
    }

    /// A status read: recorded, and the node's latest view for triggers and clients.
    pub fn status(
        &mut self,
        node: &str,
        read: Result<crate::api::NodeStatus, (EventType, String)>,
    ) {
        let (index, view) = match read {
            Ok(status) => {
                let (index, status) = self.record_status(node, status);
                (
                    index,
                    NodeView {
                        status: Some(status),
                        ..Default::default()
                    },
                )
            }
            Err((kind, why)) => (
                self.record(
                    node,
                    kind,
                    F::Status,
                    Some(node),
                    serde_json::json!({ "error": why }),
                ),
                NodeView {
                    status: self.observations.latest(node).status,
                    error: Some(why),
                    ..Default::default()
                },
            ),
        };
        self.observations.set(
            node,
            NodeView {
                time: self.now.max(1),
                index,
                ..view
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::node_name;
    use fle_node::api::{ServerState, ZabPhase};

    fn status(sid: u64, round: u64) -> NodeStatus {
        NodeStatus {
            config: None,
            accepted_epoch: 1,
            election_epoch: round,
            last_committed_zxid: 0,
            last_election: (round > 0).then(|| ElectionSummary {
                joined: false,
                leader: 2,
                own_round: None,
                peer_epoch: 0,
                received: Vec::new(),
                round,
                took_ms: 20 * round,
                votes: Vec::new(),
                zxid: 0,
            }),
            last_zxid: 0,
            last_zxid_hex: "0x0".into(),
            leader: Some(2),
            peer_epoch: 1,
            peer_type: Default::default(),
            sid,
            state: ServerState::Following,
            uptime_ms: 5,
            wall_clock_ms: 7,
            zab_phase: ZabPhase::Broadcast,
        }
    }

    /// Each status line, its election spliced in from the cache (new, repeated, another
    /// node's, none), is what serializing the whole event writes.
    #[test]
    fn a_status_line_with_a_cached_election_is_the_events_serialization() {
        let nodes = ["n1".to_string(), "n2".to_string()];
        let mut rec = SimRecorder::new(&nodes, &[]);
        let reads = [(1, 0), (1, 3), (1, 3), (2, 3), (1, 4), (2, 0), (1, 4)];
        for (sid, round) in reads {
            rec.now += 1_000_000;
            rec.status(&node_name(sid), Ok(status(sid, round)));
        }
        let lines: Vec<&str> = rec.text.lines().collect();
        assert_eq!(lines.len(), reads.len());
        for (i, ((sid, round), line)) in reads.iter().zip(lines).enumerate() {
            let event = Event {
                index: i as u64,
                time: (i as u64 + 1) * 1_000_000,
                process: node_name(*sid),
                kind: EventType::Ok,
                f: F::Status,
                node: Some(node_name(*sid)),
                value: &status(*sid, *round),
            };
            assert_eq!(line, serde_json::to_string(&event).unwrap());
        }
        assert!(rec.digest().is_ok());
    }
}
