//! What the nemesis should do: the schedule, from a TOML file in `nemesis/` or from CLI flags.
//! Both resolve to the same `Schedule`, which `plan` turns into a seeded sequence of faults.

use super::timing::Timing;
use super::trigger::Trigger;
use crate::control::fault::iptables::Cut;
use crate::exit::bad_input;
use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// What a frames fault writes to an election port: one definition, the controller's.
pub use crate::control::fault::frames::FrameMode;
/// What a packet fault does to a link: one definition, the controller's.
pub use crate::control::fault::packet::PacketMode;
/// The kinds of fault: one definition, the history's.
pub use crate::history::FaultKind;

/// Whom a fault hits. Roles (leader) are resolved when the fault starts, from the observers' latest
/// reads, and the resolved nodes are recorded in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    Leader,
    Random,
    Minority,
    Majority,
    All,
    Nodes(Vec<String>),
    /// The node a triggered fault's observation names (`when`): the node that went LOOKING,
    /// the follower that ACKed, the new leader.
    Trigger,
    /// The node with the largest sid (`highest`): the one whose vote wins ties on zxid.
    Highest,
    /// Every node but the observed leader (`followers`).
    Followers,
    /// The lower half (by sid) of the followers (`followers-low`), or the rest
    /// (`followers-high`): kill one half, then the other, and the leader keeps its quorum.
    FollowersLow,
    FollowersHigh,
    /// A random node other than the observed leader (any random node when none is seen).
    Follower,
    /// In a composed part (`main`): the nodes its composition's main fault hit (the followers
    /// a main kill made lag, say), whoever leads by then. A triggered part aimed at them fires
    /// only on their own reads, unless its `watch` names others.
    Main,
    /// In a composed part (`others`): the running nodes the main fault did not hit, when the
    /// part fires (after earlier parts killed or powered off theirs).
    Others,
    /// A random observer (`observer`), every observer (`observers`), a random voter (`voter`).
    Observer,
    Observers,
    Voter,
}

impl TargetSpec {
    pub fn parse(s: &str) -> Option<TargetSpec> {
        Some(match s {
            "leader" => TargetSpec::Leader,
            "random" | "one" => TargetSpec::Random,
            "minority" => TargetSpec::Minority,
            "majority" => TargetSpec::Majority,
            "all" => TargetSpec::All,
            "trigger" => TargetSpec::Trigger,
            "highest" => TargetSpec::Highest,
            "followers" => TargetSpec::Followers,
            "followers-low" => TargetSpec::FollowersLow,
            "followers-high" => TargetSpec::FollowersHigh,
            "follower" => TargetSpec::Follower,
            "main" => TargetSpec::Main,
            "others" => TargetSpec::Others,
            "observer" => TargetSpec::Observer,
            "observers" => TargetSpec::Observers,
            "voter" => TargetSpec::Voter,
            _ => {
                let nodes: Vec<String> = s.split(',').map(|n| n.trim().to_string()).collect();
                if nodes.iter().all(|n| crate::history::sid_of(n).is_some()) {
                    TargetSpec::Nodes(nodes)
                } else {
                    return None;
                }
            }
        })
    }

    pub fn describe(&self) -> String {
        match self {
            TargetSpec::Leader => "leader".into(),
            TargetSpec::Random => "random".into(),
            TargetSpec::Minority => "minority".into(),
            TargetSpec::Majority => "majority".into(),
            TargetSpec::All => "all".into(),
            TargetSpec::Nodes(n) => n.join(","),
            TargetSpec::Trigger => "trigger".into(),
            TargetSpec::Highest => "highest".into(),
            TargetSpec::Followers => "followers".into(),
            TargetSpec::FollowersLow => "followers-low".into(),
            TargetSpec::FollowersHigh => "followers-high".into(),
            TargetSpec::Follower => "follower".into(),
            TargetSpec::Main => "main".into(),
            TargetSpec::Others => "others".into(),
            TargetSpec::Observer => "observer".into(),
            TargetSpec::Observers => "observers".into(),
            TargetSpec::Voter => "voter".into(),
        }
    }
}

