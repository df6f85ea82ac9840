//! The history: every observation, operation and fault of a run, in Jepsen's shape, one JSON
//! object per line (`history.jsonl.zst`, compressed; see [`file`]). The controller streams it
//! to disk as it happens; the
//! checkers, the report and the controller's own live recovery wait read it through this
//! module only.
//!
//! `time` is nanoseconds since the run started on the controller's monotonic clock, never a
//! node's clock (nodes' clocks are what the clock nemesis breaks).
//!
//! # API in one screen
//! - Model (this file): [`EventType`], [`F`] (the `f` of a line; unknown names read as
//!   [`F::Other`], never an error), [`FaultKind`] (the one enum of fault kinds, also the
//!   nemesis schedule's), [`Event`] (an owned line, for writers and tests), typed values:
//!   [`FaultValue`], [`NodeExitValue`], [`InterruptedValue`].
//! - [`line`]: ONE decoder of one line: [`line::decode`] = a fast byte scanner
//!   ([`fast`]) that falls back to serde ([`line::fallback`]) and, by construction and by a
//!   property test, gives the fallback's answer on every input. It yields a borrowed
//!   [`line::Line`] whose [`line::Body`] is typed per kind (status read, unreachable read,
//!   write, final log, fault action, node exit, interruption, other) without a
//!   `serde_json::Value` per line.
//! - [`read`]: ONE file reader: block splitter, the torn-tail rule (only an unterminated last
//!   line is forgiven), errors naming file, line and column ([`read::BadLine`], exit 254 via
//!   `crate::exit::bad_input`), sequential ([`read::for_each`]) or in parallel parts
//!   ([`read::fold_parts`]); every line comes with its [`read::Located`] (event position,
//!   line number, byte offset) for quoting evidence ([`read::quote`]).
//! - [`file`]: the two shapes on disk (zstd frames as a run writes them, or plain text) behind
//!   ONE opener, [`file::HistoryFile`], whose readers read and seek in the plain text;
//!   [`file::in_run`] finds a run folder's history.
//! - [`store::HistoryWriter`]: ONE writer (the run's `Recorder` appends through it).
//! - [`view`]: pure derived facts, fed events in order (incrementally, live or from a file):
//!   per-node state, fault intervals, THE definition of a quorum-backed leader, leaderless
//!   windows, leader overlaps, per-fault recovery times.
//! - [`test_info`]: `test.json` ([`test_info::TestInfo`], typed [`test_info::Settings`],
//!   `history_format`).
//!
//! A reader in a few lines (what the report does):
//! ```no_run
//! use fle_chaos::history::{line::Body, read, view::View};
//! # fn f(path: &std::path::Path, nodes: &[String]) -> anyhow::Result<()> {
//! let mut view = View::new(nodes);
//! read::for_each(path, |at, line, _election| {
//!     let e = view.of_line(at.pos, line);
//!     view.feed(e); // the derived facts, incrementally
//!     if let Body::Status(s) = &line.body {
//!         // s.state, s.leader, s.peer_epoch, s.last_zxid, s.wall_clock_ms ...
//!         let _ = (at.offset, line.text, s.leads());
//!     }
//! })?; // a damaged history: Err(read::BadLine) inside, map it to exit 254
//! let done = view.finish(); // recoveries, intervals, windows, overlaps, final heal
//! # let _ = done; Ok(()) }
//! ```

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub mod fast;
pub mod file;
pub mod line;
pub mod read;
pub mod recorder;
pub mod register;
pub mod situation;
pub mod store;
#[cfg(test)]
pub mod test_feed;
pub mod test_info;
pub mod view;

/// The history line format this version writes (`test.json` `history_format`; absent = 1).
pub const FORMAT_VERSION: u32 = 1;

/// Jepsen's operation types: `invoke` starts an operation; `ok` it happened; `fail` it certainly
/// did not happen; `info` the outcome is unknown (or, for the nemesis, "this was done").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    Invoke,
    Ok,
    Fail,
    Info,
}

