//! A vote and ZooKeeper's order on votes (`totalOrderPredicate`).
//!
//! The order is lexicographic on (peerEpoch, zxid, sid): a newer epoch wins first, then the
//! longer log, then the larger server id. The seed's four PK rules are the (zxid, sid) part.

use crate::bugs::{Bug, Bugs};

/// A proposal for a leader: who, with what last zxid, in which epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vote {
    pub leader: u64,
    pub zxid: u64,
    pub peer_epoch: u64,
}

impl Vote {
    pub fn new(leader: u64, zxid: u64, peer_epoch: u64) -> Self {
        Vote {
            leader,
            zxid,
            peer_epoch,
        }
    }

    /// An observer's vote: ZooKeeper's `Long.MIN_VALUE` in every field (the same bytes on the
    /// wire). It proposes no one; every real vote beats it and it beats none (ZooKeeper's
    /// signed comparison, which the unsigned tuple below needs told).
    pub const NONE: Vote = Vote {
        leader: i64::MIN as u64,
        zxid: i64::MIN as u64,
        peer_epoch: i64::MIN as u64,
    };

    pub fn is_none(&self) -> bool {
        *self == Vote::NONE
    }

    /// True when `self` should replace `current` as a server's proposal.
    pub fn beats(&self, current: &Vote) -> bool {
        if self.is_none() || current.is_none() {
            return current.is_none() && !self.is_none();
        }
        // Tuple order is exactly ZooKeeper's predicate; ZOOKEEPER-1419 came from hand-writing it.
        (self.peer_epoch, self.zxid, self.leader)
            > (current.peer_epoch, current.zxid, current.leader)
    }

    /// `beats`, unless the seeded `vote-order-not-total` bug is on.
    pub fn beats_under(&self, current: &Vote, bugs: Bugs) -> bool {
        if bugs.has(Bug::VoteOrderNotTotal) && !self.is_none() && !current.is_none() {
            // ZOOKEEPER-1419: the sid clause forgot `newEpoch == curEpoch`, so a larger sid with
            // the same zxid beats a vote of a NEWER epoch, and that vote beats it back.
            return self.peer_epoch > current.peer_epoch
                || (self.peer_epoch == current.peer_epoch && self.zxid > current.zxid)
                || (self.zxid == current.zxid && self.leader > current.leader);
        }
        self.beats(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(leader: u64, zxid: u64) -> Vote {
        Vote::new(leader, zxid, 0)
    }

    #[test]
    fn an_observers_vote_loses_to_every_real_vote() {
        let real = v(1, 0);
        assert!(real.beats(&Vote::NONE) && !Vote::NONE.beats(&real));
        assert!(!Vote::NONE.beats(&Vote::NONE));
        let bugs = Bugs::of(&[Bug::VoteOrderNotTotal]);
        assert!(real.beats_under(&Vote::NONE, bugs) && !Vote::NONE.beats_under(&real, bugs));
    }

    #[test]
    fn seed_rule_1_larger_zxid_is_adopted() {
        assert!(v(1, 9).beats(&v(3, 8)));
    }

    #[test]
    fn seed_rule_2_smaller_zxid_is_not_adopted() {
        assert!(!v(5, 8).beats(&v(3, 9)));
    }

    #[test]
    fn seed_rule_3_equal_zxid_larger_sid_is_adopted() {
        assert!(v(2, 0).beats(&v(1, 0)));
    }

    #[test]
    fn seed_rule_4_equal_zxid_smaller_sid_is_not_adopted() {
        assert!(!v(1, 0).beats(&v(2, 0)));
        assert!(!v(2, 0).beats(&v(2, 0)), "a vote never beats itself");
    }

    #[test]
    fn peer_epoch_comes_before_zxid_and_sid() {
        let newer_epoch = Vote::new(1, 1, 3);
        let longer_log = Vote::new(5, 0xffff_ffff, 2);
        assert!(newer_epoch.beats(&longer_log));
        assert!(!longer_log.beats(&newer_epoch));
    }

    /// ZOOKEEPER-1419's predicate: equal zxid, different peerEpoch, and each vote beats the
    /// other; the correct order picks the newer epoch only.
    #[test]
    fn seeded_vote_order_not_total_makes_two_votes_beat_each_other() {
        let bug = Bugs::of(&[Bug::VoteOrderNotTotal]);
        let newer_epoch = Vote::new(1, 7, 2);
        let larger_sid = Vote::new(3, 7, 1);
        assert!(newer_epoch.beats_under(&larger_sid, bug));
        assert!(larger_sid.beats_under(&newer_epoch, bug), "the cycle");
        assert!(newer_epoch.beats_under(&larger_sid, Bugs::none()));
        assert!(!larger_sid.beats_under(&newer_epoch, Bugs::none()));
        // Where epochs or zxids settle it, the bug agrees with the correct order.
        assert!(!v(1, 0).beats_under(&v(2, 0), bug));
        assert!(Vote::new(1, 9, 1).beats_under(&Vote::new(3, 7, 1), bug));
    }

    fn any_vote() -> impl Strategy<Value = Vote> {
        // Small ranges so that ties on each component happen often.
        (0u64..4, 0u64..4, 0u64..4).prop_map(|(l, z, e)| Vote::new(l, z, e))
    }

    proptest! {
        #[test]
        fn order_is_total_and_antisymmetric(a in any_vote(), b in any_vote()) {
            let ab = a.beats(&b);
            let ba = b.beats(&a);
            prop_assert!(!(ab && ba), "both {a:?} and {b:?} beat each other");
            prop_assert!(ab || ba || a == b, "{a:?} and {b:?} are incomparable");
        }

        #[test]
        fn order_is_transitive(a in any_vote(), b in any_vote(), c in any_vote()) {
            if a.beats(&b) && b.beats(&c) {
                prop_assert!(a.beats(&c));
            }
        }
    }
}
