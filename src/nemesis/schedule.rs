//! What the nemesis should do: the schedule, from a TOML file in `nemesis/` or from CLI flags.
//! Both resolve to the same `Schedule`, which `plan` turns into a seeded sequence of faults.

use super::timing::Timing;
use super::trigger::Trigger;
use crate::control::iptables::Cut;
use crate::exit::bad_input;
use anyhow::Result;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// What a frames fault writes to an election port: one definition, the controller's.
pub use crate::control::frames::FrameMode;
/// What a packet fault does to a link: one definition, the controller's.
pub use crate::control::packet::PacketMode;
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
}

impl TargetSpec {
    fn parse(s: &str) -> Option<TargetSpec> {
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
    /// room for the leader alone (3 nodes), it is isolated.
    LeaderMinority,
}

impl PartitionShape {
    pub const ALL: [PartitionShape; 9] = [
        PartitionShape::IsolateLeader,
        PartitionShape::IsolateOne,
        PartitionShape::Halves,
        PartitionShape::RandomHalves,
        PartitionShape::MajoritiesRing,
        PartitionShape::Bridge,
        PartitionShape::OneWay,
        PartitionShape::Groups,
        PartitionShape::LeaderMinority,
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
        }
    }

    fn parse(s: &str) -> Option<PartitionShape> {
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

/// The data files a `corrupt` fault may damage (`file = ...`; the txnlog by default).
pub const CORRUPT_FILES: &[&str] = &["txnlog", "acceptedEpoch", "currentEpoch"];

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
    pub drops: Option<super::partition::Grudge>,
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
    pub timed: Option<Vec<super::plan::PlannedFault>>,
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

    /// Reads a schedule file. Errors name the file, the line and what is wrong.
    pub fn from_file(path: &Path) -> Result<Schedule> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            bad_input(format!(
                "--nemesis-file {}: cannot read it: {e}",
                path.display()
            ))
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut schedule = Schedule::from_toml(&name, &text)
            .map_err(|msg| bad_input(format!("{}: {msg}", path.display())))?;
        schedule.origin = path.display().to_string();
        Ok(schedule)
    }

    /// Parses schedule TOML; the error is "line N: what is wrong".
    pub fn from_toml(name: &str, text: &str) -> Result<Schedule, String> {
        if super::timed::is_timed(text) {
            return super::timed::from_toml(name, text);
        }
        let raw: RawSchedule = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        let line_of = |needle: &str| line_of(text, needle);
        let interval = parse_duration(&raw.interval.unwrap_or_else(|| "10s".into()))
            .map_err(|e| format!("line {}: interval: {e}", line_of("interval")))?;
        let duration = parse_duration(&raw.duration.unwrap_or_else(|| "5s".into()))
            .map_err(|e| format!("line {}: duration: {e}", line_of("duration")))?;
        let timing = match raw.timing.as_deref() {
            None => Timing::Fixed,
            Some(t) => Timing::parse(t).ok_or_else(|| {
                format!(
                    "line {}: timing = \"{t}\" is unknown; use fixed, exponential or jittered",
                    line_of("timing")
                )
            })?,
        };
        let mut faults = Vec::new();
        for (i, f) in raw.faults.into_iter().enumerate() {
            let line = fault_line(text, i);
            let mut t = f
                .into_template()
                .map_err(|e| format!("line {line}: in this [[fault]]: {e}"))?;
            for (key, spec) in [("target", Some(&t.target)), ("watch", t.watch.as_ref())] {
                if let Some(TargetSpec::Main | TargetSpec::Others) = spec {
                    return Err(format!(
                        "line {line}: in this [[fault]]: {key} = \"{}\" names nodes of a composition's main fault: use it in a [[fault.with]] part",
                        spec.map(TargetSpec::describe).unwrap_or_default()
                    ));
                }
            }
            t.line = Some(line);
            faults.push(t);
        }
        if faults.is_empty() {
            return Err("no [[fault]] tables: add at least one, e.g.\n[[fault]]\nkind = \"kill\"\ntarget = \"leader\"".into());
        }
        Ok(Schedule {
            name: name.to_string(),
            origin: name.to_string(),
            interval,
            duration,
            faults,
            fake_monotonic: raw.fake_monotonic,
            timing,
            timed: None,
        })
    }
}

/// Every fault kind's name, comma-separated, for the messages that list them.
fn kind_names() -> String {
    listed(&FaultKind::ALL, FaultKind::name)
}

/// The names of `all`, comma-separated: what a message about an unknown value offers instead.
fn listed<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> String {
    let names: Vec<&str> = all.iter().map(|t| name(*t)).collect();
    names.join(", ")
}

