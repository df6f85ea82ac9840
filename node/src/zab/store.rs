//! `zab::Store`: what a server keeps on disk for Zab: the two epoch files and the txnlog.
//!
//! `acceptedEpoch` and `currentEpoch` are one-line text files written atomically (tmp file, fsync,
//! rename, fsync the directory), as ZooKeeper does, but checksummed: `crc32=XXXXXXXX N`, the
//! checksum of the decimal `N` first. A flipped digit in a bare `3` reads as another valid epoch
//! (a server that forgets a promise breaks Zab), so a damaged file must be detectable: any flip,
//! zeroed block or truncation of the checksummed line fails the check or the syntax, and the
//! server refuses to start, naming the file. A bare decimal (hand-written, or an older
//! fle-node's file) is still read; the checksum goes first so that no damage of a checksummed
//! file short of rewriting the whole prefix leaves a bare decimal behind. The election reads its vote from here
//! (`current_epoch`, `last_logged_zxid`) and the HTTP handlers read `/log` from here while a role
//! runs, hence [`SharedStore`]: every lock is short (no fsync of the log is done under it).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context;

use crate::api::LogEntry;
use crate::membership::{CommittedConfig, Membership};
use crate::txnlog::{write_durably, TailRepair, Txn, TxnLog};

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
    /// The newest reconfig committed in the log, read incrementally.
    config: CommittedConfig,
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
            config: CommittedConfig::default(),
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

    /// The newest config a committed reconfig txn of the log makes, if any.
    pub fn committed_config(&mut self) -> Option<Membership> {
        let committed = self.log.committed_zxid();
        self.config.refresh(self.log.txns(), committed).cloned()
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
        accepted_epoch_rule(self.accepted_epoch, epoch).map_err(anyhow::Error::msg)?;
        write_epoch(&self.dir.join(ACCEPTED_EPOCH_FILE), epoch)?;
        self.accepted_epoch = epoch;
        Ok(())
    }

    /// Durably records currentEpoch. Callers fsync the log first (ZOOKEEPER-4785).
    pub fn set_current_epoch(&mut self, epoch: u64) -> anyhow::Result<()> {
        current_epoch_rule(self.current_epoch, self.accepted_epoch, epoch)
            .map_err(anyhow::Error::msg)?;
        write_epoch(&self.dir.join(CURRENT_EPOCH_FILE), epoch)?;
        self.current_epoch = epoch;
        Ok(())
    }
}

/// Whether acceptedEpoch may move from `accepted` to `epoch`: never back. The node's store
/// and the simulated disk (`fle-chaos simulate`) both refuse by this rule, and the node exits.
pub fn accepted_epoch_rule(accepted: u64, epoch: u64) -> Result<(), String> {
    if epoch < accepted {
        return Err(format!(
            "refusing to move acceptedEpoch back from {accepted} to {epoch}"
        ));
    }
    Ok(())
}

/// Whether currentEpoch may become `epoch`: between currentEpoch and acceptedEpoch. Either
/// way out would leave files that no correct run produces (and that `open` refuses). Shared
/// with the simulated disk, as [`accepted_epoch_rule`].
pub fn current_epoch_rule(current: u64, accepted: u64, epoch: u64) -> Result<(), String> {
    if epoch < current || epoch > accepted {
        return Err(format!(
            "refusing currentEpoch {epoch}: it must lie between currentEpoch {current} and \
             acceptedEpoch {accepted}"
        ));
    }
    Ok(())
}

/// The text of an epoch file: `crc32=XXXXXXXX N` and a newline.
pub fn epoch_file_text(epoch: u64) -> String {
    let n = epoch.to_string();
    format!("crc32={:08x} {n}\n", crc32fast::hash(n.as_bytes()))
}

/// The epoch in an epoch file's text: a checksummed line, or a bare decimal.
pub fn parse_epoch_file(text: &str) -> Result<u64, String> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) {
        return line
            .parse()
            .map_err(|_| format!("{line} is too large for an epoch"));
    }
    let shown = || text.chars().take(40).collect::<String>();
    let (crc, n) = line
        .strip_prefix("crc32=")
        .and_then(|rest| rest.split_once(' '))
        .ok_or_else(|| {
            format!(
                "expected `crc32=XXXXXXXX N` or a decimal epoch, found {:?}",
                shown()
            )
        })?;
    let crc = u32::from_str_radix(crc, 16)
        .ok()
        .filter(|_| crc.len() == 8)
        .ok_or_else(|| format!("the checksum in {:?} is not 8 hex digits", shown()))?;
    let epoch: u64 = n
        .parse()
        .ok()
        .filter(|_| n.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("the epoch in {:?} is not a decimal number", shown()))?;
    if crc32fast::hash(n.as_bytes()) != crc {
        return Err(format!(
            "checksum mismatch in {:?}: the file was damaged after it was written",
            shown()
        ));
    }
    Ok(epoch)
}

fn read_epoch(path: &Path) -> anyhow::Result<u64> {
    match std::fs::read(path) {
        Ok(bytes) => parse_epoch_file(&String::from_utf8_lossy(&bytes)).map_err(|why| {
            anyhow::anyhow!(
                "{}: damaged epoch file: {why}; refusing to start rather than serve a wrong \
                 epoch (restore the data directory, or wipe it so this server rejoins with no \
                 history)",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn write_epoch(path: &Path, epoch: u64) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    write_durably(path, &tmp, epoch_file_text(epoch).as_bytes())
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
            epoch_file_text(4)
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
    fn any_damage_of_a_written_epoch_file_is_refused_never_misread() {
        // Every single-bit flip, every truncation and every zeroed run of a file the server
        // wrote: each is refused or reads back the true epoch, never another number.
        for epoch in [0u64, 3, 12, 907, 18_446_744_073_709_551_615] {
            let good = epoch_file_text(epoch).into_bytes();
            let mut variants: Vec<Vec<u8>> = Vec::new();
            for i in 0..good.len() {
                for bit in 0..8 {
                    let mut v = good.clone();
                    v[i] ^= 1 << bit;
                    variants.push(v);
                }
                variants.push(good[..i].to_vec());
                for len in 1..=good.len() - i {
                    let mut v = good.clone();
                    v[i..i + len].fill(0);
                    variants.push(v);
                }
            }
            for v in variants {
                match parse_epoch_file(&String::from_utf8_lossy(&v)) {
                    Err(_) => {}
                    Ok(e) => assert_eq!(e, epoch, "{:?} read as {e}", String::from_utf8_lossy(&v)),
                }
            }
        }
        assert_eq!(parse_epoch_file("7\n"), Ok(7), "a bare decimal still reads");
        assert_eq!(parse_epoch_file("7"), Ok(7));
    }

    #[test]
    fn a_damaged_epoch_file_stops_the_store_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let (mut s, _) = Store::open(d.path()).unwrap();
        s.set_accepted_epoch(13).unwrap();
        drop(s);
        let path = d.path().join(ACCEPTED_EPOCH_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let last_digit = bytes.len() - 2;
        bytes[last_digit] ^= 1; // "13" -> "12": a valid-looking, wrong epoch
        std::fs::write(&path, &bytes).unwrap();
        let err = format!("{:#}", Store::open(d.path()).err().expect("refused"));
        assert!(
            err.contains(ACCEPTED_EPOCH_FILE) && err.contains("checksum mismatch"),
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
