//! Performs a state machine's [`Output`]s against the store, with the ordering `actions.rs`
//! promises: sends after a `Sync` wait for the fsync; epoch writes wait for it too.
//!
//! Log writes happen under the store lock (they only reach the page cache); fsyncs run on the
//! blocking pool through a file handle, outside the lock, so HTTP readers never wait on a disk.

use anyhow::Context;

use crate::zab::actions::{Output, PersistOp};
use crate::zab::messages::Msg;
use crate::zab::store::{lock, SharedStore};

/// What the role's loop must act on after the outputs ran.
#[derive(Default, Debug)]
pub(crate) struct Executed {
    /// Our log is durable up to these zxids (the leader's own ACK).
    pub self_acks: Vec<u64>,
    pub committed: Option<u64>,
    pub step_down: Option<String>,
    pub closes: Vec<(u64, String)>,
    /// Txns appended here wait for the follower's batch fsync (`Output::BatchSync`).
    pub batched: bool,
    /// Txns appended here.
    pub appended: usize,
    /// The log was fsynced here: everything appended so far is durable.
    pub synced: bool,
}

pub(crate) async fn execute(
    store: &SharedStore,
    outputs: Vec<Output>,
    send: &mut (dyn FnMut(u64, Msg) + Send),
) -> anyhow::Result<Executed> {
    let mut ex = Executed::default();
    let mut sync_due = false;
    // Txns appended and not yet fsynced: an ACK or an epoch write now breaks the order
    // `actions.rs` promises (only a seeded bug does that); counted for `/status`.
    let mut unsynced = false;
    let mut deferred: Vec<(u64, Msg)> = Vec::new();
    for o in outputs {
        match o {
            Output::Send(to, m) if sync_due => deferred.push((to, m)),
            Output::Send(to, m) => {
                if unsynced && matches!(m, Msg::Ack { .. }) {
                    lock(store).order_counters_mut().acks_before_fsync += 1;
                }
                send(to, m)
            }
            Output::Persist(op) => match op {
                PersistOp::AcceptedEpoch(e) | PersistOp::CurrentEpoch(e) => {
                    if sync_due {
                        fsync(store).await?;
                        ex.synced = true;
                        sync_due = false;
                        unsynced = false;
                        for (to, m) in deferred.drain(..) {
                            send(to, m);
                        }
                    }
                    let accepted = matches!(op, PersistOp::AcceptedEpoch(_));
                    if unsynced && !accepted {
                        lock(store).order_counters_mut().epochs_before_fsync += 1;
                    }
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
                PersistOp::Append(txns) => {
                    unsynced |= !txns.is_empty();
                    ex.appended += txns.len();
                    lock(store)
                        .log_mut()
                        .append(&txns)
                        .context("appending to the txnlog")?
                }
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
            Output::BatchSync => ex.batched = true,
            Output::Committed(z) => ex.committed = Some(ex.committed.unwrap_or(0).max(z)),
            Output::StepDown(why) => ex.step_down = Some(why),
            Output::Close(sid, why) => ex.closes.push((sid, why)),
        }
    }
    if sync_due {
        fsync(store).await?;
        ex.synced = true;
    }
    for (to, m) in deferred {
        send(to, m);
    }
    Ok(ex)
}

pub(crate) async fn fsync(store: &SharedStore) -> anyhow::Result<()> {
    let f = lock(store).log().sync_handle();
    tokio::task::spawn_blocking(move || f.sync_data())
        .await?
        .context("fsync of the txnlog")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txnlog::{Txn, TxnLog};
    use crate::zab::store::{Store, CURRENT_EPOCH_FILE, LOG_FILE};
    use serde_json::json;

    /// The follower's NEWLEADER outputs: when the ACK leaves, the txns and the new currentEpoch
    /// are already in the files (ZOOKEEPER-3911/4785), and sends before a Sync go out at once.
    #[tokio::test]
    async fn ack_leaves_only_after_txns_and_epoch_are_on_disk() {
        let d = tempfile::tempdir().unwrap();
        let (store, _) = Store::open_shared(d.path()).unwrap();
        lock(&store).set_accepted_epoch(2).unwrap();
        let txn = Txn {
            zxid: 7,
            value: json!("x"),
        };
        let outputs = vec![
            Output::Send(1, Msg::Ping),
            Output::Persist(PersistOp::Append(vec![txn.clone()])),
            Output::Sync { self_ack: Some(7) },
            Output::Persist(PersistOp::CurrentEpoch(2)),
            Output::Send(1, Msg::Ack { zxid: 2 << 32 }),
        ];
        let dir = d.path().to_path_buf();
        let mut seen = Vec::new();
        let ex = execute(&store, outputs, &mut |_, m| {
            let epoch = std::fs::read_to_string(dir.join(CURRENT_EPOCH_FILE)).unwrap_or_default();
            let (log, _) = TxnLog::open(&dir.join(LOG_FILE)).unwrap();
            seen.push((m, epoch, log.txns().len()));
        })
        .await
        .unwrap();
        assert_eq!(
            seen,
            vec![
                (Msg::Ping, String::new(), 0),
                (
                    Msg::Ack { zxid: 2 << 32 },
                    crate::zab::store::epoch_file_text(2),
                    1
                ),
            ]
        );
        assert_eq!(ex.self_acks, vec![7]);
        assert_eq!(lock(&store).current_epoch(), 2);
        assert_eq!(lock(&store).order_counters(), Default::default());
    }

    /// The seeded ack-before-fsync / epoch-before-txns orders go out as given and are counted.
    #[tokio::test]
    async fn an_ack_or_epoch_before_the_fsync_is_counted() {
        let d = tempfile::tempdir().unwrap();
        let (store, _) = Store::open_shared(d.path()).unwrap();
        lock(&store).set_accepted_epoch(2).unwrap();
        let append = |zxid| {
            Output::Persist(PersistOp::Append(vec![Txn {
                zxid,
                value: json!("x"),
            }]))
        };
        let outputs = vec![
            append(7),
            Output::Persist(PersistOp::CurrentEpoch(2)),
            Output::Send(1, Msg::Ack { zxid: 7 }),
            Output::Sync { self_ack: None },
            append(8),
            Output::Send(1, Msg::Ack { zxid: 8 }),
            Output::Sync { self_ack: None },
        ];
        let mut sent = Vec::new();
        execute(&store, outputs, &mut |_, m| sent.push(m))
            .await
            .unwrap();
        assert_eq!(sent, vec![Msg::Ack { zxid: 7 }, Msg::Ack { zxid: 8 }]);
        // ACK 7 left at once; ACK 8 came after a Sync, so it waited for the fsync as promised.
        let c = lock(&store).order_counters();
        assert_eq!((c.acks_before_fsync, c.epochs_before_fsync), (1, 1));
    }
}
