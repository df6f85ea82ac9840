//! No false alarms from sampling: simulated correct clusters (successive terms, followers taking
//! the epoch at NEWLEADER, stale leaders still claiming an old epoch after a new one starts),
//! observed the way the controller observes them (a read every ~20 ms per node whose snapshot
//! is up to 45 ms older than its recorded receive time, but never older than that node's
//! previous answer: an observer polls one request at a time), must never be judged invalid by
//! election-safety or epoch-monotonic. Seeded, so a failure names a reproducible seed.

use fle_chaos::api::{ServerState, ZabPhase};
use fle_chaos::checker::{check_history, CheckOptions, Validity};
use fle_chaos::history::test_info::TestInfo;
use fle_chaos::history::{Event, EventType, F};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const MS: u64 = 1_000_000;

/// One leadership: the leader takes `epoch` at `sync_at`, each member at its own NEWLEADER
/// time (between sync_at and bcast_at) and enters broadcast after it.
struct Term {
    epoch: u64,
    leader: u64,
    /// (sid, NEWLEADER time, broadcast time) of each follower in the quorum.
    members: Vec<(u64, u64, u64)>,
    start: u64,
    sync_at: u64,
    bcast_at: u64,
    end: u64,
    /// The leader keeps claiming the epoch this long after `end` (partitioned, not yet noticed).
    stale_until: u64,
}

struct Sim {
    n: u64,
    terms: Vec<Term>,
}

impl Sim {
    fn new(rng: &mut ChaCha8Rng, n: u64) -> Sim {
        let quorum = fle_chaos::api::quorum(n as usize);
        let mut terms: Vec<Term> = Vec::new();
        let mut t = rng.gen_range(0..200) * MS;
        for epoch in 1..=rng.gen_range(2..7u64) {
            // A stale previous leader cannot be in the new quorum.
            let stale = terms.last().filter(|p| p.stale_until > t).map(|p| p.leader);
            let mut sids: Vec<u64> = (1..=n).filter(|s| Some(*s) != stale).collect();
            for i in (1..sids.len()).rev() {
                sids.swap(i, rng.gen_range(0..=i));
            }
            let leader = sids[0];
            let start = t;
            let sync_at = start + rng.gen_range(1..60) * MS;
            let bcast_at = sync_at + rng.gen_range(1..60) * MS;
            let size = rng.gen_range(quorum..=sids.len());
            let members = sids[1..size]
                .iter()
                .map(|&s| {
                    let nl = rng.gen_range(sync_at..bcast_at);
                    (s, nl, nl + rng.gen_range(0..30) * MS)
                })
                .collect();
            let end = bcast_at + rng.gen_range(50..2000) * MS;
            let stale_until = end
                + if rng.gen_bool(0.5) {
                    rng.gen_range(0..300) * MS
                } else {
                    0
                };
            terms.push(Term {
                epoch,
                leader,
                members,
                start,
                sync_at,
                bcast_at,
                end,
                stale_until,
            });
            // Sometimes the next election overlaps the stale leader's claim.
            t = end + rng.gen_range(0..400) * MS;
        }
        Sim { n, terms }
    }

    fn epoch_at(&self, sid: u64, t: u64) -> u64 {
        let mut e = 0;
        for term in &self.terms {
            let took = if term.leader == sid {
                Some(term.sync_at)
            } else {
                term.members.iter().find(|m| m.0 == sid).map(|m| m.1)
            };
            if took.is_some_and(|at| at <= t) {
                e = term.epoch;
            }
        }
        e
    }

    fn state_at(&self, sid: u64, t: u64) -> (ServerState, Option<u64>, ZabPhase, u64) {
        let epoch = self.epoch_at(sid, t);
        for term in self.terms.iter().rev() {
            if term.leader == sid && t >= term.start && t < term.end.max(term.stale_until) {
                let phase = if t < term.sync_at {
                    ZabPhase::Discovery
                } else if t < term.bcast_at {
                    ZabPhase::Sync
                } else {
                    ZabPhase::Broadcast
                };
                return (ServerState::Leading, Some(sid), phase, epoch);
            }
            if let Some(m) = term.members.iter().find(|m| m.0 == sid) {
                if t >= term.start && t < term.end {
                    let phase = if t < m.2 {
                        ZabPhase::Sync
                    } else {
                        ZabPhase::Broadcast
                    };
                    return (ServerState::Following, Some(term.leader), phase, epoch);
                }
            }
        }
        (ServerState::Looking, None, ZabPhase::Election, epoch)
    }

