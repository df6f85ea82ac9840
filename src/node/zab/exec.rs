//! Performs a state machine's [`Output`]s against the store, with the ordering `actions.rs`
//! promises: sends after a `Sync` wait for the fsync; epoch writes wait for it too.
//!
//! Log writes happen under the store lock (they only reach the page cache); fsyncs run on the
//! blocking pool through a file handle, outside the lock, so HTTP readers never wait on a disk.

use anyhow::Context;

use crate::node::zab::actions::{Output, PersistOp};
use crate::node::zab::messages::Msg;
use crate::node::zab::store::{lock, SharedStore};

/// What the role's loop must act on after the outputs ran.
#[derive(Default, Debug)]
pub(crate) struct Executed {
    /// Our log is durable up to these zxids (the leader's own ACK).
    pub self_acks: Vec<u64>,
    pub committed: Option<u64>,
    pub step_down: Option<String>,
    pub closes: Vec<(u64, String)>,
}

pub(crate) async fn execute(
    store: &SharedStore,
    outputs: Vec<Output>,
    send: &mut (dyn FnMut(u64, Msg) + Send),
) -> anyhow::Result<Executed> {
    let mut ex = Executed::default();
    let mut sync_due = false;
    let mut deferred: Vec<(u64, Msg)> = Vec::new();
    for o in outputs {
        match o {
            Output::Send(to, m) if sync_due => deferred.push((to, m)),
            Output::Send(to, m) => send(to, m),
            Output::Persist(op) => match op {
                PersistOp::AcceptedEpoch(e) | PersistOp::CurrentEpoch(e) => {
                    if sync_due {
                        fsync(store).await?;
                        sync_due = false;
                        for (to, m) in deferred.drain(..) {
                            send(to, m);
                        }
                    }
                    let accepted = matches!(op, PersistOp::AcceptedEpoch(_));
                    let s = store.clone();
                    tokio::task::spawn_blocking(move || {
                        let mut s = lock(&s);
                        if accepted {
                            s.set_accepted_epoch(e)
                        } else {
                            s.set_current_epoch(e)
                        }
                    })
                    .await??;
                }
                PersistOp::Append(txns) => lock(store)
                    .log_mut()
                    .append(&txns)
                    .context("appending to the txnlog")?,
                PersistOp::Commit(z) => lock(store)
                    .log_mut()
                    .commit(z)
                    .context("writing the commit watermark")?,
                PersistOp::Truncate(z) => {
                    let s = store.clone();
                    let dropped =
                        tokio::task::spawn_blocking(move || lock(&s).log_mut().truncate_after(z))
                            .await?
                            .context("truncating the txnlog")?;
                    tracing::info!("TRUNC: dropped {dropped} txns after {z:#x}");
                }
                PersistOp::Reset(txns) => {
                    let s = store.clone();
                    let n = txns.len();
                    tokio::task::spawn_blocking(move || lock(&s).log_mut().reset(&txns, 0))
                        .await??;
                    tracing::info!("SNAP: log replaced by the leader's {n} txns");
                }
            },
            Output::Sync { self_ack } => {
                sync_due = true;
                ex.self_acks.extend(self_ack);
            }
            Output::Committed(z) => ex.committed = Some(ex.committed.unwrap_or(0).max(z)),
            Output::StepDown(why) => ex.step_down = Some(why),
            Output::Close(sid, why) => ex.closes.push((sid, why)),
        }
    }
    if sync_due {
        fsync(store).await?;
    }
    for (to, m) in deferred {
        send(to, m);
    }
    Ok(ex)
}

async fn fsync(store: &SharedStore) -> anyhow::Result<()> {
    let f = lock(store).log().sync_handle();
    tokio::task::spawn_blocking(move || f.sync_data())
        .await?
        .context("fsync of the txnlog")
}