/// The defaults `--nemesis KIND` uses.
pub(super) fn default_template(kind: FaultKind) -> FaultTemplate {
    let (target, shape, clock) = match kind {
        FaultKind::Kill | FaultKind::Pause | FaultKind::PowerLoss | FaultKind::Corrupt => {
            (TargetSpec::Random, None, None)
        }
        // Every link of every node: packet faults degrade a network rather than cut it.
        FaultKind::Packet => (TargetSpec::All, None, None),
        // A follower: a deaf one is what the next election needs.
        FaultKind::Frames => (TargetSpec::Follower, None, None),
        FaultKind::Partition => (TargetSpec::Random, Some(PartitionShape::RandomHalves), None),
        FaultKind::Clock => (
            TargetSpec::Random,
            None,
            Some(ClockMode::Bump {
                delta_ms: 60_000,
                random_sign: true,
            }),
        ),
    };
    FaultTemplate {
        kind,
        target,
        shape,
        groups: None,
        clock,
        packet: (kind == FaultKind::Packet).then_some(PacketMode::Loss { percent: 30.0 }),
        file: None,
        frames: (kind == FaultKind::Frames).then_some(FrameMode::Truncated),
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
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchedule {
    interval: Option<String>,
    duration: Option<String>,
    #[serde(default)]
    fake_monotonic: bool,
    /// "fixed" (default) | "exponential" | "jittered".
    timing: Option<String>,
    #[serde(default, rename = "fault")]
    faults: Vec<RawFault>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFault {
    kind: String,
    target: Option<String>,
    shape: Option<String>,
    /// Partition shape "groups": the groups, e.g. [["n1", "n2"], ["n3", "n4"]].
    groups: Option<Vec<Vec<String>>>,
    /// Clock: "bump" | "strobe" | "rate"; packet: "loss" | "delay" | "duplicate" | "reorder" |
    /// "bandwidth"; frames: "truncated" | "garbage".
    mode: Option<String>,
    /// Clock: "+300s", "-2m", "500ms"; bump without a sign picks one from the seed.
    delta: Option<String>,
    /// Clock strobe: how often to flip.
    period: Option<String>,
    /// Clock rate: how fast the clock runs.
    factor: Option<f64>,
    /// Packet loss, duplicate, reorder: the share of packets, 0-100.
    percent: Option<f64>,
    /// Packet delay, reorder: how long a held packet waits ("100ms").
    delay: Option<String>,
    /// Packet delay: +/- this much, uniformly, per packet ("20ms").
    jitter: Option<String>,
    /// Packet bandwidth: "256kbit", "1mbit".
    rate: Option<String>,
    /// Corrupt: which data file ("txnlog", "acceptedEpoch", "currentEpoch").
    file: Option<String>,
    duration: Option<String>,
    weight: Option<u32>,
    /// Aimed: a `Trigger` name ("election", "new-leader", ...).
    when: Option<String>,
    /// How long a triggered fault waits for its observation.
    wait: Option<String>,
    /// Whose reads may fire the trigger: a target ("followers-high", "n1,n2").
    watch: Option<String>,
    /// Composed: `[[fault.with]]` tables, faults started with this one.
    #[serde(default)]
    with: Vec<RawFault>,
    /// In a `[[fault.with]]`: how long after the main fault's start it begins.
    after: Option<String>,
    /// The composed group's name.
    compose: Option<String>,
    /// Partition: "quorum" cuts only the Zab connections (the election ones pass).
    port: Option<String>,
    /// How this fault's own duration is drawn ("fixed" | "exponential" | "jittered"); the
    /// schedule's `timing` by default.
    timing: Option<String>,
    /// The least quiet after its span before the next fault ("6s").
    quiet_after: Option<String>,
    /// `[fault.goal]`: the situation the entry is there to meet.
    goal: Option<super::goal::RawGoal>,
}

impl RawFault {
    pub(super) fn into_template(self) -> Result<FaultTemplate, String> {
        let kind = FaultKind::parse(&self.kind)
            .ok_or_else(|| format!("kind = \"{}\" is unknown; use {}", self.kind, kind_names()))?;
        let mut t = default_template(kind);
        if let Some(target) = &self.target {
            t.target = TargetSpec::parse(target).ok_or_else(|| {
                format!("target = \"{target}\" is unknown; use leader, follower, random, minority, majority, all, highest, followers, followers-low, followers-high, trigger, main or others (composed parts), or node names like \"n1,n2\"")
            })?;
        }
        if let Some(shape) = &self.shape {
            if kind != FaultKind::Partition && kind != FaultKind::Packet {
                return Err("shape is only for kind = \"partition\" or \"packet\"".into());
            }
            t.shape = Some(PartitionShape::parse(shape).ok_or_else(|| {
                let names = listed(&PartitionShape::ALL, PartitionShape::name);
                format!("shape = \"{shape}\" is unknown; use one of {names}")
            })?);
        }
        match (&self.groups, t.shape) {
            (Some(groups), Some(PartitionShape::Groups)) => {
                let mut seen = std::collections::BTreeSet::new();
                for name in groups.iter().flatten() {
                    if crate::history::sid_of(name).is_none() {
                        return Err(format!("groups: '{name}' is not a node name like n1"));
                    }
                    if !seen.insert(name) {
                        return Err(format!("groups: {name} is in two groups"));
                    }
                }
                t.groups = Some(groups.clone());
            }
            (None, Some(PartitionShape::Groups)) => {
                return Err(
                    "shape = \"groups\" needs groups = [[\"n1\", \"n2\"], [\"n3\", \"n4\"]]".into(),
                )
            }
            (Some(_), _) => return Err("groups is only for shape = \"groups\"".into()),
            (None, _) => {}
        }
        if let Some(timing) = &self.timing {
            t.duration_timing = Some(Timing::parse(timing).ok_or_else(|| {
                let names = listed(&Timing::ALL, Timing::name);
                format!("timing = \"{timing}\" is unknown; use {names}")
            })?);
        }
        if let Some(q) = &self.quiet_after {
            t.quiet_after = parse_duration(q).map_err(|e| format!("quiet_after: {e}"))?;
        }
        if let Some(port) = &self.port {
            if kind != FaultKind::Partition {
                return Err("port is only for kind = \"partition\"".into());
            }
            t.cut = Cut::of_port(Some(port)).ok_or_else(|| format!("port = \"{port}\" is unknown; use \"quorum\" (only the Zab connections are cut) or leave it out (every packet)"))?;
        }
        let clock_keys = self.delta.is_some() || self.period.is_some() || self.factor.is_some();
        if clock_keys && kind != FaultKind::Clock {
            return Err("delta, period and factor are only for kind = \"clock\"".into());
        }
        let packet_keys = self.percent.is_some()
            || self.delay.is_some()
            || self.jitter.is_some()
            || self.rate.is_some();
        if packet_keys && kind != FaultKind::Packet {
            return Err("percent, delay, jitter and rate are only for kind = \"packet\"".into());
        }
        if self.mode.is_some()
            && kind != FaultKind::Clock
            && kind != FaultKind::Packet
            && kind != FaultKind::Frames
        {
            return Err("mode is only for kind = \"clock\", \"packet\" or \"frames\"".into());
        }
        if kind == FaultKind::Frames {
            if let Some(m) = &self.mode {
                t.frames = Some(FrameMode::parse(m).ok_or_else(|| {
                    format!(
                        "mode = \"{m}\" is unknown for kind = \"frames\"; use truncated or garbage"
                    )
                })?);
            }
        }
        if kind == FaultKind::Clock {
            t.clock = Some(self.clock_mode()?);
        }
        if kind == FaultKind::Packet {
            t.packet = Some(self.packet_mode()?);
        }
        if let Some(file) = &self.file {
            if kind != FaultKind::Corrupt {
                return Err("file is only for kind = \"corrupt\"".into());
            }
            if !CORRUPT_FILES.contains(&file.as_str()) {
                return Err(format!(
                    "file = \"{file}\" is unknown; use one of {}",
                    CORRUPT_FILES.join(", ")
                ));
            }
            t.file = Some(file.clone());
        }
        if let Some(d) = &self.duration {
            t.duration = Some(parse_duration(d).map_err(|e| format!("duration: {e}"))?);
        }
        if let Some(w) = self.weight {
            if w == 0 {
                return Err(
                    "weight = 0 would never pick this fault; remove the table instead".into(),
                );
            }
            t.weight = w;
        }
        if let Some(w) = &self.when {
            t.when = Some(Trigger::parse(w).ok_or_else(|| {
                let names = listed(&Trigger::ALL, Trigger::name);
                format!("when = \"{w}\" is unknown; use {names}")
            })?);
        }
        if let Some(w) = &self.wait {
            if t.when.is_none() {
                return Err("wait is only for a triggered fault (when = ...)".into());
            }
            t.wait = Some(parse_duration(w).map_err(|e| format!("wait: {e}"))?);
        }
        if let Some(w) = &self.watch {
            if t.when.is_none() {
                return Err("watch is only for a triggered fault (when = ...)".into());
            }
            t.watch = match TargetSpec::parse(w) {
                Some(TargetSpec::Trigger) | None => {
                    return Err(format!("watch = \"{w}\" is not a set of nodes to watch; use a target such as leader, followers-high, main (composed parts) or node names like \"n1,n2\""));
                }
                spec => spec,
            };
        }
        if t.target == TargetSpec::Trigger && t.when.is_none() {
            return Err("target = \"trigger\" needs when = \"election\" (or another trigger): it is the node the observation names".into());
        }
        if self.after.is_some() {
            return Err("after is only for a composed part ([[fault.with]])".into());
        }
        if self.compose.is_some() && self.with.is_empty() {
            return Err("compose names a group of faults: add [[fault.with]] tables".into());
        }
        t.compose = self.compose;
        t.goal = self.goal.map(super::goal::RawGoal::parse).transpose()?;
        for part in self.with {
            if !part.with.is_empty()
                || part.compose.is_some()
                || part.weight.is_some()
                || part.goal.is_some()
            {
                return Err(
                    "a [[fault.with]] part takes no with, compose, weight or goal of its own"
                        .into(),
                );
            }
            if part.timing.is_some() {
                return Err(
                    "with: timing is for a [[fault]]'s own duration; a part's is never drawn"
                        .into(),
                );
            }
            if part.quiet_after.is_some() {
                return Err(
                    "with: quiet_after is for the [[fault]]: the quiet follows the whole group"
                        .into(),
                );
            }
            let after = match &part.after {
                Some(a) => parse_duration(a).map_err(|e| format!("with: after: {e}"))?,
                None => Duration::ZERO,
            };
            // A part with its own `when` waits from its `after` for its observation (and may
            // hit the node that names, `target = "trigger"`); the others fire at `after`.
            let own_trigger = part.when.is_some();
            let mut raw = part;
            raw.after = None;
            // A part may hit the node the main fault's trigger names.
            let at_trigger = !own_trigger && raw.target.as_deref() == Some("trigger");
            if at_trigger {
                if t.when.is_none() {
                    return Err(
                        "with: target = \"trigger\" needs when = ... on the main fault".into(),
                    );
                }
                raw.target = None;
            }
            let mut p = raw.into_template().map_err(|e| format!("with: {e}"))?;
            if at_trigger {
                p.target = TargetSpec::Trigger;
            }
            p.after = after;
            if let (Some(wait), Some(d)) = (p.wait.filter(|_| own_trigger), p.duration) {
                if wait >= d {
                    return Err(format!(
                        "with: wait ({wait:?}) must be shorter than the part's duration ({d:?}): a triggered part is undone at after + duration, fired or not"
                    ));
                }
            }
            t.with.push(p);
        }
        Ok(t)
    }

    fn packet_mode(&self) -> Result<PacketMode, String> {
        let mode = self.mode.as_deref().unwrap_or("loss");
        let percent = |default: f64| -> Result<f64, String> {
            let p = self.percent.unwrap_or(default);
            if !(p > 0.0 && p <= 100.0) {
                return Err(format!(
                    "percent = {p}: use a number above 0 and at most 100"
                ));
            }
            Ok(p)
        };
        let ms = |key: &str, value: &Option<String>, default: &str| -> Result<u64, String> {
            let d = parse_duration(value.as_deref().unwrap_or(default))
                .map_err(|e| format!("{key}: {e}"))?;
            Ok(d.as_millis() as u64)
        };
        let unused = |keys: &[(&str, bool)]| -> Result<(), String> {
            match keys.iter().find(|(_, set)| *set) {
                Some((key, _)) => Err(format!("{key} does not apply to mode = \"{mode}\"")),
                None => Ok(()),
            }
        };
        let (percent_set, delay_set) = (self.percent.is_some(), self.delay.is_some());
        let (jitter_set, rate_set) = (self.jitter.is_some(), self.rate.is_some());
        let m = match mode {
            "loss" => {
                unused(&[
                    ("delay", delay_set),
                    ("jitter", jitter_set),
                    ("rate", rate_set),
                ])?;
                PacketMode::Loss {
                    percent: percent(30.0)?,
                }
            }
            "delay" => {
                unused(&[("percent", percent_set), ("rate", rate_set)])?;
                let delay_ms = ms("delay", &self.delay, "100ms")?;
                let jitter_ms = ms("jitter", &self.jitter, "0ms")?;
                if delay_ms == 0 || jitter_ms > delay_ms {
                    return Err(format!(
                        "delay {delay_ms} ms, jitter {jitter_ms} ms: use a delay above 0 and a \
                         jitter at most the delay"
                    ));
                }
                PacketMode::Delay {
                    delay_ms,
                    jitter_ms,
                }
            }
            "duplicate" => {
                unused(&[
                    ("delay", delay_set),
                    ("jitter", jitter_set),
                    ("rate", rate_set),
                ])?;
                PacketMode::Duplicate {
                    percent: percent(20.0)?,
                }
            }
            "reorder" => {
                unused(&[("jitter", jitter_set), ("rate", rate_set)])?;
                let delay_ms = ms("delay", &self.delay, "50ms")?;
                if delay_ms == 0 {
                    return Err("delay = 0: a reordered packet must wait; use e.g. 50ms".into());
                }
                PacketMode::Reorder {
                    percent: percent(25.0)?,
                    delay_ms,
                }
            }
            "bandwidth" => {
                unused(&[
                    ("percent", percent_set),
                    ("delay", delay_set),
                    ("jitter", jitter_set),
                ])?;
                let text = self.rate.as_deref().unwrap_or("1mbit");
                PacketMode::Bandwidth {
                    rate_kbit: parse_rate_kbit(text).map_err(|e| format!("rate: {e}"))?,
                }
            }
            other => {
                return Err(format!(
                    "mode = \"{other}\" is unknown for kind = \"packet\"; use loss, delay, \
                     duplicate, reorder or bandwidth"
                ))
            }
        };
        Ok(m)
    }

    fn clock_mode(&self) -> Result<ClockMode, String> {
        let delta = |default: &str| -> Result<(i64, bool), String> {
            let text = self.delta.as_deref().unwrap_or(default);
            let signed = text.starts_with('+') || text.starts_with('-');
            let ms = parse_signed_ms(text).map_err(|e| format!("delta: {e}"))?;
            Ok((ms, !signed))
        };
        match self.mode.as_deref().unwrap_or("bump") {
            "bump" => {
                let (delta_ms, random_sign) = delta("60s")?;
                Ok(ClockMode::Bump {
                    delta_ms,
                    random_sign,
                })
            }
            "strobe" => {
                let (delta_ms, _) = delta("+10s")?;
                let period = parse_duration(self.period.as_deref().unwrap_or("200ms"))
                    .map_err(|e| format!("period: {e}"))?;
                Ok(ClockMode::Strobe {
                    delta_ms,
                    period_ms: period.as_millis().max(10) as u64,
                })
            }
            "rate" => {
                let factor = self.factor.unwrap_or(2.0);
                if !(factor > 0.0 && factor <= 1000.0) {
                    return Err(format!(
                        "factor = {factor}: use a number above 0 and at most 1000"
                    ));
                }
                Ok(ClockMode::Rate { factor })
            }
            other => Err(format!(
                "mode = \"{other}\" is unknown; use bump, strobe or rate"
            )),
        }
    }
}

/// "10s", "500ms", "2m", "1.5s".
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let ms = parse_signed_ms(text)?;
    if ms < 0 || text.trim_start().starts_with('-') {
        return Err(format!(
            "'{text}' is negative; a duration is like 10s, 500ms or 2m"
        ));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// "256kbit", "1mbit", "1gbit" → kbit/s (at least 8: tbf needs a few packets' worth).
pub fn parse_rate_kbit(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a rate like 256kbit or 1mbit"))?;
    let scale = match unit {
        "kbit" => 1.0,
        "mbit" => 1000.0,
        "gbit" => 1_000_000.0,
        _ => {
            return Err(format!(
                "'{text}': unknown unit '{unit}'; use kbit, mbit or gbit"
            ))
        }
    };
    let kbit = (value * scale).round() as u64;
    if kbit < 8 {
        return Err(format!("'{text}' is below 8kbit; use at least 8kbit"));
    }
    Ok(kbit)
}

/// "+300s", "-2m", "500ms" → milliseconds.
fn parse_signed_ms(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let (sign, rest) = match t.as_bytes().first() {
        Some(b'-') => (-1.0, &t[1..]),
        Some(b'+') => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    let split = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, unit) = rest.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration like 10s, 500ms, 2m or -30s"))?;
    let scale = match unit {
        "ms" => 1.0,
        "s" | "" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        // Days: retention ages (`prune --older-than 14d`).
        "d" => 86_400_000.0,
        _ => {
            return Err(format!(
                "'{text}': unknown unit '{unit}'; use ms, s, m, h or d"
            ))
        }
    };
    Ok((sign * value * scale).round() as i64)
}

/// A TOML error as "line N: message".
pub(super) fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let line = e
        .span()
        // The line holding the span's first byte: newlines before it, plus one (`lines()`
        // would miss the line the span starts, a key at the start of its line).
        .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    let msg = e.message().trim();
    match line {
        Some(l) => format!("line {l}: {msg}"),
        None => msg.to_string(),
    }
}

/// The 1-based line of the `index`-th `[[fault]]` header.
fn fault_line(text: &str, index: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("[[fault]]"))
        .nth(index)
        .map(|(i, _)| i + 1)
        .unwrap_or(1)
}

/// The 1-based line where `key` is first set, or 1.
fn line_of(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| l.trim_start().starts_with(key))
        .map(|i| i + 1)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_signs() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_signed_ms("-30s").unwrap(), -30_000);
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn flags_name_kinds() {
        let s = Schedule::from_flags(
            "kill,partition",
            Duration::from_secs(5),
            Duration::from_secs(3),
        )
        .unwrap();
        assert_eq!(s.kinds(), vec![FaultKind::Kill, FaultKind::Partition]);
        assert!(Schedule::from_flags("none", Duration::ZERO, Duration::ZERO)
            .unwrap()
            .faults
            .is_empty());
        let err = Schedule::from_flags("kill,meteor", Duration::ZERO, Duration::ZERO).unwrap_err();
        assert!(err.to_string().contains("meteor"), "{err}");
    }

    #[test]
    fn a_file_with_every_field_parses() {
        let text = r#"
interval = "4s"
duration = "2s"
fake_monotonic = true
[[fault]]
kind = "partition"
shape = "majorities-ring"
weight = 3
[[fault]]
kind = "clock"
mode = "strobe"
delta = "+5s"
period = "100ms"
target = "n1,n2"
"#;
        let s = Schedule::from_toml("t", text).unwrap();
        assert_eq!(s.interval, Duration::from_secs(4));
        assert!(s.fake_monotonic);
        assert_eq!(s.faults[0].shape, Some(PartitionShape::MajoritiesRing));
        assert_eq!(s.faults[0].weight, 3);
        assert_eq!(
            s.faults[1].clock,
            Some(ClockMode::Strobe {
                delta_ms: 5000,
                period_ms: 100
            })
        );
        assert_eq!(
            s.faults[1].target,
            TargetSpec::Nodes(vec!["n1".into(), "n2".into()])
        );
    }

    #[test]
    fn errors_name_the_line_and_the_fix() {
        let err = Schedule::from_toml(
            "t",
            "interval = \"4s\"\n[[fault]]\nkind = \"kill\"\ntarget = 7\n",
        )
        .unwrap_err();
        assert!(err.starts_with("line 4"), "{err}");
        let err = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"kill\"\n\n[[fault]]\nkind = \"partition\"\nshape = \"donut\"\n",
        )
        .unwrap_err();
        assert!(
            err.starts_with("line 4") && err.contains("donut") && err.contains("majorities-ring"),
            "{err}"
        );
        let err = Schedule::from_toml("t", "interval = \"4s\"\n").unwrap_err();
        assert!(err.contains("[[fault]]"), "{err}");
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\nshape = \"halves\"\n")
            .unwrap_err();
        assert!(err.contains("only for kind = \"partition\""), "{err}");
        let err = Schedule::from_toml("t", "colour = 1\n[[fault]]\nkind = \"kill\"\n").unwrap_err();
        assert!(err.starts_with("line 1") && err.contains("colour"), "{err}");
        // An unknown key inside a [[fault]] is named on its own line, not the one before.
        let err = Schedule::from_toml(
            "t",
            "interval = \"4s\"\n[[fault]]\nkind = \"kill\"\ncolour = 1\n",
        )
        .unwrap_err();
        assert!(err.starts_with("line 4") && err.contains("colour"), "{err}");
    }

    #[test]
    fn a_partition_may_cut_only_the_quorum_port() {
        let s = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"partition\"\nshape = \"one-way\"\nport = \"quorum\"\n",
        )
        .unwrap();
        assert_eq!(s.faults[0].cut, Cut::Quorum);
        let s = Schedule::from_toml("t", "[[fault]]\nkind = \"partition\"\n").unwrap();
        assert_eq!(s.faults[0].cut, Cut::Every, "every packet by default");
        let err = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"partition\"\nport = \"election\"\n",
        )
        .unwrap_err();
        assert!(
            err.contains("election") && err.contains("\"quorum\""),
            "{err}"
        );
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\nport = \"quorum\"\n")
            .unwrap_err();
        assert!(err.contains("only for kind = \"partition\""), "{err}");
    }

    #[test]
    fn frames_faults_parse_and_their_mistakes_are_named() {
        let s = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"frames\"\nmode = \"garbage\"\ntarget = \"leader\"\n",
        )
        .unwrap();
        let f = &s.faults[0];
        assert_eq!(
            (f.kind, f.frames),
            (FaultKind::Frames, Some(FrameMode::Garbage))
        );
        assert_eq!(f.target, TargetSpec::Leader);
        let d = Schedule::from_toml("t", "[[fault]]\nkind = \"frames\"\n").unwrap();
        assert_eq!(d.faults[0].frames, Some(FrameMode::Truncated));
        assert_eq!(d.faults[0].target, TargetSpec::Follower);
        let err = Schedule::from_toml("t", "\n[[fault]]\nkind = \"frames\"\nmode = \"cut\"\n")
            .unwrap_err();
        assert!(
            err.starts_with("line 2") && err.contains("truncated or garbage"),
            "{err}"
        );
        let err =
            Schedule::from_toml("t", "[[fault]]\nkind = \"frames\"\ndelta = \"1s\"\n").unwrap_err();
        assert!(err.contains("only for kind = \"clock\""), "{err}");
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\nmode = \"garbage\"\n")
            .unwrap_err();
        assert!(err.contains("\"frames\""), "{err}");
    }
}

