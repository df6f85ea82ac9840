//! The durable transaction log: one append-only file of checksummed records.
//!
//! A record is `u32 body length | u32 crc32(body) | body` (little-endian), the body
//! `u8 kind | u64 zxid | JSON value` (kind 1, a txn) or `u8 kind | u64 zxid` (kind 2, the commit
//! watermark). The file starts with an 8-byte magic so a wrong `--data-dir` is refused, not eaten.
//!
//! The commit watermark is persisted rather than recomputed: a server alone cannot tell which of
//! its logged txns were committed, and `/log` and `last_committed_zxid` must be truthful right
//! after a restart. Commit records get no fsync of their own; they ride on the next one, so a crash
//! can only make the watermark lag (under-claim), never claim a txn that was not committed.
//!
//! Durability is the caller's call: `append` writes to the OS, `sync` (or `sync_handle` outside a
//! lock) makes everything written so far durable. Zab ACKs only after that.
//!
//! On open, a torn or corrupt tail (short record, bad checksum, bad JSON, zxid out of order) is cut
//! off, fsynced, and returned as a [`TailRepair`] for the caller to log: never a crash, never kept.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};

const MAGIC: &[u8; 8] = b"FLELOG1\n";
const RECORD_HEADER: usize = 8;
const KIND_TXN: u8 = 1;
const KIND_COMMIT: u8 = 2;
/// Bodies larger than this are treated as corruption (a length field hit by a torn write).
pub const MAX_RECORD_BODY: usize = 64 << 20;

/// One logged transaction: its zxid and the client's value.
#[derive(Debug, Clone, PartialEq)]
pub struct Txn {
    pub zxid: u64,
    pub value: serde_json::Value,
}

/// What `open` cut off the end of the file, to be logged by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailRepair {
    pub path: PathBuf,
    /// Byte offset where the first bad record started (the new file length).
    pub offset: u64,
    pub dropped_bytes: u64,
    pub reason: String,
}

impl fmt::Display for TailRepair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "txnlog {}: truncated a torn or corrupt tail at byte {} ({} bytes dropped): {}",
            self.path.display(),
            self.offset,
            self.dropped_bytes,
            self.reason
        )
    }
}

/// The open log: the file plus an in-memory copy of every txn (the state machine is the list).
pub struct TxnLog {
    path: PathBuf,
    file: Arc<File>,
    len: u64,
    txns: Vec<Txn>,
    /// File offset of each txn's record, for TRUNC.
    offsets: Vec<u64>,
    committed: u64,
}

impl TxnLog {
    /// Opens (or creates) the log at `path`, repairing a bad tail.
    pub fn open(path: &Path) -> anyhow::Result<(TxnLog, Option<TailRepair>)> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .with_context(|| format!("opening txnlog {}", path.display()))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .with_context(|| format!("reading txnlog {}", path.display()))?;
        let scan = scan(&bytes).map_err(|e| {
            anyhow::anyhow!(
                "{} is not a fle-node txnlog ({e}); point --data-dir at a fle-node data directory or move the file away",
                path.display()
            )
        })?;
        let mut repair = None;
        if let Some(reason) = scan.bad_tail {
            file.set_len(scan.valid_len)
                .and_then(|_| file.sync_all())
                .with_context(|| format!("truncating the bad tail of {}", path.display()))?;
            repair = Some(TailRepair {
                path: path.to_path_buf(),
                offset: scan.valid_len,
                dropped_bytes: bytes.len() as u64 - scan.valid_len,
                reason,
            });
        }
        let mut len = scan.valid_len;
        if len == 0 {
            file.write_all(MAGIC)
                .and_then(|_| file.sync_all())
                .with_context(|| format!("writing the header of {}", path.display()))?;
            sync_parent(path)?;
            len = MAGIC.len() as u64;
        }
        let log = TxnLog {
            path: path.to_path_buf(),
            file: Arc::new(file),
            len,
            txns: scan.txns,
            offsets: scan.offsets,
            committed: scan.committed,
        };
        Ok((log, repair))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last logged zxid, committed or not (0 when empty).
    pub fn last_zxid(&self) -> u64 {
        self.txns.last().map_or(0, |t| t.zxid)
    }

