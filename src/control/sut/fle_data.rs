//! fle-node's data tree over HTTP (`POST /data`, `GET /data/KEY`, `POST /sync`), each answer
//! sorted into Jepsen's outcomes: 200 happened; 409 (refused: exists, no node, bad version),
//! 503 (not serving, or nothing reached a leader) and a refused connection certainly did not;
//! anything else, a timeout above all, is unknown.

use crate::api::{ApiError, DataOp, DataRead, DataWritten, Synced};
use crate::control::sut::DataOutcome;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// One create / set / cas through the node at `base` (`http://host:port`).
pub async fn write(
    client: &reqwest::Client,
    base: &str,
    op: &DataOp,
    timeout: Duration,
) -> DataOutcome<DataWritten> {
    let sent = client
        .post(format!("{base}/data"))
        .timeout(timeout)
        .json(op)
        .send();
    outcome(sent).await
}

/// One read of `key` from the node at `base`, after a `/sync` when `sync`.
pub async fn read(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    sync: bool,
    timeout: Duration,
) -> DataOutcome<DataRead> {
    if sync {
        let sent = client.post(format!("{base}/sync")).timeout(timeout).send();
        match outcome::<Synced>(sent).await {
            DataOutcome::Ok(_) => {}
            DataOutcome::Refused(e) => return DataOutcome::Refused(format!("sync: {e}")),
            DataOutcome::Unavailable(e) => return DataOutcome::Unavailable(format!("sync: {e}")),
            DataOutcome::Info(e) => return DataOutcome::Info(format!("sync: {e}")),
        }
    }
    let sent = client
        .get(format!("{base}/data/{key}"))
        .timeout(timeout)
        .send();
    outcome(sent).await
}

/// Sorts one HTTP exchange into an outcome (also `POST /reconfig`'s).
pub(crate) async fn outcome<T: DeserializeOwned>(
    sent: impl std::future::Future<Output = Result<reqwest::Response, reqwest::Error>>,
) -> DataOutcome<T> {
    let resp = match sent.await {
        Ok(r) => r,
        // Never connected: the node never saw the request.
        Err(e) if e.is_connect() => {
            return DataOutcome::Unavailable(format!("cannot connect: {e}"))
        }
        Err(e) => return DataOutcome::Info(format!("{e}")),
    };
    let code = resp.status().as_u16();
    if code == 200 {
        return match resp.json::<T>().await {
            Ok(t) => DataOutcome::Ok(t),
            // It happened, but what it answered is lost: unknown rather than invented.
            Err(e) => DataOutcome::Info(format!("200 with an unreadable body: {e}")),
        };
    }
    let error = resp
        .json::<ApiError>()
        .await
        .map(|e| e.error)
        .unwrap_or_else(|_| format!("HTTP {code}"));
    match code {
        409 => DataOutcome::Refused(error),
        // A 400 is our own bad request: nothing was applied, but say so loudly.
        400 => DataOutcome::Refused(format!("bad request (HTTP 400): {error}")),
        503 => DataOutcome::Unavailable(error),
        _ => DataOutcome::Info(error),
    }
}