#[cfg(test)]
mod group_tests {
    use super::*;

    #[test]
    fn groups_parse_and_are_checked() {
        let ok = "[[fault]]\nkind = \"partition\"\nshape = \"groups\"\ngroups = [[\"n1\", \"n2\"], [\"n3\"]]\n";
        let s = Schedule::from_toml("t", ok).unwrap();
        assert_eq!(s.faults[0].groups.as_ref().unwrap().len(), 2);
        let twice =
            "[[fault]]\nkind = \"partition\"\nshape = \"groups\"\ngroups = [[\"n1\"], [\"n1\"]]\n";
        assert!(Schedule::from_toml("t", twice)
            .unwrap_err()
            .contains("two groups"));
        let missing = "[[fault]]\nkind = \"partition\"\nshape = \"groups\"\n";
        assert!(Schedule::from_toml("t", missing)
            .unwrap_err()
            .contains("needs groups"));
        let stray = "[[fault]]\nkind = \"partition\"\nshape = \"halves\"\ngroups = [[\"n1\"]]\n";
        assert!(Schedule::from_toml("t", stray)
            .unwrap_err()
            .contains("only for shape"));
    }
}

#[cfg(test)]
mod aim_tests {
    use super::*;

    #[test]
    fn timing_triggers_and_parts_parse() {
        let text = "timing = \"exponential\"\n[[fault]]\nkind = \"kill\"\ntarget = \"trigger\"\nwhen = \"after-write-ack\"\nwait = \"3s\"\n[[fault]]\nkind = \"partition\"\nshape = \"leader-minority\"\ncompose = \"cut+kill\"\n[[fault.with]]\nkind = \"kill\"\ntarget = \"random\"\nafter = \"1s\"\nduration = \"2s\"\n";
        let s = Schedule::from_toml("t", text).unwrap();
        assert_eq!(s.timing, Timing::Exponential);
        assert_eq!(s.faults[0].when, Some(Trigger::AfterWriteAck));
        assert_eq!(s.faults[0].target, TargetSpec::Trigger);
        assert_eq!(s.faults[0].wait, Some(Duration::from_secs(3)));
        let cut = &s.faults[1];
        assert_eq!(cut.shape, Some(PartitionShape::LeaderMinority));
        assert_eq!(cut.with[0].after, Duration::from_secs(1));
        assert_eq!(cut.group_name().as_deref(), Some("cut+kill"));
        assert_eq!(
            cut.span(Duration::from_secs(2), Duration::from_secs(5)),
            Duration::from_secs(3)
        );
        assert_eq!(s.faults[1].line, Some(7));
        // A part with its own trigger, aimed at the node it names.
        let text = "[[fault]]\nkind = \"kill\"\n[[fault.with]]\nkind = \"kill\"\ntarget = \"trigger\"\nwhen = \"epoch-without-write\"\nwait = \"2s\"\nafter = \"100ms\"\nduration = \"3s\"\n";
        let part = &Schedule::from_toml("t", text).unwrap().faults[0].with[0];
        assert_eq!(part.when, Some(Trigger::EpochWithoutWrite));
        assert_eq!(part.target, TargetSpec::Trigger);
        assert_eq!(part.after, Duration::from_millis(100));
        // Parts aimed at the main fault's nodes and at the rest.
        let text = "[[fault]]\nkind = \"kill\"\ntarget = \"followers-low\"\n[[fault.with]]\nkind = \"power-loss\"\ntarget = \"main\"\nwhen = \"follower-synced\"\nwait = \"2s\"\nduration = \"3s\"\n[[fault.with]]\nkind = \"kill\"\ntarget = \"others\"\n";
        let parts = &Schedule::from_toml("t", text).unwrap().faults[0].with;
        assert_eq!(parts[0].target, TargetSpec::Main);
        assert_eq!(parts[1].target, TargetSpec::Others);
    }

