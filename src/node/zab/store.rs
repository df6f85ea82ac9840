//! `zab::Store`: what a server keeps on disk for Zab: the two epoch files and the txnlog.
//!
//! `acceptedEpoch` and `currentEpoch` are decimal text files written atomically (tmp file, fsync,
//! rename, fsync the directory), as ZooKeeper does. The election reads its vote from here
//! (`current_epoch`, `last_logged_zxid`) and the HTTP handlers read `/log` from here while a role
//! runs, hence [`SharedStore`]: every lock is short (no fsync of the log is done under it).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context;

use crate::api::LogEntry;
use crate::node::txnlog::{sync_parent, TailRepair, Txn, TxnLog};

pub const ACCEPTED_EPOCH_FILE: &str = "acceptedEpoch";
pub const CURRENT_EPOCH_FILE: &str = "currentEpoch";
pub const LOG_FILE: &str = "txnlog";

/// The store shared by the role that runs and the HTTP handlers that read it.
pub type SharedStore = Arc<Mutex<Store>>;

/// Locks a shared store; a panic elsewhere while it was held does not make it unreadable.
pub fn lock(store: &SharedStore) -> MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct Store {
    dir: PathBuf,
    accepted_epoch: u64,
    current_epoch: u64,
    log: TxnLog,
    order: OrderCounters,
}

/// Durability-order slips seen by the Zab executor since start: always 0 on a correct server;
/// a seeded bug (`ack-before-fsync`, `epoch-before-txns`) shows here in `/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OrderCounters {
    /// ACKs sent while txns they cover were written but not yet fsynced.
    pub acks_before_fsync: u64,
    /// currentEpoch writes made while logged txns were not yet fsynced.
    pub epochs_before_fsync: u64,
}

impl Store {
    /// Opens the store in `dir` (created if missing). A repaired log tail is returned for the
    /// caller to log; epochs that contradict each other are a fatal, explained error.
    pub fn open(dir: &Path) -> anyhow::Result<(Store, Option<TailRepair>)> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating data directory {}", dir.display()))?;
        let accepted_epoch = read_epoch(&dir.join(ACCEPTED_EPOCH_FILE))?;
        let current_epoch = read_epoch(&dir.join(CURRENT_EPOCH_FILE))?;
        if accepted_epoch < current_epoch {
            anyhow::bail!(
                "{}: acceptedEpoch {accepted_epoch} is less than currentEpoch {current_epoch}, which \
                 no correct run can leave behind; the data directory is damaged (restore it, or \
                 wipe it so this server rejoins with no history)",
                dir.display()
            );
        }
        let (log, repair) = TxnLog::open(&dir.join(LOG_FILE))?;
        let store = Store {
            dir: dir.to_path_buf(),
            accepted_epoch,
            current_epoch,
            log,
            order: OrderCounters::default(),
        };
        Ok((store, repair))
    }

    /// Opens the store and wraps it for sharing.
    pub fn open_shared(dir: &Path) -> anyhow::Result<(SharedStore, Option<TailRepair>)> {
        let (s, r) = Store::open(dir)?;
        Ok((Arc::new(Mutex::new(s)), r))
    }

    /// Opens the store for a server: a repaired log tail becomes a WARN log line (and stays
    /// available to the caller for `/status` or the history).
    pub fn open_logged(dir: &Path) -> anyhow::Result<(SharedStore, Option<TailRepair>)> {
        let (s, r) = Store::open_shared(dir)?;
        if let Some(r) = &r {
            tracing::warn!("{r}");
        }
        Ok((s, r))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// currentEpoch: the epoch of the last leader this server synced with (the vote's peerEpoch).
    pub fn current_epoch(&self) -> u64 {
        self.current_epoch
    }

    /// acceptedEpoch: the last epoch this server promised to (LEADERINFO).
    pub fn accepted_epoch(&self) -> u64 {
        self.accepted_epoch
    }

    /// The vote's zxid: logged txns, committed or not.
    pub fn last_logged_zxid(&self) -> u64 {
        self.log.last_zxid()
    }

    pub fn last_committed_zxid(&self) -> u64 {
        self.log.committed_zxid()
    }

    /// Committed entries with `zxid >= from`, for `GET /log?from=`.
    pub fn committed_from(&self, from: u64) -> Vec<LogEntry> {
        self.log
            .committed_from(from)
            .iter()
            .map(|t| LogEntry {
                zxid: t.zxid,
                value: t.value.clone(),
            })
            .collect()
    }

    pub fn txns(&self) -> &[Txn] {
        self.log.txns()
    }

    pub fn log(&self) -> &TxnLog {
        &self.log
    }

    pub fn log_mut(&mut self) -> &mut TxnLog {
        &mut self.log
    }

    pub fn order_counters(&self) -> OrderCounters {
        self.order
    }

    pub fn order_counters_mut(&mut self) -> &mut OrderCounters {
        &mut self.order
    }

    /// Durably records acceptedEpoch (before the server acts on it).
    pub fn set_accepted_epoch(&mut self, epoch: u64) -> anyhow::Result<()> {
        if epoch < self.accepted_epoch {
            anyhow::bail!(
                "refusing to move acceptedEpoch back from {} to {epoch}",
                self.accepted_epoch
            );
        }
        write_epoch(&self.dir.join(ACCEPTED_EPOCH_FILE), epoch)?;
        self.accepted_epoch = epoch;
        Ok(())
    }

    /// Durably records currentEpoch. Callers fsync the log first (ZOOKEEPER-4785).
    pub fn set_current_epoch(&mut self, epoch: u64) -> anyhow::Result<()> {
        // Either would leave files that no correct run produces (and that `open` refuses).
        if epoch < self.current_epoch || epoch > self.accepted_epoch {
            anyhow::bail!(
                "refusing currentEpoch {epoch}: it must lie between currentEpoch {} and acceptedEpoch {}",
                self.current_epoch,
                self.accepted_epoch
            );
        }
        write_epoch(&self.dir.join(CURRENT_EPOCH_FILE), epoch)?;
        self.current_epoch = epoch;
        Ok(())
    }
}

