//! Seeded bugs: deliberate mistakes modeled on ZooKeeper's history, switched on with
//! `fle-node --bug NAME[,NAME...]`, so the checkers and nemeses can be shown to catch them.
//!
//! A [`Bugs`] set travels in the configuration of each mechanism (election, peers, Zab): no
//! global state. Each bug is a few lines in ONE place, written as `if bugs.has(Bug::X) { .. }`
//! next to the correct code with a comment naming its JIRA; the correct path is the default.
//! `CATALOGUE` is the one list: `--list-bugs`, `--bug` parsing and docs/bugs.md follow it.

use std::fmt;

/// One seeded bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bug {
    QuorumMinority,
    VoteOrderNotTotal,
    FollowOlderRound,
    FollowSingleLeading,
    OutOfElectionWrongFields,
    BlockingConnect,
    DeafOnTruncated,
    WallClockTimeouts,
    DiffWithoutTrunc,
    AckBeforeFsync,
    EpochBeforeTxns,
    CommitQuorumMinority,
    LeaderNeverStepsDown,
    ObserverVoteCounted,
    ObserverAckCounted,
    ObserverInformedEarly,
    RefuseRepeatedEpoch,
    ReadsWithoutQuorum,
    SyncBeforeApplied,
    CasOnStaleVersion,
    RemovedVoterCounted,
    RemovedLeaderKeepsLeading,
}

/// What `--list-bugs` prints about a bug.
#[derive(Debug, Clone, Copy)]
pub struct BugInfo {
    pub bug: Bug,
    /// What `--bug` takes.
    pub name: &'static str,
    /// The ZooKeeper issue it imitates ("-" when it imitates none).
    pub jira: &'static str,
    /// The fault that should expose it.
    pub fault: &'static str,
    pub description: &'static str,
}

