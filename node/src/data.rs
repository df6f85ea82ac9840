//! The data tree: ZooKeeper's znodes cut down to `key -> (value, version, mzxid)`, which every
//! server builds from its own committed log and serves reads from (`GET /data/KEY`).
//!
//! A txn whose value is a [`DataOp`] changes the tree when applied, in zxid order: create makes
//! version 0 (refused if the key exists), set adds one to the version (refused if absent), cas
//! sets only on the expected version. Any other txn (the `writes` workload's integers) leaves it
//! as it is. The tree is a pure function of the committed log prefix; [`Tree`] is a cache of it
//! that applies only what was committed since, and starts over when the log no longer holds the
//! last txn it applied (a TRUNC or a SNAP replaced it). The leader answers a data op with the
//! [`Outcome`] its own tree recorded for the op's zxid.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Deserialize;
use serde_json::Value;

use crate::api::DataOp;
use crate::txnlog::Txn;
use crate::zab::store::{lock, SharedStore};

/// The longest key.
pub const MAX_KEY: usize = 64;

/// Outcomes kept for the leader's answers; an older one is replayed from the log.
const OUTCOMES_KEPT: usize = 4096;

/// Ok when `key` is 1-64 characters of `[a-z0-9_-]`; else the one line saying so.
pub fn check_key(key: &str) -> Result<(), String> {
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-';
    if key.is_empty() || key.len() > MAX_KEY || !key.bytes().all(allowed) {
        return Err(format!(
            "key {key:?}: a key is 1-{MAX_KEY} characters of a-z, 0-9, _ and -"
        ));
    }
    Ok(())
}

/// The op a txn's value carries, if the tree applies it (a [`DataOp`] with a valid key).
pub fn op_of(value: &Value) -> Option<DataOp> {
    let op = DataOp::deserialize(value).ok()?;
    check_key(op.key()).ok()?;
    Some(op)
}

/// One key as applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Znode {
    pub value: i64,
    /// 0 when created, one more at each change.
    pub version: i64,
    /// The zxid of the txn that last changed it.
    pub mzxid: u64,
}

/// What applying one data op did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The key is at `version` now.
    Changed { version: i64 },
    /// Nothing changed, and why (ZooKeeper's NodeExists, NoNode, BadVersion).
    Refused(String),
}

/// The tree as applied up to `applied` (see the module's comment).
#[derive(Debug, Default)]
pub struct Tree {
    nodes: BTreeMap<String, Znode>,
    /// The last txn applied (data op or not), 0 for none, and its value: the log must still
    /// hold both for the tree to carry on from here.
    applied: u64,
    applied_value: Value,
    /// Recent data ops' outcomes by zxid.
    outcomes: BTreeMap<u64, Outcome>,
    /// How often the cache started over (for tests and diagnostics).
    rebuilds: u64,
}

/// The tree shared by the HTTP handlers; lock it before the store, never the other way.
pub type SharedTree = Arc<Mutex<Tree>>;

impl Tree {
    pub fn get(&self, key: &str) -> Option<&Znode> {
        self.nodes.get(key)
    }

    /// The last txn applied (0 for none).
    pub fn applied(&self) -> u64 {
        self.applied
    }

    pub fn rebuilds(&self) -> u64 {
        self.rebuilds
    }

    /// What the data op at `zxid` did, if it was one and is still remembered.
    pub fn outcome(&self, zxid: u64) -> Option<&Outcome> {
        self.outcomes.get(&zxid)
    }

    /// Applies the next committed txn (zxids must increase); None when it is no data op.
    pub fn apply(&mut self, txn: &Txn) -> Option<Outcome> {
        self.applied = txn.zxid;
        self.applied_value = txn.value.clone();
        let outcome = self.apply_op(op_of(&txn.value)?, txn.zxid);
        self.outcomes.insert(txn.zxid, outcome.clone());
        if self.outcomes.len() > OUTCOMES_KEPT {
            self.outcomes.pop_first();
        }
        Some(outcome)
    }