    pub fn committed_zxid(&self) -> u64 {
        self.committed
    }

    pub fn txns(&self) -> &[Txn] {
        &self.txns
    }

    /// Committed txns with `zxid >= from`, in order.
    pub fn committed_from(&self, from: u64) -> &[Txn] {
        let start = self.txns.partition_point(|t| t.zxid < from);
        let end = self.txns.partition_point(|t| t.zxid <= self.committed);
        &self.txns[start..end.max(start)]
    }

    /// Writes txns to the OS (not yet durable). Zxids must increase past the last one
    /// ([`append_rule`]).
    pub fn append(&mut self, txns: &[Txn]) -> std::io::Result<()> {
        append_rule(self.last_zxid(), txns)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let mut buf = Vec::new();
        let mut offsets = Vec::with_capacity(txns.len());
        for t in txns {
            offsets.push(self.len + buf.len() as u64);
            encode_txn(&mut buf, t);
        }
        (&*self.file).write_all(&buf)?;
        self.len += buf.len() as u64;
        self.offsets.extend(offsets);
        self.txns.extend_from_slice(txns);
        Ok(())
    }

    /// Raises the commit watermark to `upto` (clamped to the last logged zxid).
    pub fn commit(&mut self, upto: u64) -> std::io::Result<()> {
        let upto = upto.min(self.last_zxid());
        if upto <= self.committed {
            return Ok(());
        }
        let mut buf = Vec::new();
        encode_record(&mut buf, KIND_COMMIT, upto, &[]);
        (&*self.file).write_all(&buf)?;
        self.len += buf.len() as u64;
        self.committed = upto;
        Ok(())
    }

    /// Makes everything written so far durable.
    pub fn sync(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }

    /// A handle to fsync without holding the log (or the lock around it).
    pub fn sync_handle(&self) -> Arc<File> {
        self.file.clone()
    }

    /// TRUNC: drops every txn after `zxid` (durably). Returns how many were dropped.
    pub fn truncate_after(&mut self, zxid: u64) -> std::io::Result<usize> {
        let keep = self.txns.partition_point(|t| t.zxid <= zxid);
        let dropped = self.txns.len() - keep;
        if dropped == 0 {
            return Ok(0);
        }
        let cut = self.offsets[keep];
        self.file.set_len(cut)?;
        self.len = cut;
        self.txns.truncate(keep);
        self.offsets.truncate(keep);
        // Commit records past the cut went with it; write the watermark again.
        let committed = std::mem::take(&mut self.committed).min(self.last_zxid());
        self.commit(committed)?;
        self.file.sync_all()?;
        Ok(dropped)
    }

    /// SNAP: replaces the whole log with `txns` (committed up to `committed`), atomically:
    /// a new file is written and fsynced, then renamed over the old one.
    pub fn reset(&mut self, txns: &[Txn], committed: u64) -> anyhow::Result<()> {
        let tmp = self.path.with_extension("snap.tmp");
        {
            let mut buf = MAGIC.to_vec();
            let mut last = 0;
            for t in txns {
                if t.zxid <= last {
                    bail!("snapshot zxid {:#x} does not follow {:#x}", t.zxid, last);
                }
                last = t.zxid;
                encode_txn(&mut buf, t);
            }
            let mut f =
                File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
            f.write_all(&buf)
                .and_then(|_| f.sync_all())
                .with_context(|| format!("writing {}", tmp.display()))?;
        }
        std::fs::rename(&tmp, &self.path)
            .with_context(|| format!("renaming {} over {}", tmp.display(), self.path.display()))?;
        sync_parent(&self.path)?;
        let (mut log, repair) = TxnLog::open(&self.path)?;
        if let Some(r) = repair {
            bail!("the snapshot just written is damaged: {r}");
        }
        log.commit(committed)?;
        log.sync()?;
        *self = log;
        Ok(())
    }
}

fn encode_txn(buf: &mut Vec<u8>, t: &Txn) {
    // Serializing a serde_json::Value cannot fail.
    let value = serde_json::to_vec(&t.value).unwrap_or_default();
    encode_record(buf, KIND_TXN, t.zxid, &value);
}