impl EventType {
    pub fn parse(s: &str) -> Option<EventType> {
        Some(match s {
            "invoke" => EventType::Invoke,
            "ok" => EventType::Ok,
            "fail" => EventType::Fail,
            "info" => EventType::Info,
            _ => return None,
        })
    }

    /// The word the history writes.
    pub fn name(self) -> &'static str {
        match self {
            EventType::Invoke => "invoke",
            EventType::Ok => "ok",
            EventType::Fail => "fail",
            EventType::Info => "info",
        }
    }
}

/// What an event is about.
///
/// Conventions every writer and reader follows:
/// - Observers (`process` = node name) record one completed read per poll: `ok` with an
///   `api::NodeStatus` value, or `fail`/`info` with `{"error": "..."}` when unreachable / timed out.
/// - Clients (`process` = client number) record `invoke` then `ok`/`fail`/`info`; a write's invoke
///   value is `{"value": V}`, its ok value `{"value": V, "zxid": Z}`. The `register`
///   workload's `read`/`set`/`cas`/`create` carry a [`register::RegisterValue`].
/// - The final read of each node's log is one `FinalLog` event per node: `ok` with
///   `{"entries": [{"zxid", "value"}..], "last_committed_zxid": Z}`, or `fail`/`info` with an error.
/// - The nemesis (`process` = "nemesis") records each action as `invoke` then `info` (done, with
///   exactly what was done: nodes, pids, rules, offsets) or `fail` (it could not be done).
///   A fault starts with `Kill`, `Pause`, `Partition` or `Clock` and is undone by `Start`, `Resume`,
///   `Heal` or a `Clock` whose value has `"mode": "reset"` respectively ([`FaultValue`]).
///   The heal of the final phase has `"final": true` in its value.
/// - Run markers: `NodeExit` (a node process exited unasked, [`NodeExitValue`]) and
///   `Interrupted` (the controller got a signal, [`InterruptedValue`]).
/// - Any other `f` reads as [`F::Other`] (its name stays in the line): a newer writer's event
///   an older reader does not know is kept, opaque, never an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum F {
    /// An observer's read of a node's `/status` (value: `api::NodeStatus`, or `{"error": ..}`).
    Status,
    /// A client write (invoke value: `{"value": V}`; ok value: `{"value": V, "zxid": Z}`).
    Write,
    /// A client's read of a key (workload `register`; value: [`register::RegisterValue`]).
    Read,
    /// A client's unconditional write of a key (ZooKeeper's setData, version -1).
    Set,
    /// A client's compare-and-set of a key on its version (setData with a version).
    Cas,
    /// A client's create of a key (the register workload creates its keys first).
    Create,
    /// The final read of a node's committed log (value: `{"entries": [{zxid, value}..]}`).
    FinalLog,
    Kill,
    Start,
    Pause,
    Resume,
    Partition,
    Heal,
    Clock,
    /// Issue 17's fault kinds (names agreed in CONTRACTS.md): undone by `Start`/`Heal`.
    PowerLoss,
    Corrupt,
    Packet,
    /// Bad election frames written to a node's election port (issue 16): started and healed
    /// at once, recorded like the others.
    Frames,
    /// Servers removed from the ensemble's config (a `reconfig` fault; value `version`: the
    /// new config's), undone by `Add`.
    Remove,
    /// Servers added back to the config (the undo of `Remove`).
    Add,
    /// A node process exited without the controller asking ([`NodeExitValue`]).
    NodeExit,
    /// The controller was interrupted by a signal ([`InterruptedValue`]).
    Interrupted,
    /// An `f` this version does not know (serialised as "other"; readers keep the raw name).
    #[serde(other)]
    Other,
}

impl F {
    /// The `f` for a line's text; unknown names are `Other`.
    pub fn parse(s: &str) -> F {
        match s {
            "status" => F::Status,
            "write" => F::Write,
            "read" => F::Read,
            "set" => F::Set,
            "cas" => F::Cas,
            "create" => F::Create,
            "final-log" => F::FinalLog,
            "kill" => F::Kill,
            "start" => F::Start,
            "pause" => F::Pause,
            "resume" => F::Resume,
            "partition" => F::Partition,
            "heal" => F::Heal,
            "clock" => F::Clock,
            "power-loss" => F::PowerLoss,
            "corrupt" => F::Corrupt,
            "packet" => F::Packet,
            "frames" => F::Frames,
            "remove" => F::Remove,
            "add" => F::Add,
            "node-exit" => F::NodeExit,
            "interrupted" => F::Interrupted,
            _ => F::Other,
        }
    }