/// How a partition cuts the cluster (Jepsen's shapes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartitionShape {
    /// The current leader against everyone else.
    IsolateLeader,
    /// One node (the fault's target) against everyone else.
    IsolateOne,
    /// The first half of the nodes (in name order) against the rest.
    Halves,
    /// Halves of a seeded shuffle.
    RandomHalves,
    /// Every node sees a majority, but no two nodes see the same one.
    MajoritiesRing,
    /// Two halves joined only through one node that sees both.
    Bridge,
    /// Traffic from the target to every other node is dropped; the other way still flows.
    OneWay,
    /// Explicit groups (`groups = [["n1","n2"],["n3","n4"]]`): each node hears only its own
    /// group; a node in no group is cut off alone.
    Groups,
    /// The current leader in a minority *with* followers (it still reaches some: with 5 nodes,
    /// the leader and one follower against three), the rest a majority. Where a minority has
    /// room for the leader alone (3 nodes), it is isolated. Observers, when there are any, go
    /// with the leader: they count for nothing, so its side stays a minority of voters.
    LeaderMinority,
    /// The observers against the voters (each observer still hears the other observers).
    IsolateObservers,
}

impl PartitionShape {
    pub const ALL: [PartitionShape; 10] = [
        PartitionShape::IsolateLeader,
        PartitionShape::IsolateOne,
        PartitionShape::Halves,
        PartitionShape::RandomHalves,
        PartitionShape::MajoritiesRing,
        PartitionShape::Bridge,
        PartitionShape::OneWay,
        PartitionShape::Groups,
        PartitionShape::LeaderMinority,
        PartitionShape::IsolateObservers,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PartitionShape::IsolateLeader => "isolate-leader",
            PartitionShape::IsolateOne => "isolate-one",
            PartitionShape::Halves => "halves",
            PartitionShape::RandomHalves => "random-halves",
            PartitionShape::MajoritiesRing => "majorities-ring",
            PartitionShape::Bridge => "bridge",
            PartitionShape::OneWay => "one-way",
            PartitionShape::Groups => "groups",
            PartitionShape::LeaderMinority => "leader-minority",
            PartitionShape::IsolateObservers => "isolate-observers",
        }
    }

    pub fn parse(s: &str) -> Option<PartitionShape> {
        PartitionShape::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// What a clock fault does to the targets' wall clocks (through libfaketime).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClockMode {
    /// Step the clock by +/- delta (the sign is drawn from the seed when `random_sign`).
    Bump { delta_ms: i64, random_sign: bool },
    /// Flip between +delta and +0 every `period_ms` for the fault's duration.
    Strobe { delta_ms: i64, period_ms: u64 },
    /// Let the clock run `factor` times as fast.
    Rate { factor: f64 },
}

/// The data files a `corrupt` fault may damage (`file = ...`; the txnlog by default). A
/// snapshot is ZooKeeper's only: fle-node's txnlog is its whole state.
pub const CORRUPT_FILES: &[&str] = &["txnlog", "snapshot", "acceptedEpoch", "currentEpoch"];

