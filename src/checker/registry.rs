//! The checkers, as one table: each one's name, what it judges (a line for `check --list`),
//! what a run must have for it to judge at all, and how it judges a digest. The order of
//! results.json, the combined verdict, JUnit's testcases, the report's table, `check --list`
//! and the fixtures' generator (tests/fixtures/gen.py asks `check --list`) all come from here:
//! adding a checker is its module plus one row (docs/architecture.md).

use super::finding::Finding;
use super::model::Digest;
use super::model::Rec;
use super::{
    ack_zxids, crash, durability, election_safety, epoch_monotonic, faults, leader_completeness,
    leader_stepdown, linearizable, log_order, membership, observers, recovery, session_order,
    vote_rule, CheckOptions,
};
use crate::history::situation::{Coverage, Situations};
use crate::history::test_info::TestInfo;
use crate::history::view::Finished;

/// What a run must have for a checker to judge it at all; without it the checker is shown
/// `n/a` and left out of the combined verdict (results.json keeps its verdict and reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Any run.
    Nothing,
    /// The writes workload's log appends (`write`: unique values through the leader).
    Writes,
    /// The votes each election counted (fle-node reports them; ZooKeeper's log tells them).
    Votes,
    /// Observers in the ensemble (`--observers`).
    Observers,
    /// Client operations on keys (the `register` workload: read, set, cas, create).
    Register,
}

impl Needs {
    pub fn word(self) -> &'static str {
        match self {
            Needs::Nothing => "any run",
            Needs::Writes => "writes",
            Needs::Votes => "votes",
            Needs::Observers => "observers",
            Needs::Register => "register",
        }
    }

    /// Why `info`'s run lacks it, if it does.
    pub fn missing(self, info: &TestInfo) -> Option<String> {
        match self {
            Needs::Writes if info.workload_kind() == "election" => Some(format!(
                "the workload ({}) only observes and writes nothing",
                info.workload
            )),
            // Its keys' writes are judged by linearizable and session-order instead: the log
            // checkers follow the writes workload's unique appends.
            Needs::Writes if info.workload_kind() == REGISTER => Some(format!(
                "the workload ({}) writes keys, not log appends (linearizable judges them)",
                info.workload
            )),
            Needs::Observers if info.observers.is_empty() => {
                Some("the ensemble has no observers (--observers)".into())
            }
            Needs::Register if info.workload_kind() != REGISTER => Some(format!(
                "the workload ({}) records no register operations (workload {REGISTER} does)",
                info.workload
            )),
            _ => None,
        }
    }
}

/// The workload kind that records register operations.
const REGISTER: &str = "register";

/// The one pass over the history's view, fed once for the checkers that ask it.
pub struct ViewPass {
    pub view: Finished,
    pub stepdown: leader_stepdown::Tracker,
    /// The situations the run's faults met (results.json's `coverage`).
    pub coverage: Coverage,
}

impl ViewPass {
    pub fn of(d: &Digest, info: &TestInfo) -> ViewPass {
        let mut stepdown = leader_stepdown::Tracker::new(info);
        let mut situations = Situations::new();
        let view = recovery::view_with(
            d,
            info,
            |v, fed, r| match r {
                Rec::Write(w) => situations.write(&w.process, w.kind, w.time),
                _ => situations.before(v, fed),
            },
            |v, r, ix| stepdown.after(v, r, ix),
        );
        ViewPass {
            view,
            stepdown,
            coverage: situations.finish(),
        }
    }
}

/// How a checker judges.
#[derive(Clone, Copy)]
pub enum Judge {
    /// From the digest alone.
    Digest(fn(&Digest, &TestInfo, &CheckOptions) -> Finding),
    /// From the view's one pass, and the digest.
    View(fn(&ViewPass, &Digest, &TestInfo, &CheckOptions) -> Finding),
}

/// One checker.
pub struct Checker {
    pub name: &'static str,
    /// What it judges, in a line.
    pub what: &'static str,
    pub needs: Needs,
    /// Costly (hashing every written value): run on a second core beside the others.
    pub heavy: bool,
    pub judge: Judge,
}