/// Every seeded bug, in `--list-bugs` order.
pub const CATALOGUE: &[BugInfo] = &[
    BugInfo {
        bug: Bug::QuorumMinority,
        name: "quorum-minority",
        jira: "-",
        fault: "partition into minorities (partition-halves, groups)",
        description: "FLE and Zab count n/2 servers as a quorum instead of n/2+1: two leaders at once",
    },
    BugInfo {
        bug: Bug::VoteOrderNotTotal,
        name: "vote-order-not-total",
        jira: "ZOOKEEPER-1419",
        fault: "kills/restarts leaving equal zxids with different peerEpochs",
        description: "the vote order's sid clause skips the peerEpoch check: two votes each beat the other and votes cycle",
    },
    BugInfo {
        bug: Bug::FollowOlderRound,
        name: "follow-older-round",
        jira: "ZOOKEEPER-1514",
        fault: "restart followers during a re-election",
        description: "a server leads on FOLLOWING notices naming it from an older round (checkLeader ignores the round)",
    },
    BugInfo {
        bug: Bug::FollowSingleLeading,
        name: "follow-single-leading",
        jira: "ZOOKEEPER-975",
        fault: "restart a node into a live ensemble; isolate a leader that still says LEADING",
        description: "a looking server follows any single LEADING notice, without a quorum behind it",
    },
    BugInfo {
        bug: Bug::OutOfElectionWrongFields,
        name: "out-of-election-wrong-fields",
        jira: "ZOOKEEPER-1732",
        fault: "followers that reach the leader's next term without an election (stale-joiners)",
        description: "FOLLOWING/LEADING notices are compared on round and zxid, not leader and peerEpoch: a restarted server cannot join",
    },
    BugInfo {
        bug: Bug::BlockingConnect,
        name: "blocking-connect",
        jira: "ZOOKEEPER-3756",
        fault: "a partition that silently drops packets (blackhole)",
        description: "election connects are made one at a time: a blackholed peer's 5 s connect timeout stalls every other connection",
    },
    BugInfo {
        bug: Bug::DeafOnTruncated,
        name: "deaf-on-truncated",
        jira: "ZOOKEEPER-3769",
        fault: "garbage or truncated frames on the election port; kill -9 mid-send",
        description: "a truncated notification kills the receiver: the server hears no election message again",
    },
    BugInfo {
        bug: Bug::WallClockTimeouts,
        name: "wall-clock-timeouts",
        jira: "ZOOKEEPER-1366",
        fault: "clock bump/strobe",
        description: "a follower times its leader's silence on the wall clock: a forward jump drops a healthy leader",
    },
    BugInfo {
        bug: Bug::DiffWithoutTrunc,
        name: "diff-without-trunc",
        jira: "ZOOKEEPER-1154/1156",
        fault: "kill the leader after it logged a proposal, restart it after a new leader wrote",
        description: "the leader syncs with DIFF where TRUNC is needed: a follower keeps a txn no quorum accepted",
    },
    BugInfo {
        bug: Bug::AckBeforeFsync,
        name: "ack-before-fsync",
        jira: "ZOOKEEPER-3911",
        fault: "power-loss (page cache lost)",
        description: "followers ACK a proposal before it is durable (fsynced)",
    },
    BugInfo {
        bug: Bug::EpochBeforeTxns,
        name: "epoch-before-txns",
        jira: "ZOOKEEPER-4785",
        fault: "power-loss right after a follower's NEWLEADER ack",
        description: "a synced follower writes currentEpoch and ACKs NEWLEADER before the synced txns are durable",
    },
    BugInfo {
        bug: Bug::CommitQuorumMinority,
        name: "commit-quorum-minority",
        jira: "-",
        fault: "a leader in a minority with followers; pause or kill followers",
        description: "the Zab leader commits with one ACK too few (itself alone in a 3-server ensemble)",
    },
    BugInfo {
        bug: Bug::LeaderNeverStepsDown,
        name: "leader-never-steps-down",
        jira: "-",
        fault: "isolate the leader (partition it into a minority, kill or pause its followers)",
        description: "a Zab leader without a quorum of followers keeps LEADING instead of giving up after syncLimit",
    },
    BugInfo {
        bug: Bug::ObserverVoteCounted,
        name: "observer-vote-counted",
        jira: "-",
        fault: "a partition that leaves a minority of voters with the observers (needs --observers)",
        description: "voters count observers' election notices as votes (no validVoter check), and observers vote: a minority of voters plus observers elects",
    },
    BugInfo {
        bug: Bug::ObserverAckCounted,
        name: "observer-ack-counted",
        jira: "-",
        fault: "isolate the leader with the observers from the other voters while writes flow (needs --observers)",
        description: "the Zab leader sends observers proposals and counts their ACKs toward the commit quorum",
    },
    BugInfo {
        bug: Bug::ObserverInformedEarly,
        name: "observer-informed-early",
        jira: "-",
        fault: "kill or isolate the leader while writes are in flight (needs --observers)",
        description: "the leader sends observers a txn (INFORM) when it proposes it, not once a quorum committed it: an observer serves a txn no quorum committed",
    },
    BugInfo {
        bug: Bug::RefuseRepeatedEpoch,
        name: "refuse-repeated-epoch",
        jira: "-",
        fault: "kill and restart a follower, or cut it off, while its leader keeps leading (restart-follower)",
        description: "a follower refuses a LEADERINFO of the epoch it already accepted as if it were older: it cannot rejoin a leader still leading that epoch, and retries in FOLLOWING/discovery until a new epoch",
    },
    BugInfo {
        bug: Bug::ReadsWithoutQuorum,
        name: "reads-without-quorum",
        jira: "-",
        fault: "isolate the leader (partition it into a minority) while clients read (registers workload)",
        description: "a leader that lost its quorum and went back to LOOKING keeps serving reads and syncs from its own state, as a leader without a lease: stale reads from a deposed leader",
    },
    BugInfo {
        bug: Bug::SyncBeforeApplied,
        name: "sync-before-applied",
        jira: "-",
        fault: "a follower lagging its leader (partition or pause it briefly) while clients sync then read (registers workload)",
        description: "a follower answers /sync at once with what it applied, without asking its leader what was committed: a read after the sync can be stale",
    },
    BugInfo {
        bug: Bug::CasOnStaleVersion,
        name: "cas-on-stale-version",
        jira: "-",
        fault: "a follower lagging its leader while clients compare-and-set through it (registers workload)",
        description: "a follower checks a cas's version against its own possibly stale tree and forwards a match as an unconditional set: two cas on one version both succeed",
    },
    BugInfo {
        bug: Bug::RemovedVoterCounted,
        name: "removed-voter-counted",
        jira: "-",
        fault: "reconfig: remove a voter (nemesis membership)",
        description: "after a reconfig, the election still hears the voters it removed and counts their votes (validVoter checks the old config): a removed server counts toward a quorum",
    },
    BugInfo {
        bug: Bug::RemovedLeaderKeepsLeading,
        name: "removed-leader-keeps-leading",
        jira: "-",
        fault: "reconfig: remove the leader (nemesis membership)",
        description: "no role ends when a reconfig commits: the servers activate it in place, and a leader it removed designates itself and goes on leading (the ZOOKEEPER-3829 shape: a leader outside the config it runs)",
    },
];

