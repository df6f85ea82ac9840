//! One pass over `history.jsonl` through `history::read` (the one reader: the same lines are
//! accepted and rejected as by `fle-chaos check`, with the same error naming file, line and
//! column) that keeps only what the report draws: lane spans per node, per-pixel-column series
//! (epochs, zxids, clock offsets, operation latencies), the fault schedule, and the first lines
//! of the history. Every line is also fed to `history::view`, which alone decides when faults
//! were in force, how long each took to a quorum-backed leader, who the quorum-backed leader
//! was (its changes are kept) and what held at each evidence event (`moment`). Memory stays
//! flat however long the run was.

use super::lane::LaneState;
use super::moment::{LeaderChange, Moment};
use super::places::Places;
use super::schedule::{Schedule, ScheduleRow};
use super::series::ColumnSeries;
use crate::api::ZabPhase;
use crate::checker::load::Rider;
use crate::history::file::HistoryFile;
use crate::history::line::{Body, Line, StatusRead};
use crate::history::read::{self, Part};
use crate::history::test_info::TestInfo;
use crate::history::view::{FaultInterval, FaultRecovery};
use crate::history::EventType;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Width, in columns, of every time series: one per pixel of the widest plot area.
pub const COLUMNS: usize = 1100;
/// How many history lines the page shows.
pub const HEAD_LINES: usize = 200;
const HEAD_LINE_CHARS: usize = 400;

/// A stretch of time during which a node's lane shows one thing.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub start_ns: u64,
    pub end_ns: u64,
    pub state: LaneState,
    pub leader: Option<u64>,
    pub epoch: u64,
    /// Zab phase of the reads (None: unreachable).
    pub phase: Option<ZabPhase>,
    /// History index of the span's first read, and the last logged zxid at its first and
    /// last read.
    pub start_index: u64,
    pub zxid_first: u64,
    pub zxid_last: u64,
}

/// Everything a node contributes to the plots.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeData {
    pub spans: Vec<Span>,
    pub epoch: ColumnSeries,
    /// The low 32 bits of the last logged zxid (the counter within the epoch).
    pub zxid_counter: ColumnSeries,
    /// Node wall clock minus the controller's idea of now, in seconds.
    pub clock_offset_s: ColumnSeries,
}

/// Operations of one outcome (ok, fail, info) per column: latency spread and count.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSeries {
    pub ok: ColumnSeries,
    pub fail: ColumnSeries,
    pub info: ColumnSeries,
}

/// What the report knows about a run's history.
#[derive(Debug)]
pub struct RunData {
    pub t_end_ns: u64,
    pub events: u64,
    pub nodes: BTreeMap<String, NodeData>,
    pub ops: OpSeries,
    /// Each fault from its start to its undo (`history::view`'s).
    pub faults: Vec<FaultInterval>,
    pub schedule: Vec<ScheduleRow>,
    /// Each fault's time to a quorum-backed leader (`history::view`'s, the recovery
    /// checker's definition).
    pub recoveries: Vec<FaultRecovery>,
    pub head: Vec<String>,
    /// The view at each event asked for (`scan_at`), by history index.
    pub moments: BTreeMap<u64, Moment>,
    /// Every change of the quorum-backed leader, in time order.
    pub leader_changes: Vec<LeaderChange>,
    /// The invalid checkers' evidence times, marked in every time plot (set by the caller
    /// from results.json; the history alone has none).
    pub violations: Vec<super::violations::Violation>,
}

impl RunData {
    /// The report's data: the pass's fold of the lines, the view's answers (`view_pass`) and
    /// the invalid checkers' evidence times.
    pub fn of(
        lines: Lines,
        viewed: super::view_pass::Viewed,
        violations: Vec<super::violations::Violation>,
    ) -> RunData {
        RunData {
            t_end_ns: lines.t_end_ns,
            events: lines.events,
            nodes: lines.nodes,
            ops: lines.ops,
            faults: viewed.faults,
            schedule: lines.schedule,
            recoveries: viewed.recoveries,
            head: lines.head,
            moments: viewed.moments,
            leader_changes: viewed.leader_changes,
            violations,
        }
    }
}

/// The report's fold of one part of a history (`checker::RunFiles::load` runs one per part,
/// beside the checkers' digest, as its `Rider`): lanes, series, operations, the schedule and
/// the first lines. What needs the whole history in order (the view) is not here: `view_pass`
/// asks the checkers' digest for it, in memory.
#[derive(Clone)]
pub struct LineFold {
    t_end_ns: u64,
    started_at_ms: i64,
    events: u64,
    nodes: BTreeMap<String, NodeData>,
    ops: OpSeries,
    pending_ops: HashMap<String, u64>,
    /// Processes with an operation line in this part, and the completions whose invocation
    /// is in an earlier part (paired when the parts are joined).
    touched: HashSet<String>,
    unpaired: Vec<(String, EventType, u64)>,
    schedule: Schedule,
    head: Vec<String>,
    places: Places,
}