fn encode_record(buf: &mut Vec<u8>, kind: u8, zxid: u64, value: &[u8]) {
    let mut body = Vec::with_capacity(9 + value.len());
    body.push(kind);
    body.extend_from_slice(&zxid.to_le_bytes());
    body.extend_from_slice(value);
    buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
    buf.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    buf.extend_from_slice(&body);
}

/// A log image held in memory, as the simulator keeps a server's disk: the same records in the
/// same bytes as the file, so a power loss (the image cut to its fsynced length, maybe mid
/// record) is read back by the same repair rule `open` applies.
pub mod image {
    use super::{encode_record, encode_txn, scan, Txn, KIND_COMMIT, MAGIC};

    /// An empty log: just the header.
    pub fn empty() -> Vec<u8> {
        MAGIC.to_vec()
    }

    /// Appends txn records (what `TxnLog::append` writes).
    pub fn append(buf: &mut Vec<u8>, txns: &[Txn]) {
        for t in txns {
            encode_txn(buf, t);
        }
    }

    /// Appends a commit watermark record (what `TxnLog::commit` writes).
    pub fn commit(buf: &mut Vec<u8>, upto: u64) {
        encode_record(buf, KIND_COMMIT, upto, &[]);
    }

    /// What `open` would keep of these bytes.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Read {
        pub txns: Vec<Txn>,
        pub committed: u64,
        /// Length of the good prefix (the header included once repaired).
        pub valid_len: usize,
        /// Why the tail was cut, when it was.
        pub bad_tail: Option<String>,
    }

    /// Reads an image as `open` does; Err when the bytes are not a log at all.
    pub fn read(bytes: &[u8]) -> Result<Read, String> {
        let s = scan(bytes)?;
        Ok(Read {
            txns: s.txns,
            committed: s.committed,
            valid_len: (s.valid_len as usize).max(MAGIC.len()),
            bad_tail: s.bad_tail,
        })
    }
}

/// Decodes a log image held in memory, as `open` does after reading the file: the number of good
/// txns, the commit watermark and why the tail is bad (if it is); Err when it is not a log. The
/// fuzz bench feeds it arbitrary bytes: it never panics and allocates no more than the input.
pub fn decode_image(bytes: &[u8]) -> Result<(usize, u64, Option<String>), String> {
    scan(bytes).map(|s| (s.txns.len(), s.committed, s.bad_tail))
}

struct Scan {
    txns: Vec<Txn>,
    offsets: Vec<u64>,
    committed: u64,
    /// Length of the good prefix; 0 when even the header must be rewritten.
    valid_len: u64,
    bad_tail: Option<String>,
}

/// Reads every good record; stops at the first bad one. Errors only when the file is not a log.
fn scan(bytes: &[u8]) -> Result<Scan, String> {
    let mut s = Scan {
        txns: Vec::new(),
        offsets: Vec::new(),
        committed: 0,
        valid_len: 0,
        bad_tail: None,
    };
    if bytes.len() < MAGIC.len() {
        // A crash while creating the file leaves a prefix of the magic.
        if MAGIC.starts_with(bytes) {
            if !bytes.is_empty() {
                s.bad_tail = Some(format!("torn header ({} bytes)", bytes.len()));
            }
            return Ok(s);
        }
        return Err("bad magic".into());
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err("bad magic".into());
    }
    let mut pos = MAGIC.len();
    s.valid_len = pos as u64;
    while pos < bytes.len() {
        match read_record(&bytes[pos..], s.txns.last().map_or(0, |t| t.zxid)) {
            Ok((Record::Txn(t), used)) => {
                s.offsets.push(pos as u64);
                s.txns.push(t);
                pos += used;
            }
            Ok((Record::Commit(z), used)) => {
                s.committed = s.committed.max(z);
                pos += used;
            }
            Err(reason) => {
                s.bad_tail = Some(reason);
                break;
            }
        }
        s.valid_len = pos as u64;
    }
    Ok(s)
}

enum Record {
    Txn(Txn),
    Commit(u64),
}

