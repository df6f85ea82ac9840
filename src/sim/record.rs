//! The simulated run's history: the same lines the controller's `Recorder` writes (the one
//! `Event` serializer), stamped with virtual time, kept in memory, and fed as they are made to
//! the same live pieces a real run feeds: the view (settled? the final heal) and the
//! observations (triggers, the clients' leader); and, decoded once with the view, the checkers'
//! digest (what `fle-chaos check` would build from the written file).

use crate::checker::model::{Digest, LineDigester};
use crate::history::view::View;
use crate::history::{Event, EventType, F};
use crate::workload::observe::{NodeView, Observations};

pub struct SimRecorder {
    /// Virtual nanoseconds since the run started.
    pub now: u64,
    /// The history as `history.jsonl` holds it, one line per event.
    pub text: String,
    /// One line's bytes as they are serialized.
    scratch: Vec<u8>,
    /// The checkers' digest, fed each line as it is written (one decode for it and the view).
    digest: LineDigester,
    /// Why a line the simulator wrote could not be read back (a bug of the simulator).
    pub unreadable: Option<String>,
    next_index: u64,
    pub view: View,
    pub observations: Observations,
}

impl SimRecorder {
    /// A recorder for `nodes`, of which `observers` do not vote.
    pub fn new(nodes: &[String], observers: &[String]) -> Self {
        SimRecorder {
            now: 0,
            text: String::new(),
            scratch: Vec::new(),
            digest: LineDigester::new(nodes),
            unreadable: None,
            next_index: 0,
            view: View::of_ensemble(nodes, observers),
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
        self.record_typed(process, kind, f, node, &value)
    }

    /// [`Self::record`] of a value serialized as it is, without a `serde_json::Value` in
    /// between (a status read is most of a history, and building its map was most of a
    /// simulated run's time).
    fn record_typed<V: serde::Serialize>(
        &mut self,
        process: &str,
        kind: EventType,
        f: F,
        node: Option<&str>,
        value: V,
    ) -> u64 {
        let event = Event {
            index: self.next_index,
            time: self.now,
            process: process.to_string(),
            kind,
            f,
            node: node.map(str::to_string),
            value,
        };
        self.next_index += 1;
        let start = self.text.len();
        // An Event of derived Serialize impls cannot fail, and serde_json writes UTF-8 only.
        self.scratch.clear();
        let _ = serde_json::to_writer(&mut self.scratch, &event);
        self.text
            .push_str(std::str::from_utf8(&self.scratch).unwrap_or_default());
        let line_text = &self.text[start..];
        let view = &mut self.view;
        let fed = self.digest.line(line_text, |pos, line| {
            let e = view.of_line(pos, line);
            view.feed(e);
        });
        if let Err(why) = fed {
            self.unreadable.get_or_insert(why);
        }
        self.text.push('\n');
        event.index
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
            Ok(status) => (
                self.record_typed(node, EventType::Ok, F::Status, Some(node), &status),
                NodeView {
                    status: Some(status),
                    ..Default::default()
                },
            ),
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