/// One kind of fault the schedule may pick, with its settings.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultTemplate {
    pub kind: FaultKind,
    pub target: TargetSpec,
    /// Partitions only.
    pub shape: Option<PartitionShape>,
    /// The groups of a `groups` partition.
    pub groups: Option<Vec<Vec<String>>>,
    /// Clock faults only.
    pub clock: Option<ClockMode>,
    /// Packet faults only.
    pub packet: Option<PacketMode>,
    /// Corrupt faults only: the data file to damage (`CORRUPT_FILES`); None = the txnlog.
    pub file: Option<String>,
    /// Frames faults only: what is written to the election port.
    pub frames: Option<FrameMode>,
    /// Reconfig faults only (`role = "observer"`): the servers stay in the config as
    /// observers, rather than leaving it, and the undo makes them voters again.
    pub demote: bool,
    /// Reconfig faults only (`role = "participant"`): observers (test.json's) become voters,
    /// and the undo makes them observers again.
    pub promote: bool,
    /// Reconfig faults only (`replace = true`): once removed, the servers are replaced, as a
    /// Kubernetes pod is: killed, their data wiped, and started afresh on the first config
    /// (`Target::wipe`); the undo adds the fresh servers back, to be synced from nothing.
    pub replace: bool,
    /// How long the fault lasts before it is undone; None = the schedule's duration.
    pub duration: Option<Duration>,
    /// Relative chance of being picked.
    pub weight: u32,
    /// The line of its `[[fault]]` table in the schedule file (None: from `--nemesis`), so
    /// preflight errors can point at it.
    pub line: Option<usize>,
    /// Aimed: wait (at most `wait`) for this observation before firing (`when = "election"`).
    pub when: Option<Trigger>,
    pub wait: Option<Duration>,
    /// Aimed: only these nodes' reads fire the trigger (`watch = "followers-high"`), resolved
    /// when the wait begins; None: any node's (a part aimed at `main` watches the main nodes).
    pub watch: Option<TargetSpec>,
    /// Composed: faults started with this one (`[[fault.with]]`), each `after` its start.
    pub with: Vec<FaultTemplate>,
    /// For a composed part: how long after the main fault's start it begins.
    pub after: Duration,
    /// The composed group's name in the history (`compose = "..."`; default "kill+partition").
    pub compose: Option<String>,
    /// Partitions of a timed step (`timed`): the exact grudge (node -> the nodes whose traffic
    /// it drops), for shapes that groups cannot express (one-way, majorities-ring, bridge).
    pub drops: Option<Grudge>,
    /// Partitions: every packet, or (`port = "quorum"`) only the Zab connections' (packets to
    /// or from a quorum port), election traffic passing.
    pub cut: Cut,
    /// How this fault's own duration is drawn (`timing = "fixed"` in its table), instead of
    /// the schedule's `timing`: a fault that shows its bug only after some time (a strobe
    /// against a checker's settle time) is not cut short by a random draw. Gaps keep the
    /// schedule's timing; parts' durations are never drawn.
    pub duration_timing: Option<Timing>,
    /// The quiet kept after its span before the next fault (`quiet_after = "6s"`; at least
    /// this, the drawn gap when longer): a fault whose damage shows only as a stall (a server
    /// that cannot join) needs the checkers' stall bound of calm after it to be judged.
    pub quiet_after: Duration,
    /// The situation this entry is there to meet (`[fault.goal]`): the steering nemesis deals
    /// it first while the run has not met it (`super::goal`).
    pub goal: Option<super::goal::Goal>,
}

/// How long a triggered fault waits for its observation unless it says (`wait`).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(20);

impl FaultTemplate {
    /// This fault, then its composed parts.
    pub fn self_and_parts(&self) -> impl Iterator<Item = &FaultTemplate> {
        std::iter::once(self).chain(&self.with)
    }

    /// How long it lasts with its composed parts, given its own duration.
    pub fn span(&self, own: Duration, default: Duration) -> Duration {
        self.with
            .iter()
            .map(|p| p.after + p.duration.unwrap_or(default))
            .fold(own, Duration::max)
    }

    /// The name of its composed group, if it has parts.
    pub fn group_name(&self) -> Option<String> {
        if self.with.is_empty() {
            return None;
        }
        Some(self.compose.clone().unwrap_or_else(|| {
            std::iter::once(self.kind.name())
                .chain(self.with.iter().map(|p| p.kind.name()))
                .collect::<Vec<_>>()
                .join("+")
        }))
    }
}

/// node -> the nodes it drops traffic from (what a partition's iptables rules implement:
/// `partition` makes one per shape).
pub type Grudge = BTreeMap<String, BTreeSet<String>>;

/// One fault the nemesis will inject.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFault {
    /// When it starts, from the start of the nemesis.
    pub start: Duration,
    /// How long it lasts before it is undone.
    pub duration: Duration,
    pub template: FaultTemplate,
    /// A random word for choices made at run time (which random node, which shuffle).
    pub pick: u64,
    /// The clock delta after the seeded sign is applied (clock bumps only).
    pub clock_delta_ms: Option<i64>,
    /// The quiet drawn before it (what the runner keeps after the previous fault ends, when a
    /// trigger delayed that one).
    pub gap: Duration,
    /// The least quiet before it: the previous fault's `quiet_after` (at most `gap`). A
    /// triggered fault watches only after it, so it cannot fire on what the previous fault set
    /// off.
    pub quiet: Duration,
    /// Composed parts, each with `start` counted from this fault's start.
    pub parts: Vec<PlannedFault>,
    /// Keys added to its recorded value: `trigger`, `trigger_index`, `composed`.
    pub annotations: serde_json::Map<String, serde_json::Value>,
}

impl PlannedFault {
    /// The seed of what this fault does to the `i`th node it names (where a `corrupt` damages
    /// a file, which frames a `frames` sends): the real nemesis and the simulator alike, so a
    /// simulated schedule replayed on real processes does the same to each node.
    pub fn node_seed(&self, i: usize) -> u64 {
        self.pick.wrapping_mul(0x9E37_79B9).wrapping_add(i as u64)
    }

