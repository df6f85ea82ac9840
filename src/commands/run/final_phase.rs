//! The end of a run, after the nemesis stopped: make sure every node runs again, wait for the
//! cluster to settle (every node that is up rejoined the quorum-backed leader and caught up, as
//! `history::view` defines it), and read every node's committed log once (`final-log` events,
//! which the durability checker compares).

use crate::control::sut::{ReadError, Target};
use crate::history::recorder::Recorder;
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

/// How long fewer than a quorum of servers may run before the final phase stops waiting for a
/// leader.
const SHORT_OF_A_QUORUM_GRACE: Duration = Duration::from_secs(2);

/// How the final phase's wait ended.
pub enum Settled {
    /// Every node that is up rejoined the quorum-backed leader.
    Yes {
        sid: u64,
        epoch: u64,
        took: Duration,
    },
    /// `--recovery-timeout` passed first: what each straggler last reported.
    No { stragglers: Vec<String> },
}

/// Waits until the cluster has settled (`history::view::View::settled`: a quorum-backed leader,
/// every node that is up leading or following it in broadcast, caught up to its last committed
/// zxid), or `timeout`. Only reads taken after the final heal count. The final reads must not
/// start before: a node still catching up would show a prefix of the log, which proves nothing.
pub async fn wait_for_settle(
    recorder: &Recorder,
    target: &dyn Target,
    timeout: Duration,
) -> Settled {
    let start = recorder.now();
    let deadline = tokio::time::Instant::now() + timeout;
    // Since when fewer than a quorum of servers run, and when that was last asked.
    let mut short_since: Option<tokio::time::Instant> = None;
    let mut asked: Option<tokio::time::Instant> = None;
    loop {
        // Only reads taken after the final heal count (an older read may show the pre-heal
        // leader): the recovery checker's rule, on the same view of the same lines.
        let settle = recorder.view(|v| v.settled(v.final_heal().map_or(start, |h| h.time)));
        if let (true, Some(l)) = (settle.is_settled(), settle.leader) {
            return Settled::Yes {
                sid: l.sid,
                epoch: l.epoch,
                took: Duration::from_nanos(recorder.now().saturating_sub(start)),
            };
        }
        // Fewer than a quorum of servers run after the final restarts (the others exited:
        // they cannot start on what their disks hold): no leader can come, and waiting out the
        // timeout proves no more.
        // Asked once a second: over SSH each question is a round trip.
        let now = tokio::time::Instant::now();
        if asked.is_none_or(|t| now - t >= Duration::from_secs(1)) {
            asked = Some(now);
            short_since = match short_of_a_quorum(target, recorder) {
                None => None,
                Some(_) => short_since.or(Some(now)),
            };
        }
        let hopeless = short_since.is_some_and(|t| now - t >= SHORT_OF_A_QUORUM_GRACE);
        if now >= deadline || hopeless {
            let stragglers = recorder.view(|v| {
                settle
                    .stragglers
                    .iter()
                    .map(|&i| {
                        let n = &v.nodes()[i];
                        match n.read {
                            Some(r) => format!(
                                "{} last reported {:?} {:?}, leader {:?}, epoch {}, committed zxid {:#x}",
                                n.name, r.state, r.phase, r.leader, r.peer_epoch, r.last_committed_zxid
                            ),
                            None => format!("{} could not be read", n.name),
                        }
                    })
                    .collect()
            });
            return Settled::No { stragglers };
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads every node's committed log, concurrently: exactly one `final-log` event per node
/// (ok with the log, fail when unreachable, info on timeout).
pub async fn final_reads(target: Arc<dyn Target>, recorder: Arc<Recorder>) {
    let short_of_a_quorum = short_of_a_quorum(target.as_ref(), &recorder);
    let mut reads = tokio::task::JoinSet::new();
    for node in target.nodes() {
        let (target, recorder) = (target.clone(), recorder.clone());
        let short_of_a_quorum = short_of_a_quorum.clone();
        reads.spawn(async move {
            // A node whose process has exited cannot answer: no need to wait out a timeout.
            if !crate::control::blocking(|| target.is_running(&node)) {
                let value = json!({ "error": "its process is not running" });
                recorder.record(&node, EventType::Fail, F::FinalLog, Some(&node), value);
                return;
            }
            let read = target.read_log(&node);
            let read = match &short_of_a_quorum {
                None => read.await,
                Some(why) => match tokio::time::timeout(SHORT_OF_A_QUORUM_READ, read).await {
                    Ok(read) => read,
                    Err(_) => Err(ReadError::Unreachable(format!(
                        "no answer within {SHORT_OF_A_QUORUM_READ:?}: {why}"
                    ))),
                },
            };
            let (kind, value) = match read {
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

/// How long a final read may take while fewer than a quorum of voters run. A server that
/// needs a quorum to serve (ZooKeeper refuses sessions until it has one) will never answer;
/// one that reads its own log (fle-node) answers in milliseconds either way.
const SHORT_OF_A_QUORUM_READ: Duration = Duration::from_secs(5);

/// Why no quorum can serve the final reads (the voters that run, of how many, and the
/// quorum), or None when a quorum of voters runs.
fn short_of_a_quorum(target: &dyn Target, recorder: &Recorder) -> Option<String> {
    let (voters, quorum) = recorder.view(|v| (v.voters(), v.quorum()));
    let running =
        crate::control::blocking(|| voters.iter().filter(|n| target.is_running(n)).count());
    (running < quorum).then(|| {
        format!(
            "{running} of {} voters run, short of a quorum of {quorum}",
            voters.len()
        )
    })
}
