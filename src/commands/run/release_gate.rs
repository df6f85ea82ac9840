//! `--zookeeper-version V`: before any fault or write, every server must have reported release
//! V (ZooKeeper's `srvr`, read by the observers as the ensemble forms). A server that reports
//! another release stops the run with one line naming it, exit 254: a run of the wrong
//! software would judge the wrong thing, and a version matrix would file it under V.

use crate::control::sut::zookeeper::release::upstream_of;
use crate::control::sut::Target;
use crate::exit::bad_input;
use crate::history::test_info::Software;
use anyhow::Result;
use std::time::Duration;

/// How long a fresh ensemble may take to serve (JVM start, election) before the run gives up.
pub const FORMING: Duration = Duration::from_secs(120);

/// Waits until every node reported its release (at most `FORMING`), then checks each is
/// `version`.
pub async fn every_server_reports(
    target: &dyn Target,
    nodes: &[String],
    version: &str,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + FORMING;
    loop {
        let reported = reported(target);
        if let Some((node, other)) = reported.iter().find(|(_, v)| upstream_of(v) != version) {
            return Err(bad_input(format!(
                "--zookeeper-version {version}: {node} reports ZooKeeper {other}; the run stopped \
                 before any fault (check the folder it ran, or give --zookeeper-version {})",
                upstream_of(other)
            )));
        }
        let missing: Vec<&String> = nodes
            .iter()
            .filter(|n| !reported.contains_key(*n))
            .collect();
        if missing.is_empty() {
            tracing::info!("every server reports ZooKeeper {version}");
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "--zookeeper-version {version}: {} did not report a release within {} s of the \
                 start (the ensemble did not form; see each node's zookeeper.log)",
                missing
                    .iter()
                    .map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                FORMING.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The release each server reported so far (`Target::software`).
fn reported(target: &dyn Target) -> std::collections::BTreeMap<String, String> {
    target
        .software()
        .and_then(|v| serde_json::from_value::<Software>(v).ok())
        .map(|s| s.versions)
        .unwrap_or_default()
}