fn read_record(b: &[u8], last_zxid: u64) -> Result<(Record, usize), String> {
    if b.len() < RECORD_HEADER {
        return Err(format!("torn record header ({} bytes)", b.len()));
    }
    let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    let crc = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    if !(9..=MAX_RECORD_BODY).contains(&len) {
        return Err(format!("impossible record length {len}"));
    }
    if b.len() < RECORD_HEADER + len {
        return Err(format!(
            "torn record: {len} body bytes announced, {} present",
            b.len() - RECORD_HEADER
        ));
    }
    let body = &b[RECORD_HEADER..RECORD_HEADER + len];
    if crc32fast::hash(body) != crc {
        return Err("checksum mismatch".into());
    }
    let mut z = [0u8; 8];
    z.copy_from_slice(&body[1..9]);
    let zxid = u64::from_le_bytes(z);
    let rec = match body[0] {
        KIND_TXN => {
            if zxid <= last_zxid {
                return Err(format!("txn zxid {zxid:#x} does not follow {last_zxid:#x}"));
            }
            let value = serde_json::from_slice(&body[9..])
                .map_err(|e| format!("txn {zxid:#x} holds bad JSON: {e}"))?;
            Record::Txn(Txn { zxid, value })
        }
        KIND_COMMIT if len == 9 => {
            if zxid > last_zxid {
                return Err(format!(
                    "commit watermark {zxid:#x} is past the last txn {last_zxid:#x}"
                ));
            }
            Record::Commit(zxid)
        }
        k => return Err(format!("unknown record kind {k} (length {len})")),
    };
    Ok((rec, RECORD_HEADER + len))
}

/// Replaces the file at `path` with `bytes` durably: a temporary file beside it (`tmp`),
/// fsynced, renamed over it, then the directory fsynced; a power loss leaves the old file or
/// the new one, never a mix.
pub fn write_durably(path: &Path, tmp: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let write = || -> std::io::Result<()> {
        let mut f = File::create(tmp)?;
        std::io::Write::write_all(&mut f, bytes)?;
        f.sync_all()?;
        std::fs::rename(tmp, path)
    };
    write().with_context(|| format!("writing {}", path.display()))?;
    sync_parent(path)
}

/// fsyncs the directory holding `path`, so a create or rename survives a crash.
pub fn sync_parent(path: &Path) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("fsyncing directory {}", dir.display()))
}