    /// A client's operation (invoke, then ok / fail / info): a write of the `writes` workload
    /// or a `register` operation.
    pub fn is_client_op(self) -> bool {
        matches!(self, F::Write | F::Read | F::Set | F::Cas | F::Create)
    }

    /// A nemesis action (a fault or its undo): its value is a [`FaultValue`].
    pub fn is_fault_action(self) -> bool {
        matches!(
            self,
            F::Kill
                | F::Start
                | F::Pause
                | F::Resume
                | F::Partition
                | F::Heal
                | F::Clock
                | F::PowerLoss
                | F::Corrupt
                | F::Packet
                | F::Frames
                | F::Remove
                | F::Add
        )
    }
}

/// The kinds of fault, one definition for the nemesis schedule, the history, the checkers and
/// the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    Kill,
    Pause,
    Partition,
    Clock,
    /// Kill + the loss of every write not yet fsynced (lazyfs); undone by `start`.
    PowerLoss,
    /// Kill + damage to a data file (flipped bits, a zeroed block, a truncation); undone by
    /// `start`.
    Corrupt,
    /// Lost, delayed, duplicated, reordered or throttled packets on directed links; undone by
    /// `heal` (value `undoes: "packet"`).
    Packet,
    /// Garbage or truncated frames written to a node's election port by the controller, as
    /// a peer that names itself with a larger sid; instantaneous, its `heal` (value
    /// `undoes: "frames"`) only closes its record.
    Frames,
    /// Servers removed from the ensemble's config through the leader (ZooKeeper's
    /// `reconfig -remove`); undone by `add` (`reconfig -add` with their own lines).
    Reconfig,
}

/// What a fault does to the nodes it names while in force, as the layers below the nemesis
/// read it (the cluster view, the checkers' notion of a node that is down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The process does not run (killed, stopped by SIGSTOP, powered off, restarted on a
    /// damaged disk); `forgets`: it comes back as a new process, what it was is not known.
    Stops { forgets: bool },
    /// Its links drop what the value's `drops` names.
    Cuts,
    /// No node stops and no link is cut by the controller's record of it (clocks, degraded
    /// packets, bad frames, membership).
    Neither,
}

/// What the layers below the nemesis know of a kind: one row per kind in [`FACTS`], the
/// kind's behaviour in `nemesis::faults`.
#[derive(Debug, Clone, Copy)]
pub struct KindFacts {
    pub kind: FaultKind,
    /// Its name in the history, schedules and flags (serde's spelling of the variant).
    pub name: &'static str,
    /// The `f` of the action that starts it.
    pub starts: F,
    /// The `f` of the action that undoes it.
    pub undone_by: F,
    /// Whether its undo names it (`undoes`): it shares its undo's `f` with a kind that plainly
    /// owns that `f` (a `start` ends a kill, a `heal` a partition, a clock `reset` a clock).
    pub undo_tagged: bool,
    /// Whether its undo ends every fault of the kind in force, whichever nodes it names (a
    /// `heal` takes the whole chain or every link's degradation away).
    pub undo_ends_all: bool,
    pub effect: Effect,
    /// Its shade in the report's plots (red, green, blue).
    pub colour: (u8, u8, u8),
}