    fn history(&self, rng: &mut ChaCha8Rng) -> Vec<Event> {
        let end = self.terms.last().unwrap().stale_until + 500 * MS;
        let mut reads: Vec<(u64, u64, u64)> = Vec::new(); // (receive time, sid, snapshot time)
        for sid in 1..=self.n {
            let mut t = sid * 3 * MS;
            let mut last_recv = 0;
            while t < end {
                let recv = t + rng.gen_range(0..5) * MS;
                // An observer sends its next read only after the last answer came back.
                let snapshot = recv
                    .saturating_sub(rng.gen_range(0..=45) * MS)
                    .max(last_recv);
                reads.push((recv, sid, snapshot));
                last_recv = recv;
                t += 20 * MS;
            }
        }
        reads.sort();
        reads
            .iter()
            .enumerate()
            .map(|(i, &(recv, sid, snap))| {
                let (state, leader, phase, epoch) = self.state_at(sid, snap);
                Event {
                    index: i as u64,
                    time: recv,
                    process: format!("n{sid}"),
                    kind: EventType::Ok,
                    f: F::Status,
                    node: Some(format!("n{sid}")),
                    value: serde_json::json!({
                        "sid": sid, "state": state, "leader": leader, "peer_epoch": epoch,
                        "accepted_epoch": epoch, "election_epoch": epoch, "last_zxid": 0,
                        "last_zxid_hex": "0x0", "last_committed_zxid": 0, "zab_phase": phase, "wall_clock_ms": 0,
                        "uptime_ms": 0, "last_election": null,
                    }),
                }
            })
            .collect()
    }
}

fn info(n: u64) -> TestInfo {
    serde_json::from_value(serde_json::json!({
        "name": "sim", "target": "fle", "nodes": (1..=n).map(|i| format!("n{i}")).collect::<Vec<_>>(),
        "workload": "election", "nemesis": [], "seed": 0, "time_limit_s": 10.0, "tick_ms": 100,
        "init_limit": 5, "sync_limit": 2, "started_at": "2026-11-30T00:00:00Z",
        "replay_command": "", "version": "0"
    }))
    .unwrap()
}

#[test]
fn correct_clusters_sampled_late_are_never_invalid() {
    let mut leaderships = 0;
    for seed in 0..300u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = if seed % 2 == 0 { 3 } else { 5 };
        let sim = Sim::new(&mut rng, n);
        let events = sim.history(&mut rng);
        let results = check_history(&events, &info(n), &CheckOptions::default());
        for c in &results.checkers {
            if c.name == "election-safety" || c.name == "epoch-monotonic" {
                assert_ne!(
                    c.valid,
                    Validity::False,
                    "seed {seed}: {}: {}",
                    c.name,
                    c.explanation
                );
            }
            if let fle_chaos::checker::Measurements::EpochMonotonic(m) = &c.measurements {
                leaderships += m.new_leaderships;
            }
        }
    }
    // The simulations must exercise the rules: hundreds of leaderships were judged.
    assert!(leaderships > 500, "only {leaderships} leaderships judged");
}

#[test]
fn the_same_clusters_with_two_leaders_in_one_epoch_are_invalid() {
    // The test above can fail: give a term's epoch to the next term too, and it must be caught.
    for seed in 0..50u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = if seed % 2 == 0 { 3 } else { 5 };
        let mut sim = Sim::new(&mut rng, n);
        let e = sim.terms[0].epoch;
        sim.terms[1].epoch = e;
        // A second leader of the same epoch, if it is a different server.
        if sim.terms[1].leader == sim.terms[0].leader {
            continue;
        }
        let events = sim.history(&mut rng);
        let results = check_history(&events, &info(n), &CheckOptions::default());
        let safety = results
            .checkers
            .iter()
            .find(|c| c.name == "election-safety")
            .unwrap();
        assert_eq!(
            safety.valid,
            Validity::False,
            "seed {seed}: {}",
            safety.explanation
        );
    }
}