    /// From its start until its last part is undone.
    pub fn span(&self) -> Duration {
        self.parts
            .iter()
            .map(|p| p.start + p.duration)
            .fold(self.duration, Duration::max)
    }
}

/// A whole schedule: which faults, how often, how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// A name for reports ("mixed", "kill-leader", "cli").
    pub name: String,
    /// Where it came from, as errors name it: a file's path, "built-in nemesis/NAME.toml",
    /// or "--nemesis LIST".
    pub origin: String,
    /// Quiet time between the end of one fault and the start of the next.
    pub interval: Duration,
    /// How long a fault lasts unless its template says otherwise.
    pub duration: Duration,
    pub faults: Vec<FaultTemplate>,
    /// Fake the monotonic clock too (a VM whose clocks misbehave), not only the wall clock.
    pub fake_monotonic: bool,
    /// How gaps and durations are drawn around `interval` and `duration` (`timing = ...`).
    pub timing: Timing,
    /// A timed schedule (`[[step]]`s, see `timed`): these faults at these times instead of
    /// the seeded plan; `faults` then holds one template per step (kinds, preflight).
    pub timed: Option<Vec<PlannedFault>>,
    /// ZooKeeper settings the schedule is aimed with (`zookeeper_config = ["KEY=VALUE"]`):
    /// they replace the tool's defaults for `--target zookeeper`, and `--zookeeper-config`
    /// replaces them (a schedule aimed at a bug the defaults work around turns them off).
    pub zookeeper_config: Vec<String>,
}

impl Schedule {
    /// No faults at all.
    pub fn none() -> Schedule {
        Schedule {
            name: "none".into(),
            origin: "--nemesis none".into(),
            interval: Duration::from_secs(10),
            duration: Duration::from_secs(5),
            faults: Vec::new(),
            fake_monotonic: false,
            timing: Timing::Fixed,
            timed: None,
            zookeeper_config: Vec::new(),
        }
    }

    /// The fault kinds this schedule can inject (for OS setup and test.json).
    pub fn kinds(&self) -> Vec<FaultKind> {
        let mut kinds: Vec<FaultKind> = Vec::new();
        for f in self.faults.iter().flat_map(FaultTemplate::self_and_parts) {
            if !kinds.contains(&f.kind) {
                kinds.push(f.kind);
            }
        }
        kinds
    }

    /// `--nemesis kill,pause,partition,clock` (or `none`) with `--nemesis-interval`: each named
    /// kind with its default settings, equally weighted.
    pub fn from_flags(list: &str, interval: Duration, duration: Duration) -> Result<Schedule> {
        let mut schedule = Schedule {
            name: list.to_string(),
            origin: format!("--nemesis {list}"),
            interval,
            duration,
            ..Schedule::none()
        };
        if list.trim() == "none" || list.trim().is_empty() {
            schedule.name = "none".into();
            return Ok(schedule);
        }
        for word in list.split(',').map(str::trim) {
            let kind = FaultKind::parse(word).ok_or_else(|| {
                bad_input(format!(
                    "--nemesis: unknown fault '{word}'; use a comma-separated list of {} (or none), or --nemesis-file nemesis/NAME.toml",
                    kind_names()
                ))
            })?;
            schedule.faults.push(default_template(kind));
        }
        Ok(schedule)
    }
}

/// Every fault kind's name, comma-separated, for the messages that list them.
pub(super) fn kind_names() -> String {
    listed(&FaultKind::ALL, FaultKind::name)
}

/// The names of `all`, comma-separated: what a message about an unknown value offers instead.
pub(super) fn listed<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> String {
    let names: Vec<&str> = all.iter().map(|t| name(*t)).collect();
    names.join(", ")
}

/// The defaults `--nemesis KIND` uses: a random target and its kind's own
/// (`faults::Fault::defaults`).
pub(super) fn default_template(kind: FaultKind) -> FaultTemplate {
    let mut t = FaultTemplate {
        kind,
        target: TargetSpec::Random,
        shape: None,
        groups: None,
        clock: None,
        packet: None,
        file: None,
        frames: None,
        demote: false,
        promote: false,
        replace: false,
        duration: None,
        weight: 1,
        line: None,
        when: None,
        wait: None,
        watch: None,
        with: Vec::new(),
        after: Duration::ZERO,
        compose: None,
        drops: None,
        cut: Cut::Every,
        duration_timing: None,
        quiet_after: Duration::ZERO,
        goal: None,
    };
    super::faults::of(kind).defaults(&mut t);
    t
}
