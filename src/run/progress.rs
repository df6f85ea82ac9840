//! The live progress line: elapsed/limit, leader and epoch, active faults, operation tallies.
//! Hidden when stderr is not a terminal (CI logs stay clean).

use crate::history::recorder::Recorder;
use crate::workload::observe::Observations;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub fn bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg}").unwrap_or(ProgressStyle::default_spinner()),
    );
    pb
}

/// The progress line's text now.
pub fn line(recorder: &Recorder, obs: &Observations, phase: &str, limit: Duration) -> String {
    let now = recorder.now();
    let elapsed = Duration::from_nanos(now).as_secs();
    let leader = match obs.leader(now, 1_000_000_000) {
        Some((n, s)) => format!("leader {n} epoch {}", s.peer_epoch),
        None => "no leader".to_string(),
    };
    let faults = recorder.active_faults();
    let faults = if faults.is_empty() {
        "none".to_string()
    } else {
        faults.join(", ")
    };
    format!(
        "{phase} {elapsed}s/{}s | {leader} | faults: {faults} | ok {} fail {} info {}",
        limit.as_secs(),
        recorder.ok.load(Ordering::Relaxed),
        recorder.fail.load(Ordering::Relaxed),
        recorder.info.load(Ordering::Relaxed),
    )
}

/// Refreshes `pb` every 200 ms until the task is aborted.
pub async fn refresh(
    pb: ProgressBar,
    recorder: Arc<Recorder>,
    obs: Arc<Observations>,
    limit: Duration,
) {
    loop {
        pb.set_message(line(&recorder, &obs, "running", limit));
        pb.tick();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