/// Every kind's facts, in the order kinds are listed everywhere ([`FaultKind::ALL`]).
pub const FACTS: [KindFacts; 9] = {
    const fn row(kind: FaultKind, name: &'static str, starts: F, undone_by: F) -> KindFacts {
        KindFacts {
            kind,
            name,
            starts,
            undone_by,
            undo_tagged: false,
            undo_ends_all: false,
            effect: Effect::Neither,
            colour: (0, 0, 0),
        }
    }
    use FaultKind as K;
    let stops = Effect::Stops { forgets: true };
    [
        KindFacts {
            effect: stops,
            colour: (214, 39, 40),
            ..row(K::Kill, "kill", F::Kill, F::Start)
        },
        KindFacts {
            effect: Effect::Stops { forgets: false },
            colour: (148, 103, 189),
            ..row(K::Pause, "pause", F::Pause, F::Resume)
        },
        KindFacts {
            undo_ends_all: true,
            effect: Effect::Cuts,
            colour: (255, 127, 14),
            ..row(K::Partition, "partition", F::Partition, F::Heal)
        },
        KindFacts {
            colour: (23, 190, 207),
            ..row(K::Clock, "clock", F::Clock, F::Clock)
        },
        KindFacts {
            undo_tagged: true,
            effect: stops,
            colour: (140, 86, 75),
            ..row(K::PowerLoss, "power-loss", F::PowerLoss, F::Start)
        },
        KindFacts {
            undo_tagged: true,
            effect: stops,
            colour: (227, 119, 194),
            ..row(K::Corrupt, "corrupt", F::Corrupt, F::Start)
        },
        KindFacts {
            undo_tagged: true,
            undo_ends_all: true,
            colour: (188, 189, 34),
            ..row(K::Packet, "packet", F::Packet, F::Heal)
        },
        KindFacts {
            undo_tagged: true,
            colour: (82, 84, 163),
            ..row(K::Frames, "frames", F::Frames, F::Heal)
        },
        KindFacts {
            colour: (44, 160, 44),
            ..row(K::Reconfig, "reconfig", F::Remove, F::Add)
        },
    ]
};

impl FaultKind {
    /// Every kind, in [`FACTS`]' order.
    pub const ALL: [FaultKind; FACTS.len()] = {
        let mut all = [FaultKind::Kill; FACTS.len()];
        let mut i = 0;
        while i < FACTS.len() {
            all[i] = FACTS[i].kind;
            i += 1;
        }
        all
    };

    /// Its row of [`FACTS`] (rows are in the variants' order, test).
    pub fn facts(self) -> &'static KindFacts {
        &FACTS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.facts().name
    }

    pub fn parse(s: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Whether the fault stops its nodes' processes until its undo.
    pub fn stops_node(self) -> bool {
        matches!(self.facts().effect, Effect::Stops { .. })
    }

    /// Whether the fault cuts links (its value's `drops`) until its undo.
    pub fn cuts_links(self) -> bool {
        self.facts().effect == Effect::Cuts
    }

    /// The `f` of the action that undoes this fault.
    pub fn undo_f(self) -> F {
        self.facts().undone_by
    }

    /// Whether its undo names it ([`KindFacts::undo_tagged`]).
    pub fn undo_is_tagged(self) -> bool {
        self.facts().undo_tagged
    }

    /// The `f` of the action that starts this fault.
    pub fn f(self) -> F {
        self.facts().starts
    }
}

/// What a nemesis action does to a fault: start one, or undo one of this kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultStep {
    Starts(FaultKind),
    Undoes(FaultKind),
}

/// The value of a nemesis action (`f` a fault or its undo). Only the fields readers use are
/// typed; others (pids, rules, chain, errors, ...) are kept by the line's raw text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultValue {
    /// The affected nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The final phase's heal/start/resume.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub r#final: bool,
    /// Clock: "bump", "strobe", "rate", or "reset" (which undoes a clock fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Partition: the shape's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// Partition: `drops[a]` lists the nodes whose traffic `a` drops.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub drops: BTreeMap<String, Vec<String>>,
    /// Partition: "quorum" when only the Zab connections were cut (`port = "quorum"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// `start`: the kind of fault it ends when not a kill (power-loss, corrupt); `heal`: packet
    /// or frames when it ends those rather than a partition ([`FaultKind::undo_is_tagged`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undoes: Option<FaultKind>,
    /// Why the action failed (`fail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A fault's start: when it was due, in ms since the workload started (anchors replays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    /// A fault's start: how long it was to last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Clock: the offset set (bump, strobe), in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_ms: Option<i64>,
    /// Clock strobe: how often it flips, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ms: Option<u64>,
    /// Clock rate: how fast the clock runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    /// Corrupt: the data file damaged ("txnlog", "acceptedEpoch", ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Reconfig: [`OBSERVER_ROLE`] when the servers were demoted rather than removed,
    /// [`PARTICIPANT_ROLE`] when observers were promoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Reconfig's `remove`, and the `kill` it made: the removed servers were replaced (killed,
    /// wiped, started afresh), as a Kubernetes pod is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replace: bool,
    /// `start`: the node started on an empty data dir (a replaced server): its epochs and log
    /// begin again, and the checkers judge it from there as a new server.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wiped: bool,
}

