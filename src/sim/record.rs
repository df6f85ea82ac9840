//! The simulated run's history: the same lines the controller's `Recorder` writes (the one
//! `Event` serializer), stamped with virtual time, kept in memory, and fed as they are made to
//! the same live pieces a real run feeds: the view (settled? the final heal) and the
//! observations (triggers, the clients' leader).

use crate::history::view::View;
use crate::history::{Event, EventType, F};
use crate::workload::observe::{NodeView, Observations};

pub struct SimRecorder {
    /// Virtual nanoseconds since the run started.
    pub now: u64,
    /// The history as `history.jsonl` holds it, one line per event.
    pub text: String,
    next_index: u64,
    pub view: View,
    pub observations: Observations,
}

impl SimRecorder {
    pub fn new(nodes: &[String]) -> Self {
        SimRecorder {
            now: 0,
            text: String::new(),
            next_index: 0,
            view: View::new(nodes),
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
        // An Event always serializes (its value is JSON already).
        self.text
            .push_str(&serde_json::to_string(&event).unwrap_or_default());
        let line_text = &self.text[start..];
        if let Ok(line) = crate::history::line::decode(line_text) {
            let e = self.view.of_line(event.index as u32, &line);
            self.view.feed(e);
        }
        self.text.push('\n');
        event.index
    }

    /// A status read: recorded, and the node's latest view for triggers and clients.
    pub fn status(
        &mut self,
        node: &str,
        read: Result<crate::api::NodeStatus, (EventType, String)>,
    ) {
        let (kind, value, view) = match read {
            Ok(status) => (
                EventType::Ok,
                serde_json::to_value(&status).unwrap_or_default(),
                NodeView {
                    status: Some(status),
                    ..Default::default()
                },
            ),
            Err((kind, why)) => (
                kind,
                serde_json::json!({ "error": why }),
                NodeView {
                    status: self.observations.latest(node).status,
                    error: Some(why),
                    ..Default::default()
                },
            ),
        };
        let index = self.record(node, kind, F::Status, Some(node), value);
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