impl Bug {
    pub fn info(self) -> &'static BugInfo {
        CATALOGUE
            .iter()
            .find(|i| i.bug == self)
            .expect("every bug is catalogued")
    }
    pub fn name(self) -> &'static str {
        self.info().name
    }
    /// Whether the bug lives in observers' code paths: an ensemble without observers cannot
    /// show it (`fle-chaos test --observers`).
    pub fn needs_observers(self) -> bool {
        matches!(
            self,
            Bug::ObserverVoteCounted | Bug::ObserverAckCounted | Bug::ObserverInformedEarly
        )
    }
    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// A set of seeded bugs; empty (the correct server) by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bugs(u32);

/// `--bug` named something not in the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownBug(pub String);

impl fmt::Display for UnknownBug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = CATALOGUE.iter().map(|i| i.name).collect();
        write!(
            f,
            "unknown bug {:?} in --bug (valid: {}; see --list-bugs)",
            self.0,
            names.join(", ")
        )
    }
}

impl Bugs {
    pub fn none() -> Bugs {
        Bugs(0)
    }
    pub fn of(bugs: &[Bug]) -> Bugs {
        bugs.iter().fold(Bugs(0), |s, b| s.with(*b))
    }
    pub fn with(self, bug: Bug) -> Bugs {
        Bugs(self.0 | bug.bit())
    }
    pub fn has(self, bug: Bug) -> bool {
        self.0 & bug.bit() != 0
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The bugs in the set, in catalogue order.
    pub fn iter(self) -> impl Iterator<Item = &'static BugInfo> {
        CATALOGUE.iter().filter(move |i| self.has(i.bug))
    }
    /// Parses `--bug a,b,c` (blanks around names ignored; an empty list is no bug).
    pub fn parse(list: &str) -> Result<Bugs, UnknownBug> {
        let mut set = Bugs::none();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let info = CATALOGUE
                .iter()
                .find(|i| i.name == name)
                .ok_or_else(|| UnknownBug(name.to_string()))?;
            set = set.with(info.bug);
        }
        Ok(set)
    }
}

/// `--list-bugs`: one tab-separated line per bug, `NAME JIRA FAULT DESCRIPTION`.
pub fn list() -> String {
    CATALOGUE
        .iter()
        .map(|i| format!("{}\t{}\t{}\t{}\n", i.name, i.jira, i.fault, i.description))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_has_unique_names_and_every_bug_once() {
        assert!(CATALOGUE.len() >= 10);
        let names: std::collections::BTreeSet<_> = CATALOGUE.iter().map(|i| i.name).collect();
        assert_eq!(names.len(), CATALOGUE.len());
        for (i, info) in CATALOGUE.iter().enumerate() {
            assert_eq!(info.bug as usize, i, "{} out of place", info.name);
            assert!(!info.name.contains(',') && !info.name.contains('\t'));
            assert!(![info.jira, info.fault, info.description]
                .iter()
                .any(|s| s.contains('\t') || s.contains('\n') || s.is_empty()));
        }
    }

    #[test]
    fn parses_lists_and_names_an_unknown_bug() {
        let b = Bugs::parse("ack-before-fsync, quorum-minority").unwrap();
        assert!(b.has(Bug::AckBeforeFsync) && b.has(Bug::QuorumMinority));
        assert!(!b.has(Bug::BlockingConnect));
        assert_eq!(
            b.iter().map(|i| i.name).collect::<Vec<_>>(),
            vec!["quorum-minority", "ack-before-fsync"]
        );
        assert!(Bugs::parse("").unwrap().is_empty());
        let e = Bugs::parse("quorum-minority,nosuch").unwrap_err();
        assert_eq!(e.0, "nosuch");
        let line = e.to_string();
        assert!(line.contains("\"nosuch\"") && line.contains("diff-without-trunc"));
        assert!(!line.contains('\n'));
    }

    #[test]
    fn list_is_one_tab_separated_line_per_bug() {
        let text = list();
        assert_eq!(text.lines().count(), CATALOGUE.len());
        for line in text.lines() {
            assert_eq!(line.split('\t').count(), 4, "{line}");
        }
    }
}