    #[test]
    fn aiming_mistakes_name_the_fix() {
        let bad = |text: &str, want: &str| {
            let err = Schedule::from_toml("t", text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        };
        bad(
            "timing = \"poisson\"\n[[fault]]\nkind = \"kill\"\n",
            "fixed, exponential or jittered",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nwhen = \"sunrise\"\n",
            "leader-in-sync",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\ntarget = \"trigger\"\n",
            "needs when",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nwait = \"2s\"\n",
            "only for a triggered fault",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nafter = \"2s\"\n",
            "only for a composed part",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\ncompose = \"x\"\n",
            "add [[fault.with]]",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\n[[fault.with]]\nkind = \"pause\"\nwhen = \"election\"\nwait = \"5s\"\nduration = \"2s\"\n",
            "shorter than the part's duration",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\n[[fault.with]]\nkind = \"pause\"\ntarget = \"trigger\"\n",
            "needs when",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\ntarget = \"main\"\n",
            "use it in a [[fault.with]] part",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nwatch = \"n1\"\n",
            "watch is only for a triggered fault",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nwhen = \"election\"\nwatch = \"trigger\"\n",
            "not a set of nodes to watch",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nwhen = \"election\"\nwatch = \"main\"\n",
            "watch = \"main\" names nodes of a composition's main fault",
        );
    }

    #[test]
    fn a_part_watches_the_nodes_it_names() {
        let text = "[[fault]]\nkind = \"kill\"\n[[fault.with]]\nkind = \"kill\"\nwhen = \"leader-in-sync\"\nwatch = \"followers-high\"\nwait = \"1s\"\nduration = \"2s\"\n";
        let s = Schedule::from_toml("t", text).unwrap();
        assert_eq!(s.faults[0].watch, None);
        assert_eq!(s.faults[0].with[0].watch, Some(TargetSpec::FollowersHigh));
    }
}

#[cfg(test)]
mod packet_tests {
    use super::*;