/// How far ahead of real time a clock fault may put a node's clock by its end: how long its
/// reset can stall timers set while it was in force (a deadline taken from a clock that then
/// goes back is reached that much later).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClockLead {
    /// A bump or strobe: at most its offset (a strobe flips between the offset and 0); 0 for a
    /// clock set back, whose reset moves it forward.
    Ms(u64),
    /// A rate: this (`factor - 1`, at least 0) times how long it lasted.
    Rate(f64),
    /// The mode is not one the controller writes: any lead.
    Unknown,
}

impl FaultValue {
    /// The kill a reconfig's `replace` made (its servers replaced once removed): part of that
    /// reconfig, not a fault of its own.
    pub fn made_by_replace(&self, f: F) -> bool {
        f == F::Kill && self.replace
    }

    /// A clock fault's start: how far ahead it may put the clock ([`ClockLead`]).
    pub fn clock_lead(&self) -> ClockLead {
        match (self.mode.as_deref(), self.offset_ms, self.factor) {
            (Some("bump" | "strobe"), Some(ms), _) => ClockLead::Ms(ms.max(0).unsigned_abs()),
            (Some("rate"), _, Some(f)) => ClockLead::Rate((f - 1.0).max(0.0)),
            _ => ClockLead::Unknown,
        }
    }

    /// What the action `f` with this value does, if it starts or undoes a fault: an action
    /// named after a kind starts it (a clock `reset` undoes one); `start`, `resume` and `heal`
    /// undo the kind their `undoes` names, else the one they plainly undo ([`FaultKind::undo_f`]).
    pub fn step(&self, f: F) -> Option<FaultStep> {
        if f == F::Clock && self.mode.as_deref() == Some(CLOCK_RESET) {
            return Some(FaultStep::Undoes(FaultKind::Clock));
        }
        if let Some(kind) = FaultKind::ALL.into_iter().find(|k| k.f() == f) {
            return Some(FaultStep::Starts(kind));
        }
        let tagged = self.undoes.filter(|k| k.undo_f() == f);
        let plain = (FaultKind::ALL.into_iter()).find(|k| !k.undo_is_tagged() && k.undo_f() == f);
        tagged.or(plain).map(FaultStep::Undoes)
    }

    /// The recorded value of the action that undoes `kind` on `nodes` (`final` for the final
    /// heal's): the one definition real and simulated runs record, which [`FaultValue::step`]
    /// reads back.
    pub fn undo(kind: FaultKind, nodes: &[String], last: bool) -> FaultValue {
        FaultValue {
            nodes: nodes.to_vec(),
            r#final: last,
            undoes: kind.undo_is_tagged().then_some(kind),
            mode: (kind == FaultKind::Clock).then(|| CLOCK_RESET.to_string()),
            offset_ms: (kind == FaultKind::Clock).then_some(0),
            ..FaultValue::default()
        }
    }
}

impl FaultValue {
    /// The value as a history line holds it (fields in their serialized order).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a fault value is plain data")
    }
}

/// The `role` of a reconfig that demotes voters (the schedule's `role = "observer"`, the
/// recorded value's `role`).
pub const OBSERVER_ROLE: &str = "observer";
/// The `role` of a reconfig that promotes observers to voters (ZooKeeper's word for a voter).
pub const PARTICIPANT_ROLE: &str = "participant";

