//! A simulated server's disk: the txnlog as the bytes fle-node writes (`txnlog::image`), what
//! of them is fsynced, and the two epoch files.
//!
//! The bytes are the node's own format so that what a power loss leaves (the image cut back to
//! its fsynced length, maybe inside a record) is read back by the node's own repair rule. What
//! is durable follows `zab::actions`: appends and commit records reach the page cache and are
//! durable at the next `Sync`; TRUNC, SNAP and the epoch files are written durably at once.
//! A kill keeps the page cache (the kernel still holds it); a power loss drops it. The
//! `corrupt` fault damages the txnlog's bytes by the real fault's own rule.

use crate::control::fault::corrupt::{damage, Damage};
use fle_node::txnlog::{append_rule, image, Txn};
use fle_node::zab::actions::PersistOp;
use fle_node::zab::store::{accepted_epoch_rule, current_epoch_rule};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// How long the txnlog's fsync took on this project's test machine (2 cores, ext4 on a
/// virtio disk): `fdatasync` after appending a 96-byte record, 10,000 times. Each row: the
/// fraction of fsyncs (in 1/10,000) that took at most that many µs, from the fastest to the
/// slowest, finer in the tail (docs/simulate.md names the command).
const FSYNC_QUANTILES_US: [(u64, u64); 13] = [
    (0, 90),
    (1_000, 97),
    (2_000, 99),
    (3_000, 103),
    (4_000, 104),
    (5_000, 105),
    (6_000, 106),
    (7_000, 111),
    (8_000, 114),
    (9_000, 128),
    (9_900, 159),
    (9_990, 217),
    (10_000, 483),
];

/// One fsync's duration in ns, drawn from the measured quantiles (uniform between two
/// neighbours), so a run's fsyncs take what the real node's take here, their tail included.
pub fn fsync_ns(rng: &mut ChaCha8Rng) -> u64 {
    let r: u64 = rng.gen_range(0..10_000);
    let i = FSYNC_QUANTILES_US.partition_point(|&(p, _)| p <= r) - 1;
    let ((p0, low), (p1, high)) = (FSYNC_QUANTILES_US[i], FSYNC_QUANTILES_US[i + 1]);
    low * 1_000 + (high - low) * 1_000 * (r - p0) / (p1 - p0)
}

#[derive(Debug, Clone)]
pub struct Disk {
    bytes: Vec<u8>,
    /// How much of `bytes` an fsync has made durable.
    durable: usize,
    pub accepted_epoch: u64,
    pub current_epoch: u64,
    /// The log as the running server holds it (what `bytes` decode to).
    txns: Vec<Txn>,
    committed: u64,
    /// The last zxid of the durable part of the log (the oracle's ground truth for an ACK).
    durable_zxid: u64,
}

/// What a server finds on its disk when it starts.
#[derive(Debug, Clone)]
pub struct Found {
    pub accepted_epoch: u64,
    pub current_epoch: u64,
    pub txns: Vec<Txn>,
    pub committed: u64,
    /// Why the log's tail was cut on open, when it was.
    pub repaired: Option<String>,
}

impl Default for Disk {
    fn default() -> Self {
        let bytes = image::empty();
        Disk {
            durable: bytes.len(),
            bytes,
            accepted_epoch: 0,
            current_epoch: 0,
            txns: Vec::new(),
            committed: 0,
            durable_zxid: 0,
        }
    }
}

impl Disk {
    pub fn txns(&self) -> &[Txn] {
        &self.txns
    }

    pub fn last_zxid(&self) -> u64 {
        self.txns.last().map_or(0, |t| t.zxid)
    }

    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// The last zxid an fsync (or a durable rewrite) has made durable: what survives a power
    /// loss now.
    pub fn durable_zxid(&self) -> u64 {
        self.durable_zxid
    }

    /// Whether anything written is not yet durable.
    pub fn unsynced(&self) -> bool {
        self.durable < self.bytes.len()
    }

    /// Performs one persistence step as `zab::exec` does, refusing what the node's store
    /// refuses (its own rules: `zab::store::accepted_epoch_rule`, `current_epoch_rule`,
    /// `txnlog::append_rule`); a refusal is the node's exit, the caller's to record.
    pub fn persist(&mut self, op: PersistOp) -> Result<(), String> {
        match op {
            PersistOp::AcceptedEpoch(e) => {
                accepted_epoch_rule(self.accepted_epoch, e)?;
                self.accepted_epoch = e;
            }
            PersistOp::CurrentEpoch(e) => {
                current_epoch_rule(self.current_epoch, self.accepted_epoch, e)?;
                self.current_epoch = e;
            }
            PersistOp::Append(txns) => {
                append_rule(self.last_zxid(), &txns).map_err(|e| format!("appending: {e}"))?;
                image::append(&mut self.bytes, &txns);
                self.txns.extend(txns);
            }
            PersistOp::Commit(z) => {
                let upto = z.min(self.last_zxid());
                if upto > self.committed {
                    image::commit(&mut self.bytes, upto);
                    self.committed = upto;
                }
            }
            PersistOp::Truncate(z) => {
                self.txns.retain(|t| t.zxid <= z);
                let committed = self.committed.min(z);
                self.rewrite(committed);
            }
            PersistOp::Reset(txns) => {
                self.txns = txns;
                self.rewrite(0);
            }
        }
        Ok(())
    }

    /// Rewrites the image from the log (TRUNC and SNAP are durable at once).
    fn rewrite(&mut self, committed: u64) {
        let mut bytes = image::empty();
        image::append(&mut bytes, &self.txns);
        self.committed = 0;
        if committed > 0 {
            image::commit(&mut bytes, committed);
            self.committed = committed;
        }
        self.bytes = bytes;
        self.durable = self.bytes.len();
        self.durable_zxid = self.last_zxid();
    }