impl LineFold {
    /// An empty fold: `t_end_ns` is the history's last time (`read::last_event_time`),
    /// `nodes` test.json's (lanes appear even for nodes never read), `started_at_ms` anchors
    /// clock offsets.
    fn empty(t_end_ns: u64, nodes: &[String], started_at_ms: i64) -> Self {
        let t_end_ns = t_end_ns.max(1);
        let series = || ColumnSeries::new(t_end_ns, COLUMNS);
        let mut s = Self {
            t_end_ns,
            started_at_ms,
            events: 0,
            nodes: BTreeMap::new(),
            ops: OpSeries {
                ok: series(),
                fail: series(),
                info: series(),
            },
            pending_ops: HashMap::new(),
            touched: HashSet::new(),
            unpaired: Vec::new(),
            schedule: Schedule::default(),
            head: Vec::new(),
            places: Places::default(),
        };
        for n in nodes {
            s.node(n);
        }
        s
    }

    fn node(&mut self, name: &str) -> &mut NodeData {
        if !self.nodes.contains_key(name) {
            let data = NodeData::new(self.t_end_ns);
            self.nodes.insert(name.to_string(), data);
        }
        self.nodes.get_mut(name).expect("inserted above")
    }

    /// Takes the part's next line.
    fn take(&mut self, at: read::Located, l: &Line<'_>) {
        self.events += 1;
        self.places.note(at.pos, l.index, at.line_no);
        if self.head.len() < HEAD_LINES {
            self.head
                .push(super::text::shorten(l.text.trim_end(), HEAD_LINE_CHARS));
        }
        match (&l.body, l.f) {
            (Body::Status(s), _) => self.status(l, Some(s)),
            (Body::Unreachable, _) if l.kind != EventType::Invoke => self.status(l, None),
            (_, f) if f.is_client_op() => self.op(l),
            (Body::Fault(_), _) => self.schedule.line(l),
            _ => {}
        }
    }

    /// A status read: `read` None when the node could not be read.
    fn status(&mut self, l: &Line<'_>, read: Option<&StatusRead<'_>>) {
        let name = l.node.as_deref().unwrap_or(&l.process);
        let t = l.time;
        let span = match read {
            Some(r) => Span::at(t, l.index, r.into(), r.last_zxid),
            None => Span::at(t, l.index, Lane::DOWN, 0),
        };
        let started_at_ms = self.started_at_ms;
        let node = self.node(name);
        node.extend(span);
        if let Some(r) = read {
            node.epoch.add(t, r.peer_epoch as f64);
            node.zxid_counter
                .add(t, crate::api::counter_of(r.last_zxid) as f64);
            if let Some(w) = r.wall_clock_ms {
                let offset = (w - started_at_ms) as f64 / 1e3 - t as f64 / 1e9;
                node.clock_offset_s.add(t, offset);
            }
        }
    }

    fn op(&mut self, l: &Line<'_>) {
        let first_here = self.touched.insert(l.process.to_string());
        if l.kind == EventType::Invoke {
            self.pending_ops.insert(l.process.to_string(), l.time);
            return;
        }
        match self.pending_ops.remove(l.process.as_ref()) {
            Some(start) => self.ops.add(l.kind, start, l.time),
            // Its invocation may be in the part before.
            None if first_here => self.unpaired.push((l.process.to_string(), l.kind, l.time)),
            None => {}
        }
    }

    /// The next part's fold after this one's, as one pass over both would have left it.
    fn append(&mut self, next: LineFold, pos_base: u32, line_base: u64) {
        self.events += next.events;
        self.places.join(next.places, pos_base, line_base);
        let room = HEAD_LINES.saturating_sub(self.head.len());
        self.head.extend(next.head.into_iter().take(room));
        for (name, data) in next.nodes {
            match self.nodes.get_mut(&name) {
                Some(mine) => mine.append(data),
                None => {
                    self.nodes.insert(name, data);
                }
            }
        }
        for (process, kind, time) in next.unpaired {
            if let Some(start) = self.pending_ops.remove(&process) {
                self.ops.add(kind, start, time);
            }
        }
        for process in &next.touched {
            self.pending_ops.remove(process);
        }
        self.pending_ops.extend(next.pending_ops);
        self.touched.extend(next.touched);
        self.ops.merge(next.ops);
        self.schedule.append(next.schedule);
    }

