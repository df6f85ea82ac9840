//! The end of a run, after the nemesis stopped: make sure every node runs again, wait for a
//! quorum-backed leader (recovery, as `history::view` defines it), and read every node's committed log once
//! (`final-log` events, which the durability checker compares).

use super::recorder::Recorder;
use crate::control::target::{ReadError, Target};
use crate::history::{EventType, F, NEMESIS};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Restarts nodes that are down and resumes all (a stopped process ignores nothing but
/// SIGCONT): a safety net under the nemesis's own final heal, recorded only when it acts.
pub fn ensure_all_up(target: &dyn Target, recorder: &Recorder) {
    for node in target.nodes() {
        if target.is_running(&node) {
            // SIGCONT to a running process is a no-op, so this is safe to send blindly.
            let _ = target.resume(&node);
            continue;
        }
        let value = json!({ "nodes": [node], "final": true });
        recorder.record(NEMESIS, EventType::Invoke, F::Start, Some(&node), value);
        match target.start(&node) {
            Ok(pid) => recorder.record(
                NEMESIS,
                EventType::Info,
                F::Start,
                Some(&node),
                json!({ "nodes": [node], "pids": [pid], "final": true }),
            ),
            Err(e) => recorder.record(
                NEMESIS,
                EventType::Fail,
                F::Start,
                Some(&node),
                json!({ "nodes": [node], "error": format!("{e:#}"), "final": true }),
            ),
        };
    }
}

/// Waits until a quorum-backed leader is observed (`history::view::View::quorum_leader`, the
/// definition the recovery checker judges by, over the same lines), or `timeout`; returns the
/// leader's sid and epoch and how long it took.
pub async fn wait_for_recovery(
    recorder: &Recorder,
    timeout: Duration,
) -> Option<(u64, u64, Duration)> {
    let start = recorder.now();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // Only reads taken after the final heal count (an older read may show the pre-heal
        // leader): the recovery checker's rule, on the same view of the same lines.
        let (leader, since) = recorder.view(|v| {
            let since = v.final_heal().map_or(start, |h| h.time);
            (v.quorum_leader(since), since)
        });
        if let Some(l) = leader {
            return Some((
                l.sid,
                l.epoch,
                Duration::from_nanos(recorder.now().saturating_sub(since)),
            ));
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads every node's committed log, concurrently: exactly one `final-log` event per node
/// (ok with the log, fail when unreachable, info on timeout).
pub async fn final_reads(target: Arc<dyn Target>, recorder: Arc<Recorder>) {
    let mut reads = tokio::task::JoinSet::new();
    for node in target.nodes() {
        let (target, recorder) = (target.clone(), recorder.clone());
        reads.spawn(async move {
            let (kind, value) = match target.read_log(&node).await {
                Ok(log) => (
                    EventType::Ok,
                    serde_json::to_value(&log).unwrap_or_default(),
                ),
                Err(ReadError::Unreachable(e)) => (EventType::Fail, json!({ "error": e })),
                Err(ReadError::Timeout(e)) => (EventType::Info, json!({ "error": e })),
            };
            recorder.record(&node, kind, F::FinalLog, Some(&node), value);
        });
    }
    while reads.join_next().await.is_some() {}
}
