//! The ground-truth oracle of a simulated run. A real run knows the cluster only through what
//! its observers and clients saw; the simulator holds every machine and every disk, so after
//! each event it checks Zab's invariants on the true state (as TigerBeetle's VOPR checks its
//! replicas after every step):
//!
//! - **one leader per epoch**: no two servers ever establish (a quorum acked NEWLEADER, the
//!   leader broadcasts) the same epoch;
//! - **committed prefixes agree**: every txn a server has marked committed has the value every
//!   other server committed under its zxid, and a server committed through zxid Z holds every
//!   txn any server committed at or below Z;
//! - **no ACK before durable**: a follower ACKs a proposal only once its log is fsynced through
//!   it, and NEWLEADER only once its whole log is;
//! - **an established leader holds every committed txn of earlier epochs**: the quorum that
//!   acked its NEWLEADER gave it every txn committed before its epoch.
//!
//! Its verdict is the `oracle` result of a simulated run, beside the history's checkers (a
//! real run has none: nothing there can see every disk). docs/checkers.md compares the two.

use super::server::Server;
use crate::checker::{CheckResult, Measurements, Validity};
use crate::history::node_name;
use fle_node::txnlog::Txn;
use std::collections::BTreeMap;

/// The oracle's name among a simulated run's results.
pub const NAME: &str = "oracle";

/// Violations kept for the explanation (each invariant is counted in full).
const KEPT: usize = 8;

/// What the oracle knows of the run so far.
#[derive(Debug, Default)]
pub struct Oracle {
    /// epoch -> the first server seen established in it.
    leaders: BTreeMap<u64, u64>,
    /// zxid -> the value the first server that committed it holds.
    committed: BTreeMap<u64, serde_json::Value>,
    /// Per server: what its disk looked like when last checked.
    seen: BTreeMap<u64, Seen>,
    /// Events checked after.
    events: u64,
    violations: Vec<String>,
    count: u64,
}

/// A server's committed prefix as last checked: unchanged, it needs no second look.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Seen {
    committed: u64,
    len: usize,
    last: u64,
    leads: Option<u64>,
}

impl Oracle {
    /// After one event at `now` (ns): the invariants over every server's state.
    pub fn after_event(&mut self, now: u64, servers: &BTreeMap<u64, Server>) {
        self.events += 1;
        for (&sid, s) in servers {
            let txns = s.disk.txns();
            let now_seen = Seen {
                committed: s.disk.committed(),
                len: txns.len(),
                last: s.disk.last_zxid(),
                leads: s.established_epoch(),
            };
            let before = self.seen.get(&sid).copied().unwrap_or_default();
            if now_seen == before {
                continue;
            }
            self.seen.insert(sid, now_seen);
            if let Some(epoch) = now_seen.leads.filter(|_| now_seen.leads != before.leads) {
                self.established(now, sid, epoch, txns);
            }
            if (now_seen.committed, now_seen.len, now_seen.last)
                != (before.committed, before.len, before.last)
            {
                // The log only grew past what was checked: only the new commits need a look.
                let grew = now_seen.len >= before.len
                    && now_seen.committed >= before.committed
                    && before.len > 0
                    && txns.get(before.len - 1).map(|t| t.zxid) == Some(before.last);
                let from = if grew { before.committed } else { 0 };
                self.commits(now, sid, s, from);
            }
        }
    }

    /// Server `sid` ACKs `zxid`: its disk must hold it durably (NEWLEADER's ACK: its whole log).
    pub fn on_ack(&mut self, now: u64, sid: u64, zxid: u64, s: &Server) {
        let newleader = fle_node::api::counter_of(zxid) == 0;
        let durable = s.disk.durable_zxid();
        let needed = if newleader { s.disk.last_zxid() } else { zxid };
        if durable < needed {
            let what = if newleader {
                format!("NEWLEADER ({zxid:#x}) with its log fsynced only through {durable:#x} of {needed:#x}")
            } else {
                format!("{zxid:#x} with its log fsynced only through {durable:#x}")
            };
            self.violation(now, format!("{} ACKed {what}", node_name(sid)));
        }
    }

    /// `sid` (its log `txns`) has just established epoch `e`: the only one in it, holding
    /// every txn committed in an earlier epoch.
    fn established(&mut self, now: u64, sid: u64, e: u64, txns: &[Txn]) {
        match self.leaders.get(&e) {
            Some(&first) if first != sid => self.violation(
                now,
                format!(
                    "{} and {} both established epoch {e}",
                    node_name(first),
                    node_name(sid)
                ),
            ),
            Some(_) => {}
            None => {
                self.leaders.insert(e, sid);
            }
        }
        // Zab asks an epoch's leader for every txn committed in the epochs before it; a stale
        // leader that a long pause kept from processing its quorum's NEWLEADER ACKs may be
        // established after a later epoch committed txns it cannot hold.
        let missing: Vec<u64> = (self.committed.range(..e << 32))
            .filter(|(z, v)| {
                let held = txns.binary_search_by_key(*z, |t| t.zxid).ok();
                held.is_none_or(|i| &txns[i].value != *v)
            })
            .map(|(z, _)| *z)
            .collect();
        if let Some(first) = missing.first() {
            self.violation(
                now,
                format!(
                    "{} established epoch {e} without {} committed txn(s) (first {first:#x})",
                    node_name(sid),
                    missing.len()
                ),
            );
        }
    }