/// Every checker, in the order results list them.
pub const CHECKERS: &[Checker] = &[
    Checker {
        name: election_safety::NAME,
        what: "at most one leader per epoch, and followers follow it",
        needs: Needs::Nothing,
        heavy: false,
        judge: Judge::Digest(election_safety::check),
    },
    Checker {
        name: durability::NAME,
        what: "every acknowledged write is in the final logs, which are one total order",
        needs: Needs::Writes,
        heavy: true,
        judge: Judge::Digest(|d, info, _| durability::check(d, info)),
    },
    Checker {
        name: vote_rule::NAME,
        what: "each election was won by the best vote, backed by a quorum",
        needs: Needs::Votes,
        heavy: false,
        judge: Judge::Digest(|d, info, _| vote_rule::check(d, info)),
    },
    Checker {
        name: epoch_monotonic::NAME,
        what: "no epoch goes back; each leadership's epoch is new",
        needs: Needs::Nothing,
        heavy: false,
        judge: Judge::Digest(epoch_monotonic::check),
    },
    Checker {
        name: recovery::NAME,
        what: "a quorum-backed leader and every node rejoined within bounds; no stalls; no member out of broadcast beside a standing leader",
        needs: Needs::Nothing,
        heavy: false,
        judge: Judge::View(|pass, d, info, opts| recovery::judge(&pass.view, d, info, opts)),
    },
    Checker {
        name: crash::NAME,
        what: "no node process ended unasked",
        needs: Needs::Nothing,
        heavy: false,
        judge: Judge::Digest(|d, info, _| crash::check(d, info)),
    },
    Checker {
        name: faults::NAME,
        what: "the faults asked for were injected",
        needs: Needs::Nothing,
        heavy: false,
        judge: Judge::Digest(|d, info, _| faults::check(d, info)),
    },
    Checker {
        name: leader_completeness::NAME,
        what: "every leader holds each write acknowledged before its epoch began (before the fault that ended the leadership before it, where one did)",
        needs: Needs::Writes,
        // Beside the view pass it asks (the reigns): a second core would feed a second view.
        heavy: false,
        judge: Judge::View(|pass, d, info, opts| {
            leader_completeness::check(&pass.view.reigns, d, info, opts)
        }),
    },
    Checker {
        name: ack_zxids::NAME,
        what: "each acknowledged zxid belongs to its acknowledger's epoch, once, in order",
        needs: Needs::Writes,
        heavy: true,
        judge: Judge::Digest(ack_zxids::check),
    },
    Checker {
        name: log_order::NAME,
        what: "each final log is strictly ordered by zxid, in established epochs",
        needs: Needs::Writes,
        heavy: true,
        judge: Judge::Digest(|d, info, _| log_order::check(d, info)),
    },
    Checker {
        name: linearizable::NAME,
        what: "each key's writes and sync reads are linearizable as a versioned register",
        needs: Needs::Register,
        heavy: true,
        judge: Judge::Digest(linearizable::check),
    },
    Checker {
        name: session_order::NAME,
        what: "a client's reads never go back nor below its own writes; its writes apply in order",
        needs: Needs::Register,
        heavy: false,
        judge: Judge::Digest(|d, info, _| session_order::check(d, info)),
    },
    Checker {
        name: leader_stepdown::NAME,
        what: "a leader without a quorum steps down within its Zab timeout",
        needs: Needs::Nothing,
        heavy: false,
        judge: Judge::View(|pass, d, info, opts| {
            leader_stepdown::judge(&pass.stepdown, d, info, opts)
        }),
    },
    Checker {
        name: observers::NAME,
        what:
            "observers never lead, follow or count in a quorum, and hold only what voters committed",
        needs: Needs::Observers,
        heavy: false,
        judge: Judge::Digest(observers::check),
    },
    Checker {
        name: membership::NAME,
        what: "under reconfigs, a config commits with quorums of old and new voters, only its voters lead and count, and the ensemble ends on one config",
        needs: Needs::Nothing,
        heavy: false,
        judge: Judge::Digest(membership::check),
    },
];

/// The checkers' names, in results order.
pub fn names() -> impl Iterator<Item = &'static str> {
    CHECKERS.iter().map(|c| c.name)
}

/// `fle-chaos check --list`: one line per checker, tab-separated name, needs and what.
pub fn list() -> String {
    CHECKERS
        .iter()
        .map(|c| format!("{}\t{}\t{}\n", c.name, c.needs.word(), c.what))
        .collect()
}

/// Runs every checker on `d`: the heavy ones on a second core, the rest and the one view pass
/// (which also gives the run's coverage) on this one; findings in `CHECKERS` order.
pub fn run_all(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> (Vec<Finding>, Coverage) {
    let run = |c: &Checker, pass: Option<&ViewPass>| match c.judge {
        Judge::Digest(f) => f(d, info, opts),
        Judge::View(f) => f(pass.expect("the view pass is fed first"), d, info, opts),
    };
    // The checkers of one core (by their place in `CHECKERS`); the light side also feeds the
    // view pass, which the coverage comes from whether or not a checker asks it.
    let run_side = |heavy: bool| -> (Vec<(usize, Finding)>, Option<Coverage>) {
        let side = || {
            CHECKERS
                .iter()
                .enumerate()
                .filter(move |(_, c)| c.heavy == heavy)
        };
        let pass = (!heavy || side().any(|(_, c)| matches!(c.judge, Judge::View(_))))
            .then(|| ViewPass::of(d, info));
        let findings = side().map(|(i, c)| (i, run(c, pass.as_ref()))).collect();
        (findings, pass.map(|p| p.coverage))
    };
    let (mut all, coverage) = std::thread::scope(|s| {
        let heavy = s.spawn(|| run_side(true));
        let (mut all, coverage) = run_side(false);
        let (more, _) = heavy
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        all.extend(more);
        (all, coverage)
    });
    all.sort_by_key(|(i, _)| *i);
    let findings = all.into_iter().map(|(_, f)| f).collect();
    (findings, coverage.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_each_checker_has_its_line() {
        let mut seen = std::collections::BTreeSet::new();
        for c in CHECKERS {
            assert!(seen.insert(c.name), "{} listed twice", c.name);
            assert!(!c.what.is_empty());
        }
        assert_eq!(list().lines().count(), CHECKERS.len());
        let needs = |n: &str| CHECKERS.iter().find(|c| c.name == n).map(|c| c.needs);
        assert_eq!(needs(durability::NAME), Some(Needs::Writes));
        assert_eq!(needs(vote_rule::NAME), Some(Needs::Votes));
        assert_eq!(needs(linearizable::NAME), Some(Needs::Register));
    }
}
