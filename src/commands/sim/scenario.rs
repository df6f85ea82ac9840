//! Scripted scenarios on the simulator: a cluster in virtual time with no nemesis and no
//! clients, where a test says which servers vote and which observe, what log each starts on,
//! when each process starts and is killed, and reads back where each server stands.
//!
//! Why here: the node's election tests (the seed document's worked examples of Fast Leader
//! Election, the observer stories) ran on a FIFO network of `Election` machines hand-rolled in
//! `election.rs`, which delivered in one order, knew no Zab and restarted looking by fiat.
//! Here the same stories run on the one simulator (issue #32): the node's election and Zab
//! machines behind the shell `server.rs` models, over the simulated network (latency, per-link
//! slots, reconnects) and disk, so a server looks again because its leader's connection
//! closed, and its vote carries the log Zab left it. A seeded bug's cluster story
//! (ZOOKEEPER-1419's votes that cycle) runs here too, with the bug given to every server. Tests
//! that drive one `Election` message by message stay in `election.rs`, and those of one machine
//! under a seeded bug in `bug_tests.rs`.
//!
//! ```ignore
//! let mut s = Scenario::new(&[1, 2, 3], &[]);
//! s.log(1, 1, make_zxid(1, 9)).start_at(1, 0).start_at(2, 500);
//! let out = s.run_until(1_500);
//! assert_eq!(out.role(2), (ServerState::Leading, Some(2)));
//! ```

use super::record::SimRecorder;
use super::server::{Life, Server, Timing};
use super::streams::Streams;
use super::world::World;
use crate::api::{ElectionSummary, NodeStatus, ServerState};
use crate::history::node_name;
use crate::nemesis::faults::SimWorld;
use fle_node::bugs::Bugs;
use fle_node::election::ElectionCounters;
use fle_node::txnlog::Txn;
use fle_node::vote::Vote;
use fle_node::zab::actions::PersistOp;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;

/// A process or network event of the script.
#[derive(Debug, Clone, Copy)]
enum Step {
    Start(u64),
    Kill(u64),
    /// Zab's port dropped both ways between two servers (election traffic still passes).
    CutQuorum(u64, u64),
    /// Every cut healed.
    Heal,
}

/// The id the scenario's cuts go by in the simulated network (one heal undoes them all).
const CUT_ID: u64 = 1;

/// A cluster and its script, run in virtual time.
pub struct Scenario {
    world: World,
    /// Steps by due time (ns), in the order given.
    script: BTreeMap<u64, Vec<Step>>,
}

/// Where one server stands at the end of a [`Scenario::run_until`].
#[derive(Debug, Clone)]
pub struct Standing {
    pub life: Life,
    /// What `GET /status` would answer now (a process down keeps its last election).
    pub status: NodeStatus,
    /// Election notifications sent since the scenario began, re-sends and answers included.
    pub sent: u64,
    /// The election's dropped-message counters since the process last started.
    pub counters: ElectionCounters,
    /// The vote its election proposes now (the one it decided on, once it did).
    pub proposal: Vote,
}

/// Every server's standing at one simulated instant.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub at_ms: u64,
    pub servers: BTreeMap<u64, Standing>,
}

impl Outcome {
    /// The server's state and the leader it follows or leads.
    pub fn role(&self, sid: u64) -> (ServerState, Option<u64>) {
        let s = &self.servers[&sid].status;
        (s.state, s.leader)
    }

    /// The last election the server decided, if any.
    pub fn election(&self, sid: u64) -> Option<&ElectionSummary> {
        self.servers[&sid].status.last_election.as_ref()
    }

    pub fn sent(&self, sid: u64) -> u64 {
        self.servers[&sid].sent
    }
}

impl Scenario {
    /// `voters` and `observers` (sids), every server down on an empty disk, the simulator's
    /// default timing (`simulate`'s: tick 200 ms, initLimit 10, syncLimit 5, finalizeWait
    /// 200 ms, maxNotificationInterval 60 s), no seeded bug, seed 1.
    pub fn new(voters: &[u64], observers: &[u64]) -> Scenario {
        Scenario::seeded(voters, observers, Bugs::none(), 1)
    }

    /// As [`Scenario::new`] with seeded bugs in every server and the seed of the network's
    /// latencies.
    pub fn seeded(voters: &[u64], observers: &[u64], bugs: Bugs, seed: u64) -> Scenario {
        let timing = Timing {
            tick: Duration::from_millis(200),
            init_limit: 10,
            sync_limit: 5,
            finalize_wait: fle_node::election::INITIAL_NOTIFICATION_TIMEOUT,
            max_notification_interval: Duration::from_secs(60),
            bugs,
        };
        let mut members: Vec<u64> = voters.iter().chain(observers).copied().collect();
        members.sort_unstable();
        let base = Instant::now();
        let servers = (members.iter())
            .map(|&sid| (sid, Server::new(sid, &members, observers, &timing, base)))
            .collect();
        let names: Vec<String> = members.iter().map(|&s| node_name(s)).collect();
        let observer_names: Vec<String> = observers.iter().map(|&s| node_name(s)).collect();
        let rec = SimRecorder::new(&names, &observer_names);
        let mut world = World::new(servers, Streams::new(seed), rec);
        world.observers = observer_names;
        Scenario {
            world,
            script: BTreeMap::new(),
        }
    }

