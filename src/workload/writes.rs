//! The `writes` workload: clients writing unique values through the current leader.
//!
//! Jepsen's semantics: each write is an `invoke` then `ok` (committed at a zxid), `fail` (it
//! certainly did not happen: refused by the node, never sent, or no leader known so nothing
//! was sent) or `info` (unknown: a timeout; it may still commit). After an `info` the client
//! takes a fresh process number (old + concurrency), as Jepsen does, since the old process
//! may still have an operation in flight.

use crate::control::sut::{Target, WriteOutcome};
use crate::history::recorder::Recorder;
use crate::history::{EventType, F};
use crate::workload::observe::Observations;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What every client shares.
#[derive(Clone)]
pub struct Clients {
    pub target: Arc<dyn Target>,
    pub recorder: Arc<Recorder>,
    pub observations: Arc<Observations>,
    pub concurrency: usize,
    /// Writes per second, all clients together.
    pub rate: f64,
    /// Values are 1, 2, 3, ... across all clients: unique by construction.
    pub next_value: Arc<AtomicU64>,
}

/// A status older than this does not name the leader (the observer is stuck on that node).
const LEADER_MAX_AGE_NS: u64 = 1_000_000_000;

/// Runs client `id` (0-based) until `stop` turns true.
pub async fn client(id: usize, c: Clients, mut stop: watch::Receiver<bool>) {
    let period = Duration::from_secs_f64(c.concurrency as f64 / c.rate);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut process = id;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let value = c.next_value.fetch_add(1, Ordering::Relaxed) + 1;
        let leader = c
            .observations
            .leader(c.recorder.now(), LEADER_MAX_AGE_NS)
            .map(|(n, _)| n);
        let p = process.to_string();
        c.recorder.record(
            &p,
            EventType::Invoke,
            F::Write,
            leader.as_deref(),
            json!({ "value": value }),
        );
        let Some(node) = leader else {
            c.recorder.record(
                &p,
                EventType::Fail,
                F::Write,
                None,
                json!({ "value": value, "error": "no leader known; not sent" }),
            );
            continue;
        };
        // The write runs to its own timeout even when the run stops, so that its outcome
        // is recorded rather than left as a dangling invoke.
        let outcome = c.target.write(&node, json!(value)).await;
        let (kind, v) = match outcome {
            WriteOutcome::Ok { zxid } => (EventType::Ok, json!({ "value": value, "zxid": zxid })),
            WriteOutcome::Fail { error, leader_hint } => (
                EventType::Fail,
                json!({ "value": value, "error": error, "leader_hint": leader_hint }),
            ),
            WriteOutcome::Info { error } => {
                (EventType::Info, json!({ "value": value, "error": error }))
            }
        };
        c.recorder.record(&p, kind, F::Write, Some(&node), v);
        if kind == EventType::Info {
            process += c.concurrency;
        }
    }
}
