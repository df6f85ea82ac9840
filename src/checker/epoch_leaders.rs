//! Who led each epoch, as the status reads show it: the one definition election-safety and
//! ack-zxids both judge by.
//!
//! A server is shown to have led epoch e by a read of it LEADING e from sync on
//! (`Status::leads`), or by a read of a follower in broadcast following it in e
//! (`Status::follows`): a follower takes e as its currentEpoch at its leader's NEWLEADER, so
//! only the server that established e can have put it there. A leader killed within
//! milliseconds of syncing is often never read leading, but its followers are.
//!
//! Only the first read of each claim is kept (a claim changes rarely; reads come by millions).

use super::model::{Digest, NodeIx, Status};
use std::collections::BTreeMap;

/// How a read shows a server leading an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// The server itself was read LEADING the epoch (sync or broadcast).
    Leading,
    /// This node was read in broadcast following the server in the epoch.
    FollowedBy(NodeIx),
}

/// One read showing `sid` leading an epoch.
#[derive(Debug, Clone, Copy)]
pub struct Claim {
    pub sid: u64,
    pub shown: Shown,
    /// The first read that showed it.
    pub read: Status,
}

/// Per epoch, every distinct claim of who led it, in the order first seen.
#[derive(Debug, Default)]
pub struct EpochLeaders {
    by_epoch: BTreeMap<u64, Vec<Claim>>,
    /// Each node's previous (epoch, claim) read, so unchanged reads cost one comparison.
    last: Vec<Option<(u64, u64, Shown)>>,
    /// Each node's sid (read off its name once, not per read).
    sids: Vec<Option<u64>>,
}

impl EpochLeaders {
    /// No claims yet, for `d`'s nodes (feed it with `read`).
    pub fn new(d: &Digest) -> Self {
        EpochLeaders {
            by_epoch: BTreeMap::new(),
            last: vec![None; d.nodes.len()],
            sids: (0..d.nodes.len()).map(|i| d.sid(i as NodeIx)).collect(),
        }
    }

    /// Every claim the digest's status reads make.
    pub fn of(d: &Digest) -> Self {
        let mut el = EpochLeaders::new(d);
        for s in d.statuses() {
            el.read(s);
        }
        el
    }

    /// Adds what one status read claims (reads in history order).
    pub fn read(&mut self, s: &Status) {
        let claim = match (s.leads(), s.follows()) {
            (Some(e), _) => self.sids[s.node as usize].map(|sid| (e, sid, Shown::Leading)),
            (_, Some((l, e))) => Some((e, l, Shown::FollowedBy(s.node))),
            _ => None,
        };
        let Some((e, sid, shown)) = claim else { return };
        let last = &mut self.last[s.node as usize];
        if *last == Some((e, sid, shown)) {
            return;
        }
        *last = Some((e, sid, shown));
        let claims = self.by_epoch.entry(e).or_default();
        if !claims.iter().any(|c| c.sid == sid && c.shown == shown) {
            claims.push(Claim {
                sid,
                shown,
                read: *s,
            });
        }
    }

    /// Each epoch and its claims, in epoch order.
    pub fn epochs(&self) -> impl Iterator<Item = (u64, &[Claim])> + '_ {
        self.by_epoch.iter().map(|(e, c)| (*e, c.as_slice()))
    }

    /// The claims of epoch `e`.
    pub fn claims(&self, e: u64) -> &[Claim] {
        self.by_epoch.get(&e).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The distinct sids shown leading epoch `e`, in the order first seen.
    pub fn sids(&self, e: u64) -> Vec<u64> {
        let mut sids: Vec<u64> = Vec::new();
        for c in self.claims(e) {
            if !sids.contains(&c.sid) {
                sids.push(c.sid);
            }
        }
        sids
    }

    /// Whether some read shows `sid` leading epoch `e`.
    pub fn led(&self, e: u64, sid: u64) -> bool {
        self.claims(e).iter().any(|c| c.sid == sid)
    }

    /// Whether `node` was read in broadcast following some leader in epoch `e`.
    pub fn followed_in(&self, node: NodeIx, e: u64) -> bool {
        self.claims(e)
            .iter()
            .any(|c| c.shown == Shown::FollowedBy(node))
    }

    /// Whether `sid` was read LEADING epoch `e` itself (not only through its followers).
    pub fn read_leading(&self, e: u64, sid: u64) -> bool {
        self.claims(e)
            .iter()
            .any(|c| c.sid == sid && c.shown == Shown::Leading)
    }
}