    fn apply_op(&mut self, op: DataOp, zxid: u64) -> Outcome {
        let (key, expected, value) = match op {
            DataOp::Create { key, value } => {
                if self.nodes.contains_key(&key) {
                    return Outcome::Refused(format!("node exists: {key}"));
                }
                let version = 0;
                let node = Znode {
                    value,
                    version,
                    mzxid: zxid,
                };
                self.nodes.insert(key, node);
                return Outcome::Changed { version };
            }
            DataOp::Set { key, value } => (key, None, value),
            DataOp::Cas {
                key,
                version,
                value,
            } => (key, Some(version), value),
        };
        let Some(node) = self.nodes.get_mut(&key) else {
            return Outcome::Refused(format!("no node: {key}"));
        };
        if let Some(expected) = expected.filter(|v| *v != node.version) {
            return Outcome::Refused(format!(
                "bad version: expected {expected}, the key is at {}",
                node.version
            ));
        }
        node.value = value;
        node.version += 1;
        node.mzxid = zxid;
        Outcome::Changed {
            version: node.version,
        }
    }

    /// Brings the tree to `committed` (every committed txn, in zxid order): applies those after
    /// `applied`, or starts over when `committed` no longer holds the last txn applied.
    pub fn catch_up(&mut self, committed: &[Txn]) {
        if self.applied != 0 {
            let holds = committed
                .binary_search_by_key(&self.applied, |t| t.zxid)
                .is_ok_and(|i| committed[i].value == self.applied_value);
            if !holds {
                *self = Tree {
                    rebuilds: self.rebuilds + 1,
                    ..Tree::default()
                };
            }
        }
        let start = committed.partition_point(|t| t.zxid <= self.applied);
        for t in &committed[start..] {
            self.apply(t);
        }
    }

    /// What the data op at `zxid` did, replayed from `committed` (for an outcome no longer
    /// remembered); None when `committed` holds no data op at `zxid`.
    pub fn replay_outcome(committed: &[Txn], zxid: u64) -> Option<Outcome> {
        let mut tree = Tree::default();
        let end = committed.partition_point(|t| t.zxid <= zxid);
        let (last, before) = committed[..end].split_last()?;
        for t in before {
            tree.apply(t);
        }
        (last.zxid == zxid).then(|| tree.apply(last)).flatten()
    }
}

