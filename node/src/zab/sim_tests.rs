//! Randomized simulation of the pure machines: three servers, FIFO links, crashes that lose
//! the role (and, for a crashed server, everything not yet fsynced), elections by FLE's rule
//! (highest (currentEpoch, last logged zxid, sid) among the live servers), random ticks, writes
//! and deliveries. Checked at the end: every acknowledged write is in every log at its zxid and
//! the logs are identical. Seeds are fixed, so a failure replays.

use std::collections::{BTreeMap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use crate::txnlog::Txn;
use crate::zab::actions::{Output, PersistOp};
use crate::zab::follower::{Follower, FollowerConfig};
use crate::zab::leader::{Leader, LeaderConfig};
use crate::zab::messages::Msg;

const N: u64 = 3;
const QUORUM: usize = 2;

#[derive(Default, Clone)]
struct Disk {
    accepted: u64,
    current: u64,
    log: Vec<Txn>,
    committed: u64,
}

enum Role {
    Down,
    Looking,
    Leading(Box<Leader>),
    Following(u64, Box<Follower>),
}

struct Sim {
    rng: ChaCha8Rng,
    disks: BTreeMap<u64, Disk>,
    roles: BTreeMap<u64, Role>,
    /// FIFO link per (from, to) for the current connections.
    links: BTreeMap<(u64, u64), VecDeque<Msg>>,
    /// Proposed by the current leader, not yet committed: acknowledged on its commit.
    pending: BTreeMap<u64, serde_json::Value>,
    acked: BTreeMap<u64, serde_json::Value>,
    next_value: u64,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        Sim {
            rng: ChaCha8Rng::seed_from_u64(seed),
            disks: (1..=N).map(|s| (s, Disk::default())).collect(),
            roles: (1..=N).map(|s| (s, Role::Looking)).collect(),
            links: BTreeMap::new(),
            pending: BTreeMap::new(),
            acked: BTreeMap::new(),
            next_value: 0,
        }
    }

    fn leader(&self) -> Option<u64> {
        self.roles
            .iter()
            .find(|(_, r)| matches!(r, Role::Leading(_)))
            .map(|(s, _)| *s)
    }

    /// Every step's outputs are performed completely (fsync included) before the next step.
    fn apply(&mut self, sid: u64, outputs: Vec<Output>) {
        let mut queue: VecDeque<Output> = outputs.into();
        while let Some(o) = queue.pop_front() {
            let disk = self.disks.get_mut(&sid).unwrap();
            match o {
                Output::Send(to, m) => {
                    let to = match self.roles.get(&sid) {
                        Some(Role::Following(l, _)) => *l,
                        _ => to,
                    };
                    if let Some(q) = self.links.get_mut(&(sid, to)) {
                        q.push_back(m);
                    }
                }
                Output::Close(peer, _) => self.cut(sid, peer),
                Output::Persist(op) => match op {
                    PersistOp::AcceptedEpoch(e) => {
                        assert!(e >= disk.accepted);
                        disk.accepted = e
                    }
                    PersistOp::CurrentEpoch(e) => {
                        assert!(e >= disk.current && e <= disk.accepted);
                        disk.current = e
                    }
                    PersistOp::Append(t) => {
                        for x in &t {
                            assert!(x.zxid > disk.log.last().map_or(0, |l| l.zxid));
                        }
                        disk.log.extend(t)
                    }
                    PersistOp::Truncate(z) => {
                        disk.log.retain(|t| t.zxid <= z);
                        disk.committed = disk.committed.min(z);
                    }
                    PersistOp::Reset(t) => {
                        disk.log = t;
                        disk.committed = 0;
                    }
                    PersistOp::Commit(z) => {
                        disk.committed = disk
                            .committed
                            .max(z.min(disk.log.last().map_or(0, |t| t.zxid)))
                    }
                },
                Output::Sync { self_ack } => {
                    if let (Some(z), Some(Role::Leading(l))) = (self_ack, self.roles.get_mut(&sid))
                    {
                        queue.extend(l.self_durable(z));
                    }
                }
                // The sim performs every step completely: its disk has no page cache to lose.
                Output::BatchSync => {}
                Output::Committed(z) => {
                    let rest = self.pending.split_off(&(z + 1));
                    let done = std::mem::replace(&mut self.pending, rest);
                    self.acked.extend(done);
                }
                Output::StepDown(_) => self.end_role(sid),
            }
        }
    }

    /// Closes the connection between two servers; a follower that loses its leader looks again.
    fn cut(&mut self, a: u64, b: u64) {
        self.links.remove(&(a, b));
        self.links.remove(&(b, a));
        for (x, y) in [(a, b), (b, a)] {
            match self.roles.get_mut(&x) {
                Some(Role::Leading(l)) => {
                    let out = l.disconnected(y);
                    self.apply(x, out);
                }
                Some(Role::Following(leader, _)) if *leader == y => {
                    self.roles.insert(x, Role::Looking);
                }
                _ => {}
            }
        }
    }

    fn end_role(&mut self, sid: u64) {
        if matches!(self.roles.get(&sid), Some(Role::Leading(_))) {
            // Outcome unknown for what it had not committed: not acknowledged.
            self.pending.clear();
        }
        let peers: Vec<(u64, u64)> = self
            .links
            .keys()
            .copied()
            .filter(|(a, b)| *a == sid || *b == sid)
            .collect();
        if !matches!(self.roles.get(&sid), Some(Role::Down)) {
            self.roles.insert(sid, Role::Looking);
        }
        for (a, b) in peers {
            self.cut(a, b);
        }
    }

    fn crash(&mut self, sid: u64) {
        self.end_role(sid);
        self.roles.insert(sid, Role::Down);
    }

    /// FLE's outcome among the servers that are up, as long as they are a quorum.
    fn elect(&mut self) {
        let up: Vec<u64> = self
            .roles
            .iter()
            .filter(|(_, r)| !matches!(r, Role::Down))
            .map(|(s, _)| *s)
            .collect();
        let leader = match self.leader() {
            Some(l) => l,
            None => {
                if up.len() < QUORUM {
                    return;
                }
                let best = up
                    .iter()
                    .map(|s| {
                        let d = &self.disks[s];
                        (d.current, d.log.last().map_or(0, |t| t.zxid), *s)
                    })
                    .max()
                    .unwrap()
                    .2;
                let d = self.disks[&best].clone();
                let mut l = Leader::new(
                    LeaderConfig {
                        sid: best,
                        quorum: QUORUM,
                        observers: Default::default(),
                        init_limit_beats: 20,
                        sync_limit_beats: 10,
                        snap_threshold: 3,
                        bugs: crate::bugs::Bugs::none(),
                    },
                    d.accepted,
                    d.current,
                    d.log,
                    d.committed,
                );
                let out = l.start();
                self.roles.insert(best, Role::Leading(Box::new(l)));
                self.apply(best, out);
                best
            }
        };
        for s in up {
            if matches!(self.roles.get(&s), Some(Role::Looking)) {
                let d = &self.disks[&s];
                let mut f = Follower::new(
                    FollowerConfig {
                        sid: s,
                        leader,
                        observer: false,
                        init_limit_beats: 20,
                        sync_limit_beats: 10,
                        bugs: crate::bugs::Bugs::none(),
                    },
                    d.accepted,
                    d.current,
                    d.log.last().map_or(0, |t| t.zxid),
                    d.committed,
                );
                self.links.insert((s, leader), VecDeque::new());
                self.links.insert((leader, s), VecDeque::new());
                let out = f.start();
                self.roles.insert(s, Role::Following(leader, Box::new(f)));
                self.apply(s, out);
            }
        }
    }

    fn deliver_one(&mut self) -> bool {
        let ready: Vec<(u64, u64)> = self
            .links
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(k, _)| *k)
            .collect();
        if ready.is_empty() {
            return false;
        }
        let (from, to) = ready[self.rng.gen_range(0..ready.len())];
        let m = self
            .links
            .get_mut(&(from, to))
            .unwrap()
            .pop_front()
            .unwrap();
        let out = match self.roles.get_mut(&to) {
            Some(Role::Leading(l)) => l.step(from, m),
            Some(Role::Following(_, f)) => f.step(m),
            _ => return true,
        };
        self.apply(to, out);
        true
    }

    fn tick(&mut self, sid: u64) {
        let out = match self.roles.get_mut(&sid) {
            Some(Role::Leading(l)) => l.tick(),
            Some(Role::Following(_, f)) => f.tick(),
            _ => return,
        };
        self.apply(sid, out);
    }

    fn write(&mut self) {
        let Some(l) = self.leader() else { return };
        self.next_value += 1;
        let v = json!(self.next_value);
        let Some(Role::Leading(sm)) = self.roles.get_mut(&l) else {
            return;
        };
        if let Ok((zxids, out)) = sm.propose(vec![v.clone()]) {
            // Acknowledged only once committed: watch the outputs of this and later steps.
            self.pending.insert(zxids[0], v);
            self.apply(l, out);
        }
    }

    fn up(&self) -> Vec<u64> {
        self.roles
            .iter()
            .filter(|(_, r)| !matches!(r, Role::Down))
            .map(|(s, _)| *s)
            .collect()
    }

    fn random_step(&mut self) {
        let sid = self.rng.gen_range(1..=N);
        match self.rng.gen_range(0..100) {
            0..=44 => {
                self.deliver_one();
            }
            45..=64 => self.write(),
            65..=79 => self.tick(sid),
            80..=84 => self.elect(),
            85..=88 => {
                if self.up().len() == N as usize {
                    self.crash(sid)
                }
            }
            89..=92 => {
                if matches!(self.roles.get(&sid), Some(Role::Down)) {
                    self.roles.insert(sid, Role::Looking);
                }
            }
            93..=95 => {
                // Leader-follower link cut (a partition), both sides notice.
                if let Some(l) = self.leader() {
                    if l != sid {
                        self.cut(l, sid);
                    }
                }
            }
            _ => {
                if let Some(l) = self.leader() {
                    self.crash(l)
                }
            }
        }
    }

    /// Heals everything and runs until one more write is committed on every server.
    fn settle(&mut self) {
        for s in 1..=N {
            if matches!(self.roles.get(&s), Some(Role::Down)) {
                self.roles.insert(s, Role::Looking);
            }
        }
        for round in 0..200 {
            // A server that accepted a higher epoch than the leader's (from a leader that never
            // established it) cannot join until the next election, as in ZooKeeper: force one.
            if round % 50 == 49 {
                if let Some(l) = self.leader() {
                    self.end_role(l);
                }
            }
            self.elect();
            while self.deliver_one() {}
            if let Some(l) = self.leader() {
                let Some(Role::Leading(sm)) = self.roles.get(&l) else {
                    unreachable!()
                };
                if sm.synced_followers().len() == N as usize - 1 {
                    break;
                }
            }
            for s in 1..=N {
                self.tick(s);
            }
        }
        let synced = self.leader().map(|l| match self.roles.get(&l) {
            Some(Role::Leading(sm)) => (l, sm.phase(), sm.synced_followers()),
            _ => unreachable!(),
        });
        let summary: Vec<_> = self
            .disks
            .iter()
            .map(|(s, d)| {
                (
                    *s,
                    d.accepted,
                    d.current,
                    d.log.last().map(|t| t.zxid >> 32 << 8 | (t.zxid & 0xff)),
                )
            })
            .collect();
        let roles: Vec<_> = self
            .roles
            .iter()
            .map(|(s, r)| {
                (
                    *s,
                    match r {
                        Role::Down => "down",
                        Role::Looking => "looking",
                        Role::Leading(_) => "leading",
                        Role::Following(..) => "following",
                    },
                )
            })
            .collect();
        assert!(
            synced
                .as_ref()
                .is_some_and(|(_, _, f)| f.len() == N as usize - 1),
            "not everyone synced: {synced:?} disks {summary:?} roles {roles:?}"
        );
        let before = self.acked.len();
        self.write();
        while self.deliver_one() {}
        assert_eq!(
            self.acked.len(),
            before + 1,
            "the final write did not commit"
        );
    }
}

#[test]
fn random_crashes_partitions_and_elections_lose_no_acknowledged_write() {
    for seed in 0..2000 {
        let mut sim = Sim::new(seed);
        for _ in 0..1000 {
            sim.random_step();
        }
        sim.settle();
        let logs: Vec<Vec<Txn>> = (1..=N).map(|s| sim.disks[&s].log.clone()).collect();
        for s in 1..N as usize {
            assert_eq!(
                logs[0],
                logs[s],
                "seed {seed}: logs of n1 and n{} differ",
                s + 1
            );
        }
        for (z, v) in &sim.acked {
            assert!(
                logs[0].iter().any(|t| t.zxid == *z && t.value == *v),
                "seed {seed}: acknowledged write {v} at {z:#x} lost"
            );
        }
        let last = logs[0].last().map_or(0, |t| t.zxid);
        for s in 1..=N {
            assert_eq!(sim.disks[&s].committed, last, "seed {seed}: n{s} watermark");
        }
    }
}
