//! Nodes that die unasked. The run's `Target` is wrapped in `Watched`, which notes every node
//! the controller takes down itself (a nemesis kill) before doing it, and forgets it when the
//! controller starts the node again. A watcher task polls every node's process through the
//! Target/Control seam (fle-node and ZooKeeper alike): a process gone that the controller did
//! not take down is a `node-exit` event (its exit status or signal, the last lines of its log).
//!
//! Before the cluster first had a quorum-backed leader such an exit aborts the run (a node
//! binary that cannot start, a `--bug` it refuses): exit 255 with the node's last log line,
//! never a verdict about the system. Later, it is the `crash` checker's finding: a system under
//! test that dies by itself is a bug.

use crate::api::{LogResponse, NodeStatus};
use crate::control::fault::clock::Clock;
use crate::control::sut::{BoxFuture, DataOutcome, Member, ReadError, Target, WriteOutcome};
use crate::control::Control;
use crate::history::recorder::Recorder;
use crate::history::{EventType, NodeExitValue, F};
use anyhow::Result;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// How often the watcher looks at every node's process.
const PERIOD: Duration = Duration::from_millis(50);
/// How many lines of a dead node's log the event carries.
const TAIL_LINES: usize = 12;
/// How far back a tail that begins inside a stack trace may reach for the trace's first line
/// (the exception and its message, which name the failure; a Java trace is often longer than
/// `TAIL_LINES`).
const TRACE_REACH: usize = 64;

/// A `Target` that remembers which nodes the controller took down on purpose.
pub struct Watched {
    inner: Arc<dyn Target>,
    taken_down: Mutex<HashSet<String>>,
    /// Kills and starts per node so far: a look at a process that overlapped one of them
    /// (a remote look takes an SSH round trip) proves nothing about an unasked exit.
    actions: Mutex<HashMap<String, u64>>,
    /// Successful starts per node so far: a node started since the watcher's last look ran,
    /// even when it died before a look saw it (a refusal over SSH takes less than a look).
    starts: Mutex<HashMap<String, u64>>,
}

impl Watched {
    pub fn new(inner: Arc<dyn Target>) -> Self {
        Watched {
            inner,
            taken_down: Mutex::new(HashSet::new()),
            actions: Mutex::new(HashMap::new()),
            starts: Mutex::new(HashMap::new()),
        }
    }

    fn starts(&self, node: &str) -> u64 {
        self.starts.lock().unwrap().get(node).copied().unwrap_or(0)
    }

    fn taken_down(&self, node: &str) -> bool {
        self.taken_down.lock().unwrap().contains(node)
    }

    fn actions(&self, node: &str) -> u64 {
        self.actions.lock().unwrap().get(node).copied().unwrap_or(0)
    }

    fn acted_on(&self, node: &str) {
        *self
            .actions
            .lock()
            .unwrap()
            .entry(node.to_string())
            .or_default() += 1;
    }
}

impl Target for Watched {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn nodes(&self) -> Vec<String> {
        self.inner.nodes()
    }
    fn setup(&self, node: &str) -> Result<()> {
        self.inner.setup(node)
    }
    fn start(&self, node: &str) -> Result<u32> {
        self.acted_on(node);
        let pid = self.inner.start(node);
        self.taken_down.lock().unwrap().remove(node);
        if pid.is_ok() {
            *self
                .starts
                .lock()
                .unwrap()
                .entry(node.to_string())
                .or_default() += 1;
        }
        self.acted_on(node);
        pid
    }
    fn kill(&self, node: &str) -> Result<Option<u32>> {
        // Noted before the kill, so the watcher never sees it as an exit of its own.
        self.taken_down.lock().unwrap().insert(node.to_string());
        self.acted_on(node);
        self.inner.kill(node)
    }
    fn power_loss(
        &self,
        node: &str,
        tear_seed: Option<u64>,
    ) -> Result<::fle_node::lazyfs::DropReport> {
        self.inner.power_loss(node, tear_seed)
    }
    fn corrupt_file(
        &self,
        node: &str,
        file: &str,
        seed: u64,
    ) -> Result<crate::control::fault::corrupt::Damage> {
        self.inner.corrupt_file(node, file, seed)
    }
    fn pause(&self, node: &str) -> Result<Option<u32>> {
        self.inner.pause(node)
    }
    fn resume(&self, node: &str) -> Result<Option<u32>> {
        self.inner.resume(node)
    }
    fn is_running(&self, node: &str) -> bool {
        self.inner.is_running(node)
    }
    fn control(&self) -> &dyn Control {
        self.inner.control()
    }
    fn status(&self, node: &str) -> BoxFuture<'_, Result<NodeStatus, ReadError>> {
        self.inner.status(node)
    }
    fn write(&self, node: &str, value: serde_json::Value) -> BoxFuture<'_, WriteOutcome> {
        self.inner.write(node, value)
    }
    fn data_write(
        &self,
        node: &str,
        op: crate::api::DataOp,
    ) -> BoxFuture<'_, DataOutcome<crate::api::DataWritten>> {
        self.inner.data_write(node, op)
    }
    fn data_read(
        &self,
        node: &str,
        key: &str,
        sync: bool,
    ) -> BoxFuture<'_, DataOutcome<crate::api::DataRead>> {
        self.inner.data_read(node, key, sync)
    }
    fn read_log(&self, node: &str) -> BoxFuture<'_, Result<LogResponse, ReadError>> {
        self.inner.read_log(node)
    }
    fn log_paths(&self, node: &str) -> Vec<PathBuf> {
        self.inner.log_paths(node)
    }
    fn clock_file(&self, node: &str) -> Option<PathBuf> {
        self.inner.clock_file(node)
    }
    fn clock(&self) -> Option<&dyn Clock> {
        self.inner.clock()
    }
    fn software(&self) -> Option<serde_json::Value> {
        self.inner.software()
    }
    fn election_addr(&self, node: &str) -> Option<std::net::SocketAddr> {
        self.inner.election_addr(node)
    }
    fn reconfig(&self, via: &str, add: &[Member], remove: &[String]) -> DataOutcome<u64> {
        self.inner.reconfig(via, add, remove)
    }
    fn wipe(&self, node: &str) -> Result<()> {
        self.inner.wipe(node)
    }
}

