//! The live progress line: elapsed/limit, leader and epoch, active faults, operation tallies.
//! On a terminal it redraws in place; when stderr is not a terminal (a CI log, a sweep's child)
//! a plain line every [`LOG_EVERY`] says the run is alive, with the faults applied so far.

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

/// How often a run says it is alive where no live line is drawn.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Refreshes `pb` every 200 ms until the task is aborted; where stderr is not a terminal,
/// prints the line every [`LOG_EVERY`] instead.
pub async fn refresh(
    pb: ProgressBar,
    recorder: Arc<Recorder>,
    obs: Arc<Observations>,
    limit: Duration,
) {
    if pb.is_hidden() {
        let mut every =
            tokio::time::interval_at(tokio::time::Instant::now() + LOG_EVERY, LOG_EVERY);
        loop {
            every.tick().await;
            let applied = recorder.view(|v| v.intervals().len());
            let now = line(&recorder, &obs, "running", limit);
            eprintln!("fle-chaos: {now} | faults so far: {applied}");
        }
    }
    loop {
        pb.set_message(line(&recorder, &obs, "running", limit));
        pb.tick();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