    /// fsync: everything written so far is durable.
    pub fn sync(&mut self) {
        self.durable = self.bytes.len();
        self.durable_zxid = self.last_zxid();
    }

    /// A power loss: the page cache is gone. `torn` keeps that many bytes of the unsynced
    /// tail (a write the disk had half done). Returns how many bytes were lost.
    pub fn power_loss(&mut self, torn: usize) -> usize {
        let keep = (self.durable + torn).min(self.bytes.len());
        let lost = self.bytes.len() - keep;
        self.bytes.truncate(keep);
        lost
    }

    /// The `corrupt` fault on the txnlog of a stopped server: its file (page cache included,
    /// as a killed process leaves it) damaged as the real fault damages it
    /// (`control::fault::corrupt::damage`); the node's own open repairs it at the restart. A
    /// log of its header alone is left alone (Err): the damage may then hit the header, and a
    /// real node refuses such a file at start, which the simulator does not model.
    pub fn corrupt(&mut self, seed: u64) -> Result<Damage, String> {
        if self.bytes.len() <= image::empty().len() {
            return Err(
                "data/txnlog holds only its header (a damaged header makes fle-node refuse to \
                 start, which the simulator does not model)"
                    .into(),
            );
        }
        let d = damage("data/txnlog", &mut self.bytes, seed);
        self.durable = self.durable.min(self.bytes.len());
        Ok(d)
    }

    /// What a server starting on this disk reads (the node's own open and tail repair).
    pub fn open(&mut self) -> Found {
        let read = image::read(&self.bytes).unwrap_or_else(|why| image::Read {
            txns: Vec::new(),
            committed: 0,
            valid_len: image::empty().len(),
            bad_tail: Some(why),
        });
        if read.bad_tail.is_some() {
            self.bytes.truncate(read.valid_len);
            if self.bytes.len() < image::empty().len() {
                self.bytes = image::empty();
            }
        }
        self.durable = self.bytes.len();
        self.txns = read.txns.clone();
        self.committed = read.committed;
        self.durable_zxid = self.last_zxid();
        Found {
            accepted_epoch: self.accepted_epoch,
            current_epoch: self.current_epoch,
            txns: read.txns,
            committed: read.committed,
            repaired: read.bad_tail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use serde_json::json;

    #[test]
    fn fsyncs_take_what_the_measured_quantiles_say() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut draws: Vec<u64> = (0..100_000).map(|_| fsync_ns(&mut rng)).collect();
        draws.sort_unstable();
        let (first, last) = (FSYNC_QUANTILES_US[0], FSYNC_QUANTILES_US[12]);
        assert!(draws[0] >= first.1 * 1_000, "{}", draws[0]);
        assert!(draws[draws.len() - 1] <= last.1 * 1_000);
        // Each measured quantile of the draws falls between the measured values around it.
        for w in FSYNC_QUANTILES_US.windows(3) {
            let ((_, below), (p, _), (_, above)) = (w[0], w[1], w[2]);
            let d = draws[(p as usize) * 10] / 1_000;
            assert!(
                (below..=above).contains(&d),
                "at {p}/10,000: {d} µs, not within {below}..={above}"
            );
        }
    }

    fn txn(zxid: u64) -> Txn {
        Txn {
            zxid,
            value: json!(zxid),
        }
    }

    #[test]
    fn a_power_loss_keeps_what_was_fsynced_and_a_torn_record_is_cut() {
        let mut d = Disk::default();
        d.persist(PersistOp::Append(vec![txn(1), txn(2)])).unwrap();
        d.sync();
        d.persist(PersistOp::Append(vec![txn(3)])).unwrap();
        d.persist(PersistOp::Commit(3)).unwrap();
        assert!(d.unsynced());
        assert!(d.power_loss(5) > 0);
        let found = d.open();
        assert_eq!(found.txns, vec![txn(1), txn(2)]);
        assert!(
            found.repaired.is_some(),
            "the torn record is cut by the node's rule"
        );
        assert_eq!(found.committed, 0);
    }

    #[test]
    fn a_kill_keeps_the_page_cache_and_trunc_is_durable_at_once() {
        let mut d = Disk::default();
        d.persist(PersistOp::Append(vec![txn(1), txn(2), txn(3)]))
            .unwrap();
        d.persist(PersistOp::Commit(2)).unwrap();
        let found = d.clone().open();
        assert_eq!((found.txns.len(), found.committed), (3, 2));
        d.persist(PersistOp::Truncate(1)).unwrap();
        d.power_loss(0);
        let found = d.open();
        assert_eq!((found.txns, found.committed), (vec![txn(1)], 1));
    }

    #[test]
    fn a_corrupted_log_opens_as_a_prefix_of_what_it_held_by_the_nodes_rule() {
        let txns: Vec<Txn> = (1..=20).map(txn).collect();
        let mut repaired = 0;
        for seed in 0..40 {
            let mut d = Disk::default();
            assert!(d.corrupt(seed).is_err(), "a header alone is left alone");
            d.persist(PersistOp::Append(txns.clone())).unwrap();
            d.persist(PersistOp::Commit(20)).unwrap();
            d.sync();
            let damage = d.corrupt(seed).expect("a log with records is damaged");
            assert_eq!(damage.file, "data/txnlog");
            let found = d.open();
            assert!(
                found.txns.len() < txns.len() || found.committed < 20,
                "{damage:?}"
            );
            assert_eq!(found.txns[..], txns[..found.txns.len()], "{damage:?}");
            repaired += found.repaired.is_some() as usize;
            // The repaired file is what the server holds.
            assert_eq!(d.clone().open().txns, found.txns);
        }
        assert!(repaired > 0, "some damage leaves a bad tail to cut");
    }
}