    /// Server `sid`'s disk holds a committed log up to `last_zxid` (the txns of its epoch,
    /// counters 1 to its counter) and `epoch` as its accepted and current epoch.
    pub fn log(&mut self, sid: u64, epoch: u64, last_zxid: u64) -> &mut Self {
        let high = last_zxid & !0xffff_ffff;
        let txns: Vec<Txn> = (1..=fle_node::api::counter_of(last_zxid))
            .map(|c| Txn {
                zxid: high | c,
                value: serde_json::json!(c),
            })
            .collect();
        let disk = &mut self.server(sid).disk;
        for op in [
            PersistOp::AcceptedEpoch(epoch),
            PersistOp::CurrentEpoch(epoch),
            PersistOp::Append(txns),
            PersistOp::Commit(last_zxid),
        ] {
            disk.persist(op)
                .expect("a scenario's log follows the store's rules");
        }
        disk.sync();
        self
    }

    /// The process of `sid` starts at `at_ms` (simulated ms), on what its disk holds.
    pub fn start_at(&mut self, sid: u64, at_ms: u64) -> &mut Self {
        self.step(at_ms, Step::Start(sid))
    }

    /// The process of `sid` is killed at `at_ms` (its disk keeps what it wrote).
    pub fn kill_at(&mut self, sid: u64, at_ms: u64) -> &mut Self {
        self.step(at_ms, Step::Kill(sid))
    }

    /// From `at_ms` on, packets for Zab's quorum port between `a` and `b` are dropped both
    /// ways (SYNs too), as an iptables cut of that port drops them; elections still talk.
    pub fn cut_quorum_at(&mut self, a: u64, b: u64, at_ms: u64) -> &mut Self {
        self.step(at_ms, Step::CutQuorum(a, b))
    }

    /// At `at_ms` every cut is healed.
    pub fn heal_at(&mut self, at_ms: u64) -> &mut Self {
        self.step(at_ms, Step::Heal)
    }

    fn step(&mut self, at_ms: u64, step: Step) -> &mut Self {
        for sid in sids_of(step) {
            self.server(sid);
        }
        self.script.entry(at_ms * MS).or_default().push(step);
        self
    }

    fn server(&mut self, sid: u64) -> &mut Server {
        (self.world.servers.get_mut(&sid))
            .unwrap_or_else(|| panic!("server {sid} is not in the scenario"))
    }

    /// Runs the cluster up to `until_ms` (simulated ms since the start; a later call goes on
    /// from there) and says where each server stands then, before what is due at that instant
    /// (a step scripted for `until_ms` is the next call's). Events due at a step's instant are
    /// handled before it.
    pub fn run_until(&mut self, until_ms: u64) -> Outcome {
        self.run_watching(until_ms, |_| {})
    }

    /// `run_until`, and the leader of `sid`'s proposal each time it changes, seen after every
    /// event (votes cross in well under a millisecond: sampling per call could miss a change
    /// and its undoing).
    pub fn proposals_until(&mut self, sid: u64, until_ms: u64) -> (Vec<u64>, Outcome) {
        let mut seen: Vec<u64> = Vec::new();
        let out = self.run_watching(until_ms, |w| {
            if let Some(s) = w.servers.get(&sid) {
                let leader = s.proposal().leader;
                if seen.last() != Some(&leader) {
                    seen.push(leader);
                }
            }
        });
        (seen, out)
    }

    /// `run_until`, calling `after_event` on the world after each event it handles.
    fn run_watching(&mut self, until_ms: u64, mut after_event: impl FnMut(&World)) -> Outcome {
        let end = (until_ms * MS).saturating_sub(1);
        loop {
            let next = self.script.first_key_value().map(|(t, _)| *t);
            let due = next.filter(|t| *t <= end);
            match self.world.pop(due.unwrap_or(end)) {
                Some(ev) => {
                    self.world.handle(ev);
                    after_event(&self.world);
                }
                None => {
                    let Some((t, steps)) = due.and_then(|_| self.script.pop_first()) else {
                        break;
                    };
                    self.world.rec.now = self.world.rec.now.max(t);
                    for s in steps {
                        match s {
                            Step::Start(sid) => self.world.start(sid),
                            Step::Kill(sid) => self.world.kill(sid),
                            Step::CutQuorum(a, b) => {
                                self.world.cut(CUT_ID, a, b, true);
                                self.world.cut(CUT_ID, b, a, true);
                            }
                            Step::Heal => self.world.heal_links(CUT_ID),
                        }
                    }
                }
            }
        }
        self.world.rec.now = self.world.rec.now.max(until_ms * MS);
        self.outcome()
    }

    fn outcome(&self) -> Outcome {
        let now = self.world.now();
        let servers = (self.world.servers.iter())
            .map(|(&sid, s)| {
                let standing = Standing {
                    life: s.life,
                    status: s.status(now, 0),
                    sent: s.notifications_sent,
                    counters: s.election_counters(),
                    proposal: s.proposal(),
                };
                (sid, standing)
            })
            .collect();
        Outcome {
            at_ms: now / MS,
            servers,
        }
    }
}

fn sids_of(step: Step) -> Vec<u64> {
    match step {
        Step::Start(sid) | Step::Kill(sid) => vec![sid],
        Step::CutQuorum(a, b) => vec![a, b],
        Step::Heal => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