/// The tree caught up with `store`'s committed log, locked (the store only while catching up).
pub fn applied<'a>(tree: &'a SharedTree, store: &SharedStore) -> MutexGuard<'a, Tree> {
    let mut t = tree.lock().unwrap_or_else(|e| e.into_inner());
    t.catch_up(lock(store).log().committed_from(0));
    t
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn txn(zxid: u64, value: Value) -> Txn {
        Txn { zxid, value }
    }

    fn op(op: DataOp) -> Value {
        serde_json::to_value(op).unwrap()
    }

    fn create(key: &str, value: i64) -> Value {
        op(DataOp::Create {
            key: key.into(),
            value,
        })
    }

    fn set(key: &str, value: i64) -> Value {
        op(DataOp::Set {
            key: key.into(),
            value,
        })
    }

    fn cas(key: &str, version: i64, value: i64) -> Value {
        op(DataOp::Cas {
            key: key.into(),
            version,
            value,
        })
    }

    fn changed(version: i64) -> Option<Outcome> {
        Some(Outcome::Changed { version })
    }

    fn refused(why: &str) -> Option<Outcome> {
        Some(Outcome::Refused(why.into()))
    }

    #[test]
    fn create_set_and_cas_change_the_key_or_are_refused() {
        let mut t = Tree::default();
        assert_eq!(t.apply(&txn(1, set("k", 1))), refused("no node: k"));
        assert_eq!(t.apply(&txn(2, cas("k", 0, 1))), refused("no node: k"));
        assert_eq!(t.apply(&txn(3, create("k", 5))), changed(0));
        assert_eq!(t.apply(&txn(4, create("k", 6))), refused("node exists: k"));
        assert_eq!(t.apply(&txn(5, set("k", 7))), changed(1));
        assert_eq!(t.apply(&txn(6, cas("k", 1, 8))), changed(2));
        assert_eq!(
            t.apply(&txn(7, cas("k", 1, 9))),
            refused("bad version: expected 1, the key is at 2")
        );
        let k = t.get("k").unwrap();
        assert_eq!((k.value, k.version, k.mzxid), (8, 2, 6));
        assert_eq!(t.applied(), 7);
        assert_eq!(t.outcome(6), changed(2).as_ref());
        assert_eq!(
            t.outcome(7),
            refused("bad version: expected 1, the key is at 2").as_ref()
        );
    }

    #[test]
    fn txns_that_are_no_data_op_are_applied_as_nothing() {
        let mut t = Tree::default();
        let others = [
            json!(42),
            json!("x"),
            json!({"op": "create", "key": "BAD KEY", "value": 1}),
            json!({"op": "create", "key": "k"}),
            json!({"op": "delete", "key": "k"}),
            json!({"op": "create", "key": "k", "value": 1.5}),
        ];
        for (i, v) in others.into_iter().enumerate() {
            assert_eq!(t.apply(&txn(i as u64 + 1, v)), None);
        }
        assert_eq!(t.applied(), 6);
        assert!(t.nodes.is_empty() && t.outcomes.is_empty());
        assert_eq!(t.apply(&txn(7, create("k", 1))), changed(0));
    }

    #[test]
    fn catch_up_applies_only_what_is_new_and_rebuilds_after_a_truncation() {
        let mut log = vec![
            txn(1, create("a", 1)),
            txn(2, json!(7)),
            txn(3, set("a", 2)),
        ];
        let mut t = Tree::default();
        t.catch_up(&log[..2]);
        assert_eq!((t.applied(), t.get("a").unwrap().version), (2, 0));
        t.catch_up(&log);
        assert_eq!((t.applied(), t.get("a").unwrap().version), (3, 1));
        assert_eq!(t.rebuilds(), 0);
        // A TRUNC cut txn 3 and a new epoch's txns followed: start over from the log.
        log.truncate(2);
        log.push(txn(1 << 32 | 1, cas("a", 0, 9)));
        t.catch_up(&log);
        assert_eq!(t.rebuilds(), 1);
        let a = t.get("a").unwrap();
        assert_eq!((a.value, a.version, a.mzxid), (9, 1, 1 << 32 | 1));
        // The same zxid holding another txn (a SNAP from a diverged leader) is noticed too.
        let other = vec![txn(1, json!(0)), txn(1 << 32 | 1, create("b", 1))];
        t.catch_up(&other);
        assert_eq!(t.rebuilds(), 2);
        assert!(t.get("b").is_some() && t.get("a").is_none());
        // And a log shorter than what was applied (nothing committed yet after a SNAP).
        t.catch_up(&[]);
        assert_eq!((t.rebuilds(), t.applied()), (3, 0));
    }

    #[test]
    fn an_outcome_no_longer_kept_is_replayed_from_the_log() {
        let mut log = vec![txn(1, create("k", 0))];
        for z in 2..(OUTCOMES_KEPT as u64 + 10) {
            log.push(txn(z, set("k", z as i64)));
        }
        let mut t = Tree::default();
        t.catch_up(&log);
        assert_eq!(t.outcome(1), None);
        assert_eq!(Tree::replay_outcome(&log, 1), changed(0));
        assert_eq!(Tree::replay_outcome(&log, 5), changed(4));
        assert_eq!(Tree::replay_outcome(&log, 1 << 40), None);
        let with_int = [txn(1, json!(3))];
        assert_eq!(Tree::replay_outcome(&with_int, 1), None);
    }

    #[test]
    fn keys_are_checked() {
        for good in ["a", "k1", "a_b-c", &"x".repeat(64)] {
            assert!(check_key(good).is_ok(), "{good}");
        }
        for bad in ["", "K", "a b", "a/b", "é", &"x".repeat(65)] {
            let e = check_key(bad).unwrap_err();
            assert!(e.contains("1-64 characters") && !e.contains('\n'), "{e}");
        }
    }
}