fn read_epoch(path: &Path) -> anyhow::Result<u64> {
    match std::fs::read_to_string(path) {
        Ok(text) => text.trim().parse::<u64>().map_err(|_| {
            anyhow::anyhow!(
                "{}: expected a decimal epoch, found {:?}; fix or remove the file (removing it \
                 means epoch 0)",
                path.display(),
                text.chars().take(40).collect::<String>()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn write_epoch(path: &Path, epoch: u64) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, format!("{epoch}\n").as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().with_context(|| format!("writing {}", path.display()))?;
    sync_parent(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_persist_and_start_at_zero() {
        let d = tempfile::tempdir().unwrap();
        let (mut s, r) = Store::open(d.path()).unwrap();
        assert!(r.is_none());
        assert_eq!((s.accepted_epoch(), s.current_epoch()), (0, 0));
        s.set_accepted_epoch(4).unwrap();
        s.set_current_epoch(3).unwrap();
        drop(s);
        let (s, _) = Store::open(d.path()).unwrap();
        assert_eq!((s.accepted_epoch(), s.current_epoch()), (4, 3));
        assert_eq!(
            std::fs::read_to_string(d.path().join(ACCEPTED_EPOCH_FILE)).unwrap(),
            "4\n"
        );
    }

    #[test]
    fn epochs_never_move_back() {
        let d = tempfile::tempdir().unwrap();
        let (mut s, _) = Store::open(d.path()).unwrap();
        s.set_accepted_epoch(3).unwrap();
        s.set_current_epoch(3).unwrap();
        assert!(s.set_accepted_epoch(2).is_err());
        assert!(s.set_current_epoch(2).is_err());
        assert!(s.set_current_epoch(4).is_err(), "current past accepted");
        assert_eq!((s.accepted_epoch(), s.current_epoch()), (3, 3));
        drop(s);
        let (s, _) = Store::open(d.path()).unwrap();
        assert_eq!((s.accepted_epoch(), s.current_epoch()), (3, 3));
    }

    #[test]
    fn accepted_below_current_is_fatal_and_explained() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(ACCEPTED_EPOCH_FILE), "2\n").unwrap();
        std::fs::write(d.path().join(CURRENT_EPOCH_FILE), "3\n").unwrap();
        let err = Store::open(d.path()).err().expect("refused").to_string();
        assert!(
            err.contains("acceptedEpoch 2 is less than currentEpoch 3"),
            "{err}"
        );
    }

    #[test]
    fn garbage_epoch_file_names_the_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(CURRENT_EPOCH_FILE), "seven").unwrap();
        let err = Store::open(d.path()).err().expect("refused").to_string();
        assert!(
            err.contains(CURRENT_EPOCH_FILE) && err.contains("seven"),
            "{err}"
        );
    }
}