    fn fault(body: &str) -> Result<FaultTemplate, String> {
        Schedule::from_toml("t", &format!("[[fault]]\nkind = \"packet\"\n{body}"))
            .map(|mut s| s.faults.remove(0))
    }

    #[test]
    fn packet_modes_parse_with_their_defaults() {
        let t = fault("").unwrap();
        assert_eq!(t.packet, Some(PacketMode::Loss { percent: 30.0 }));
        assert_eq!(t.target, TargetSpec::All, "every link unless told");
        let t = fault("mode = \"delay\"\ndelay = \"80ms\"\njitter = \"10ms\"\nshape = \"one-way\"\ntarget = \"leader\"").unwrap();
        assert_eq!(
            t.packet,
            Some(PacketMode::Delay {
                delay_ms: 80,
                jitter_ms: 10
            })
        );
        assert_eq!(t.shape, Some(PartitionShape::OneWay));
        assert_eq!(
            fault("mode = \"bandwidth\"\nrate = \"1.5mbit\"")
                .unwrap()
                .packet,
            Some(PacketMode::Bandwidth { rate_kbit: 1500 })
        );
        assert_eq!(
            fault("mode = \"reorder\"").unwrap().packet,
            Some(PacketMode::Reorder {
                percent: 25.0,
                delay_ms: 50
            })
        );
        assert_eq!(
            fault("mode = \"duplicate\"\npercent = 5").unwrap().packet,
            Some(PacketMode::Duplicate { percent: 5.0 })
        );
    }