/// The clock `mode` of the action that undoes a clock fault.
pub const CLOCK_RESET: &str = "reset";

/// `node-exit`: a node process exited without the controller having killed or stopped it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeExitValue {
    #[serde(default)]
    pub status: Option<i32>,
    #[serde(default)]
    pub signal: Option<String>,
    #[serde(default)]
    pub caused_by_controller: bool,
    #[serde(default)]
    pub log_tail: Vec<String>,
}

/// `interrupted`: the controller got SIGINT, SIGTERM or SIGHUP.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterruptedValue {
    pub signal: String,
}

/// The `process` of an event: a node's observer ("n3"), the nemesis, or a client number.
pub const NEMESIS: &str = "nemesis";
/// The `process` of the controller's own markers (`interrupted`).
pub const CONTROLLER: &str = "controller";

/// One line of `history.jsonl`, owned (writers and tests; readers use [`line::Line`]). A
/// writer that holds its value typed (the simulator's status reads) writes `Event<&T>`: the
/// same line without building a `serde_json::Value` first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event<V = serde_json::Value> {
    pub index: u64,
    /// Nanoseconds since the run started (controller's monotonic clock).
    pub time: u64,
    pub process: String,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub f: F,
    /// The node the event concerns ("n1".."nN"), when it concerns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default)]
    pub value: V,
}

/// Node names are "n1".."nN"; the number is the node's sid (myid).
pub fn node_name(sid: u64) -> String {
    format!("n{sid}")
}

/// The sid in a node name ("n3" -> 3).
pub fn sid_of(node: &str) -> Option<u64> {
    node.strip_prefix('n')?.parse().ok()
}

#[cfg(test)]
mod fault_step_tests {
    use super::{FaultKind, FaultStep, FaultValue, F};

    #[test]
    fn every_kind_is_started_by_its_action_and_undone_by_the_value_its_undo_records() {
        let nodes = vec!["n2".to_string()];
        for kind in FaultKind::ALL {
            let start = FaultValue {
                nodes: nodes.clone(),
                ..FaultValue::default()
            };
            assert_eq!(
                start.step(kind.f()),
                Some(FaultStep::Starts(kind)),
                "{kind:?}"
            );
            // Through the bytes a history line holds, as a reader sees them.
            let text = serde_json::to_string(&FaultValue::undo(kind, &nodes, true)).unwrap();
            let read: FaultValue = serde_json::from_str(&text).unwrap();
            assert!(read.r#final, "{text}");
            let step = read.step(kind.undo_f());
            assert_eq!(step, Some(FaultStep::Undoes(kind)), "{kind:?}: {text}");
        }
    }

    #[test]
    fn every_kind_has_one_row_of_facts_named_as_serde_spells_it() {
        for kind in FaultKind::ALL {
            let spelled = serde_json::to_value(kind).unwrap();
            assert_eq!(spelled, serde_json::json!(kind.name()), "{kind:?}");
            assert_eq!(FaultKind::parse(kind.name()), Some(kind));
            assert_eq!(
                kind.facts().kind,
                kind,
                "FACTS' rows in the variants' order"
            );
        }
    }

    #[test]
    fn an_undo_names_its_kind_only_where_a_plainer_kind_shares_its_action() {
        let text = serde_json::to_string(&FaultValue::undo(FaultKind::PowerLoss, &[], false));
        assert_eq!(text.unwrap(), r#"{"undoes":"power-loss"}"#);
        let kill = FaultValue::undo(FaultKind::Kill, &[], false);
        assert_eq!(kill.undoes, None);
        // A heal that names a kind another action undoes is no undo of it.
        let odd = FaultValue {
            undoes: Some(FaultKind::PowerLoss),
            ..FaultValue::default()
        };
        assert_eq!(
            odd.step(F::Heal),
            Some(FaultStep::Undoes(FaultKind::Partition))
        );
        let bad = serde_json::from_str::<FaultValue>(r#"{"undoes":"flood"}"#);
        assert!(bad.unwrap_err().to_string().contains("unknown variant"));
    }
}