    /// `sid`'s committed txns above zxid `from`: each agrees with what others committed, and
    /// none that others committed below its commit point is missing.
    fn commits(&mut self, now: u64, sid: u64, s: &Server, from: u64) {
        let upto = s.disk.committed();
        let txns = s.disk.txns();
        let start = txns.partition_point(|t| t.zxid <= from);
        let mine = txns[start..].iter().take_while(|t| t.zxid <= upto);
        let mut found = Vec::new();
        for t in mine {
            match self.committed.get(&t.zxid) {
                Some(v) if *v != t.value => found.push(format!(
                    "{} committed {:#x} as {}, another server as {v}",
                    node_name(sid),
                    t.zxid,
                    t.value
                )),
                Some(_) => {}
                None => {
                    self.committed.insert(t.zxid, t.value.clone());
                }
            }
        }
        let lacks = match from < upto {
            true => (self.committed.range(from + 1..=upto))
                .filter(|(z, _)| txns.binary_search_by_key(*z, |t| t.zxid).is_err())
                .count(),
            false => 0,
        };
        if lacks > 0 {
            found.push(format!(
                "{} committed through {upto:#x} without {lacks} txn(s) other servers committed \
                 at or below it",
                node_name(sid)
            ));
        }
        for f in found {
            self.violation(now, f);
        }
    }

    fn violation(&mut self, now: u64, what: String) {
        self.count += 1;
        if self.violations.len() < KEPT {
            let at = crate::duration::moment(now);
            self.violations.push(format!("at {at} {what}"));
        }
    }

    /// The oracle's verdict, as one more result of the run.
    pub fn result(&self) -> CheckResult {
        let (valid, explanation) = if self.count == 0 {
            (
                Validity::True,
                format!(
                    "After each of {} events, the servers' true state kept Zab's invariants: \
                     one leader per epoch ({} established), committed prefixes that agree \
                     ({} committed txns), no ACK before its fsync, every established leader \
                     holding every committed txn.",
                    self.events,
                    self.leaders.len(),
                    self.committed.len()
                ),
            )
        } else {
            let more = (self.count as usize).saturating_sub(self.violations.len());
            let tail = if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            };
            (
                Validity::False,
                format!(
                    "The servers' true state broke Zab's invariants {} time(s): {}{tail}.",
                    self.count,
                    self.violations.join("; ")
                ),
            )
        };
        CheckResult {
            name: NAME.into(),
            valid,
            explanation,
            evidence: Vec::new(),
            measurements: Measurements::None,
            applicable: true,
            kinds: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NAME;
    use crate::checker::{CheckResult, Validity};
    use crate::commands::sim::cli::settings_of;
    use crate::commands::sim::run::simulate_one;

    /// The oracle's result of seeds `seeds` of a simulated run with `flags`.
    fn oracle_of(flags: &[&str], seeds: std::ops::RangeInclusive<u64>) -> Vec<CheckResult> {
        let s = settings_of(flags).expect("settings");
        seeds
            .map(|seed| {
                let run = simulate_one(&s, seed);
                let oracle = run.results.checkers.iter().find(|c| c.name == NAME);
                oracle
                    .expect("every simulated run has the oracle's result")
                    .clone()
            })
            .collect()
    }

    /// The correct node keeps every invariant, and the oracle saw it do so (events, leaders,
    /// commits counted, not an empty pass).
    #[test]
    fn the_correct_node_keeps_every_invariant_after_every_event() {
        for r in oracle_of(&["--time-limit", "20"], 1..=6) {
            assert_eq!(r.valid, Validity::True, "{}", r.explanation);
            let committed = r.explanation.split(" committed txns").next().unwrap();
            let count: u64 = committed.rsplit('(').next().unwrap().parse().unwrap();
            assert!(count > 0, "nothing committed: {}", r.explanation);
        }
    }

    /// Each Zab safety bug is caught on the servers' true state, by the invariant it breaks.
    #[test]
    fn seeded_zab_bugs_break_the_invariant_they_are_about() {
        let cases = [
            ("ack-before-fsync", "fsynced only through"),
            ("commit-quorum-minority", "without"),
            ("quorum-minority", "both established epoch"),
        ];
        for (bug, says) in cases {
            let results = oracle_of(&["--time-limit", "30", "--bug", bug], 1..=10);
            let caught = results
                .iter()
                .find(|r| r.valid == Validity::False && r.explanation.contains(says));
            let all: Vec<&str> = results.iter().map(|r| r.explanation.as_str()).collect();
            assert!(caught.is_some(), "{bug}: no {says:?} in {all:#?}");
        }
    }
}