    #[test]
    fn bad_packet_settings_name_the_key_and_the_fix() {
        let err = fault("mode = \"teleport\"").unwrap_err();
        assert!(
            err.contains("teleport") && err.contains("bandwidth"),
            "{err}"
        );
        let err = fault("percent = 130").unwrap_err();
        assert!(
            err.contains("percent = 130") && err.contains("at most 100"),
            "{err}"
        );
        let err = fault("mode = \"loss\"\ndelay = \"10ms\"").unwrap_err();
        assert!(err.contains("delay does not apply"), "{err}");
        let err = fault("mode = \"delay\"\njitter = \"200ms\"").unwrap_err();
        assert!(err.contains("jitter"), "{err}");
        let err = fault("mode = \"bandwidth\"\nrate = \"fast\"").unwrap_err();
        assert!(err.contains("rate") && err.contains("kbit"), "{err}");
        let err =
            Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\npercent = 3\n").unwrap_err();
        assert!(err.contains("only for kind = \"packet\""), "{err}");
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\nfile = \"txnlog\"\n")
            .unwrap_err();
        assert!(err.contains("only for kind = \"corrupt\""), "{err}");
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"corrupt\"\nfile = \"myid\"\n")
            .unwrap_err();
        assert!(err.contains("acceptedEpoch"), "{err}");
        let ok = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"corrupt\"\nfile = \"currentEpoch\"\n",
        )
        .unwrap();
        assert_eq!(ok.faults[0].file.as_deref(), Some("currentEpoch"));
    }
}