/// The last `n` non-empty lines of a node's logs.
fn log_tail(target: &dyn Target, node: &str, n: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for path in target.log_paths(node) {
        // Local logs are read directly; a remote node's through its Control.
        let text = std::fs::read(&path).ok().or_else(|| {
            let dir = target.control().node_dir(node).ok()?;
            let rel = path.strip_prefix(&dir).ok()?;
            target.control().read_file(node, rel).ok()
        });
        if let Some(text) = text {
            lines.extend(
                String::from_utf8_lossy(&text)
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(str::to_string),
            );
        }
    }
    lines.split_off(tail_start(&lines, n))
}

/// Where the last `n` of `lines` begin, moved back (at most `TRACE_REACH` lines) to the line
/// that opens the stack trace they begin in, so the tail names the exception.
fn tail_start(lines: &[String], n: usize) -> usize {
    let mut start = lines.len().saturating_sub(n);
    let floor = start.saturating_sub(TRACE_REACH);
    while start > floor && lines.get(start).is_some_and(|l| is_trace_frame(l)) {
        start -= 1;
    }
    start
}

/// A line inside a stack trace: a Java frame (`\tat ...`, `\t... 12 more`) or a cause.
fn is_trace_frame(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("at ") || t.starts_with("... ") || t.starts_with("Caused by:")
}

/// The `node-exit` value for `node`, which has just been found gone.
fn exit_value(target: &dyn Target, node: &str) -> NodeExitValue {
    use std::os::unix::process::ExitStatusExt;
    let status = target.control().exit_status(node);
    NodeExitValue {
        status: status.and_then(|s| s.code()),
        signal: status
            .and_then(|s| s.signal())
            .and_then(|n| nix::sys::signal::Signal::try_from(n).ok())
            .map(|s| s.as_str().to_string()),
        caused_by_controller: false,
        log_tail: log_tail(target, node, TAIL_LINES),
    }
}

/// Watches every node until the task is dropped. An exit before the cluster first had a
/// quorum-backed leader is sent on `abort` ("n3 exited during start: ...").
pub async fn watch_nodes(
    target: Arc<Watched>,
    recorder: Arc<Recorder>,
    abort: watch::Sender<Option<String>>,
) {
    // Whether each node ran at the last look, so that one death is reported once.
    // Every node was started before the watch began: one that is already gone died.
    let mut alive: HashMap<String, bool> = target.nodes().into_iter().map(|n| (n, true)).collect();
    let mut seen_starts: HashMap<String, u64> = target
        .nodes()
        .into_iter()
        .map(|n| (n.clone(), target.starts(&n)))
        .collect();
    let mut started = false;
    loop {
        started = started || recorder.view(|v| v.quorum_leader(0).is_some());
        for node in target.nodes() {
            // Started since the last look: it ran, whatever the look below finds.
            let starts = target.starts(&node);
            if seen_starts.insert(node.clone(), starts) != Some(starts) {
                alive.insert(node.clone(), true);
            }
            let before = target.actions(&node);
            let running = target.is_running(&node);
            let was = alive.insert(node.clone(), running).unwrap_or(false);
            if target.actions(&node) != before {
                // The look overlapped a kill or start (a remote look is an SSH round trip):
                // it proves nothing, so it is taken again next time.
                alive.insert(node.clone(), was);
                continue;
            }
            if running || !was || target.taken_down(&node) {
                continue;
            }
            let value = exit_value(target.as_ref(), &node);
            let how = match (&value.status, &value.signal) {
                (Some(code), _) => format!("exit status {code}"),
                (None, Some(sig)) => format!("killed by {sig}"),
                (None, None) => "ended".to_string(),
            };
            tracing::error!("{node} exited unasked ({how})");
            let last = value
                .log_tail
                .last()
                .cloned()
                .unwrap_or_else(|| how.clone());
            recorder.record(
                &node,
                EventType::Info,
                F::NodeExit,
                Some(&node),
                serde_json::to_value(&value).unwrap_or_default(),
            );
            if !started {
                abort.send_replace(Some(format!("{node} exited during start ({how}): {last}")));
            }
        }
        tokio::time::sleep(PERIOD).await;
    }
}

#[cfg(test)]
mod tests {
    use super::tail_start;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_tail_that_begins_inside_a_stack_trace_reaches_back_to_its_exception() {
        let log = lines(&[
            "INFO starting",
            "ERROR ZKDatabase - Committed proposal cached out of order",
            "java.lang.IllegalStateException: Committed proposal cached out of order",
            "\tat a.b(C.java:1)",
            "\tat a.d(C.java:2)",
            "Caused by: x.Y",
            "\t... 3 more",
            "INFO exiting",
        ]);
        // The last 3 lines begin at "Caused by": the tail reaches back to the exception line.
        assert_eq!(tail_start(&log, 3), 2);
        // A tail that begins outside a trace is the last n lines.
        assert_eq!(tail_start(&log, 1), 7);
        assert_eq!(tail_start(&log, 20), 0);
    }
}