    fn finish(mut self) -> Lines {
        // Each lane's last span runs to the end of the history.
        for node in self.nodes.values_mut() {
            if let Some(last) = node.spans.last_mut() {
                last.end_ns = last.end_ns.max(self.t_end_ns);
            }
        }
        Lines {
            t_end_ns: self.t_end_ns,
            events: self.events,
            nodes: self.nodes,
            ops: self.ops,
            schedule: self.schedule.rows,
            head: self.head,
            places: self.places,
        }
    }
}

impl Rider for LineFold {
    type Joined = Lines;

    /// An empty fold: its end is the history's last time (`read::last_event_time`), its lanes
    /// test.json's nodes (a lane appears even for a node never read), its clock offsets
    /// anchored at the run's start.
    fn new(info: &TestInfo, history: &HistoryFile) -> anyhow::Result<Self> {
        let t_end_ns = read::last_event_time(history)?;
        let started_at_ms = info.started_at.timestamp_millis();
        Ok(LineFold::empty(t_end_ns, &info.nodes, started_at_ms))
    }

    fn line(&mut self, at: read::Located, l: &Line<'_>) {
        self.take(at, l);
    }

    fn join(self, parts: Vec<Part<LineFold>>) -> Lines {
        let mut it = parts.into_iter();
        let mut all = match it.next() {
            Some(first) => first.state,
            None => self,
        };
        for p in it {
            all.append(p.state, p.pos_base, p.line_base);
        }
        all.finish()
    }
}

/// The report's fold of a whole history (`LineFold`'s `Rider::join`).
#[derive(Debug, PartialEq)]
pub struct Lines {
    pub t_end_ns: u64,
    pub events: u64,
    pub nodes: BTreeMap<String, NodeData>,
    pub ops: OpSeries,
    pub schedule: Vec<ScheduleRow>,
    pub head: Vec<String>,
    pub places: Places,
}

/// What a lane shows, from one read: spans are cut where it changes.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Lane {
    state: LaneState,
    leader: Option<u64>,
    epoch: u64,
    phase: Option<ZabPhase>,
}

impl Lane {
    const DOWN: Lane = Lane {
        state: LaneState::Down,
        leader: None,
        epoch: 0,
        phase: None,
    };
}

impl From<&StatusRead<'_>> for Lane {
    fn from(r: &StatusRead<'_>) -> Self {
        Lane {
            state: LaneState::from(r.state),
            leader: r.leader,
            epoch: r.peer_epoch,
            phase: Some(r.phase),
        }
    }
}

impl Span {
    fn at(t: u64, index: u64, lane: Lane, zxid: u64) -> Span {
        Span {
            start_ns: t,
            end_ns: t,
            state: lane.state,
            leader: lane.leader,
            epoch: lane.epoch,
            phase: lane.phase,
            start_index: index,
            zxid_first: zxid,
            zxid_last: zxid,
        }
    }

    fn lane(&self) -> Lane {
        Lane {
            state: self.state,
            leader: self.leader,
            epoch: self.epoch,
            phase: self.phase,
        }
    }
}

impl NodeData {
    fn new(t_end_ns: u64) -> Self {
        let series = || ColumnSeries::new(t_end_ns, COLUMNS);
        NodeData {
            spans: Vec::new(),
            epoch: series(),
            zxid_counter: series(),
            clock_offset_s: series(),
        }
    }

    /// A read's span: it lengthens the last span when the lane shows the same, else the last
    /// span ends where this one starts.
    fn extend(&mut self, span: Span) {
        match self.spans.last_mut() {
            Some(last) if last.lane() == span.lane() => {
                last.end_ns = span.end_ns;
                last.zxid_last = span.zxid_last;
            }
            last => {
                if let Some(last) = last {
                    last.end_ns = span.start_ns;
                }
                self.spans.push(span);
            }
        }
    }

    fn append(&mut self, next: NodeData) {
        let mut spans = next.spans.into_iter();
        if let Some(first) = spans.next() {
            self.extend(first);
        }
        self.spans.extend(spans);
        self.epoch.merge(next.epoch);
        self.zxid_counter.merge(next.zxid_counter);
        self.clock_offset_s.merge(next.clock_offset_s);
    }
}

impl OpSeries {
    fn add(&mut self, kind: EventType, start: u64, end: u64) {
        let latency_ms = end.saturating_sub(start) as f64 / 1e6;
        let series = match kind {
            EventType::Ok => &mut self.ok,
            EventType::Fail => &mut self.fail,
            _ => &mut self.info,
        };
        series.add(start, latency_ms);
    }

    fn merge(&mut self, next: OpSeries) {
        self.ok.merge(next.ok);
        self.fail.merge(next.fail);
        self.info.merge(next.info);
    }
}