/// Whether `txns` may be appended to a log whose last zxid is `last`: each zxid must follow
/// the one before. The node's log and the simulated disk (`fle-chaos simulate`) both refuse by
/// this rule, and the node exits: an overlapping append is a bug of the machine above.
pub fn append_rule(last: u64, txns: &[Txn]) -> Result<(), String> {
    let mut last = last;
    for t in txns {
        if t.zxid <= last {
            return Err(format!("zxid {:#x} does not follow {:#x}", t.zxid, last));
        }
        last = t.zxid;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn txn(zxid: u64, v: i64) -> Txn {
        Txn {
            zxid,
            value: json!({ "v": v }),
        }
    }

    fn open(p: &Path) -> (TxnLog, Option<TailRepair>) {
        TxnLog::open(p).expect("open")
    }

    #[test]
    fn appended_txns_and_watermark_survive_reopen() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log");
        let (mut log, r) = open(&p);
        assert!(r.is_none());
        log.append(&[txn(1, 1), txn(2, 2), txn(5, 3)]).unwrap();
        log.commit(2).unwrap();
        log.sync().unwrap();
        drop(log);
        let (log, r) = open(&p);
        assert!(r.is_none());
        assert_eq!(log.txns(), &[txn(1, 1), txn(2, 2), txn(5, 3)]);
        assert_eq!(log.last_zxid(), 5);
        assert_eq!(log.committed_zxid(), 2);
        assert_eq!(log.committed_from(2), &[txn(2, 2)]);
        assert_eq!(log.committed_from(0).len(), 2);
        assert!(log.committed_from(3).is_empty());
    }

    #[test]
    fn append_refuses_zxids_out_of_order() {
        let d = tempfile::tempdir().unwrap();
        let (mut log, _) = open(&d.path().join("log"));
        log.append(&[txn(3, 1)]).unwrap();
        assert!(log.append(&[txn(3, 2)]).is_err());
        assert!(log.append(&[txn(4, 2), txn(4, 3)]).is_err());
        assert_eq!(log.last_zxid(), 3);
    }

    /// Every way the last record can be damaged: cut at each byte, or one byte flipped.
    #[test]
    fn damaged_tail_is_truncated_and_reported() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log");
        let (mut log, _) = open(&p);
        log.append(&[txn(1, 1), txn(2, 2)]).unwrap();
        log.sync().unwrap();
        let good_len = std::fs::metadata(&p).unwrap().len();
        log.append(&[txn(3, 3)]).unwrap();
        log.sync().unwrap();
        drop(log);
        let full = std::fs::read(&p).unwrap();
        let mut cases: Vec<Vec<u8>> = (good_len as usize + 1..full.len())
            .map(|n| full[..n].to_vec())
            .collect();
        for i in good_len as usize..full.len() {
            let mut b = full.clone();
            b[i] ^= 0x40;
            cases.push(b);
        }
        for (i, bytes) in cases.iter().enumerate() {
            std::fs::write(&p, bytes).unwrap();
            let (mut log, r) = open(&p);
            let r = r.unwrap_or_else(|| panic!("case {i}: damage not reported"));
            assert_eq!(r.offset, good_len, "case {i}: {r}");
            assert_eq!(log.last_zxid(), 2, "case {i}");
            assert_eq!(std::fs::metadata(&p).unwrap().len(), good_len, "case {i}");
            // The repaired log takes appends and reopens clean.
            log.append(&[txn(3, 9)]).unwrap();
            log.sync().unwrap();
            drop(log);
            let (log, r) = open(&p);
            assert!(r.is_none(), "case {i}");
            assert_eq!(log.txns().last(), Some(&txn(3, 9)));
        }
    }

    #[test]
    fn garbage_appended_is_cut() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log");
        let (mut log, _) = open(&p);
        log.append(&[txn(1, 1)]).unwrap();
        drop(log);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(&[0xff; 100]).unwrap();
        drop(f);
        let (log, r) = open(&p);
        let r = r.expect("reported");
        assert_eq!(r.dropped_bytes, 100);
        assert!(r.to_string().contains("impossible record length"), "{r}");
        assert_eq!(log.last_zxid(), 1);
    }

    #[test]
    fn torn_header_is_rewritten_and_foreign_file_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log");
        std::fs::write(&p, &MAGIC[..3]).unwrap();
        let (log, r) = open(&p);
        assert!(r.is_some());
        assert_eq!(log.last_zxid(), 0);
        drop(log);
        assert_eq!(std::fs::read(&p).unwrap(), MAGIC);
        std::fs::write(&p, b"hello, this is not a log").unwrap();
        let err = TxnLog::open(&p).err().expect("refused").to_string();
        assert!(err.contains("not a fle-node txnlog"), "{err}");
    }

    #[test]
    fn truncate_after_drops_the_tail_and_clamps_the_watermark() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log");
        let (mut log, _) = open(&p);
        log.append(&[txn(1, 1), txn(2, 2), txn(3, 3), txn(4, 4)])
            .unwrap();
        log.commit(3).unwrap();
        assert_eq!(log.truncate_after(2).unwrap(), 2);
        assert_eq!(log.truncate_after(2).unwrap(), 0);
        assert_eq!(log.last_zxid(), 2);
        assert_eq!(log.committed_zxid(), 2);
        log.append(&[txn(7, 7)]).unwrap();
        log.sync().unwrap();
        drop(log);
        let (log, r) = open(&p);
        assert!(r.is_none());
        let zxids: Vec<u64> = log.txns().iter().map(|t| t.zxid).collect();
        assert_eq!(zxids, vec![1, 2, 7]);
        assert_eq!(log.committed_zxid(), 2);
    }

    #[test]
    fn reset_replaces_everything() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log");
        let (mut log, _) = open(&p);
        log.append(&[txn(1, 1), txn(9, 9)]).unwrap();
        log.reset(&[txn(2, 2), txn(3, 3)], 3).unwrap();
        assert_eq!(log.last_zxid(), 3);
        log.append(&[txn(4, 4)]).unwrap();
        log.sync().unwrap();
        drop(log);
        let (log, r) = open(&p);
        assert!(r.is_none());
        assert_eq!(log.txns(), &[txn(2, 2), txn(3, 3), txn(4, 4)]);
        assert_eq!(log.committed_zxid(), 3);
        assert!(!d.path().join("log.snap.tmp").exists());
    }
}
