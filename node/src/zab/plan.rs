//! Sync planning: which of DIFF, TRUNC or SNAP brings a follower to the leader's history.
//!
//! Zxids are unique across the ensemble (epoch << 32 | counter), so a follower's log agrees with
//! the leader's up to the last zxid they share. ZooKeeper's rule, from the follower's last zxid:
//! - the leader has it: DIFF the txns after it;
//! - the follower is past the leader's end: TRUNC to the leader's end;
//! - it falls between two of the leader's txns (an uncommitted txn of an old epoch): TRUNC to the
//!   leader's txn just before it, then DIFF the rest (the ZOOKEEPER-1154 case);
//! - no history at all, nothing in common, or too many txns to send one by one: SNAP.

use crate::txnlog::Txn;
use crate::zab::actions::SyncMode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncPlan {
    pub mode: SyncMode,
    /// TRUNC's target zxid (0 for the other modes).
    pub trunc_to: u64,
    /// Index into the leader's history of the first txn to send.
    pub send_from: usize,
}

pub fn plan_sync(history: &[Txn], follower_last: u64, snap_threshold: usize) -> SyncPlan {
    let snap = SyncPlan {
        mode: SyncMode::Snap,
        trunc_to: 0,
        send_from: 0,
    };
    let leader_last = history.last().map_or(0, |t| t.zxid);
    if follower_last == 0 {
        return if history.is_empty() {
            SyncPlan {
                mode: SyncMode::Diff,
                trunc_to: 0,
                send_from: 0,
            }
        } else {
            snap
        };
    }
    if follower_last > leader_last {
        return SyncPlan {
            mode: SyncMode::Trunc,
            trunc_to: leader_last,
            send_from: history.len(),
        };
    }
    // First leader txn at or past the follower's end.
    let i = history.partition_point(|t| t.zxid < follower_last);
    let (plan, from) = if history[i].zxid == follower_last {
        let plan = SyncPlan {
            mode: SyncMode::Diff,
            trunc_to: 0,
            send_from: i + 1,
        };
        (plan, i + 1)
    } else if i == 0 {
        return snap;
    } else {
        let plan = SyncPlan {
            mode: SyncMode::Trunc,
            trunc_to: history[i - 1].zxid,
            send_from: i,
        };
        (plan, i)
    };
    if history.len() - from > snap_threshold {
        return snap;
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::make_zxid;
    use serde_json::json;

    fn hist(zxids: &[(u64, u64)]) -> Vec<Txn> {
        zxids
            .iter()
            .map(|&(e, c)| Txn {
                zxid: make_zxid(e, c),
                value: json!(c),
            })
            .collect()
    }

    #[test]
    fn table() {
        let h = hist(&[(1, 1), (1, 2), (2, 1), (2, 2)]);
        let z = make_zxid;
        // (history, follower last zxid, threshold, expected mode, trunc_to, send_from)
        type Case<'a> = (&'a [Txn], u64, usize, SyncMode, u64, usize);
        let cases: Vec<Case> = vec![
            (&h, z(2, 2), 100, SyncMode::Diff, 0, 4),
            (&h, z(1, 2), 100, SyncMode::Diff, 0, 2),
            (&h, z(1, 1), 100, SyncMode::Diff, 0, 1),
            (&h, z(1, 1), 2, SyncMode::Snap, 0, 0),
            (&h, 0, 100, SyncMode::Snap, 0, 0),
            (&[], 0, 100, SyncMode::Diff, 0, 0),
            (&h, z(2, 9), 100, SyncMode::Trunc, z(2, 2), 4),
            (&h, z(3, 1), 100, SyncMode::Trunc, z(2, 2), 4),
            (&[], z(1, 1), 100, SyncMode::Trunc, 0, 0),
            // An uncommitted txn of epoch 1 the new leader never saw.
            (&h, z(1, 3), 100, SyncMode::Trunc, z(1, 2), 2),
            (&h, z(0, 5), 100, SyncMode::Snap, 0, 0),
        ];
        for (i, (h, fl, th, mode, to, from)) in cases.into_iter().enumerate() {
            let p = plan_sync(h, fl, th);
            assert_eq!(
                p,
                SyncPlan {
                    mode,
                    trunc_to: to,
                    send_from: from
                },
                "case {i}"
            );
        }
    }
}
