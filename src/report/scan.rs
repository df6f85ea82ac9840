//! One pass over `history.jsonl` through `history::read` (the one reader: the same lines are
//! accepted and rejected as by `fle-chaos check`, with the same error naming file, line and
//! column) that keeps only what the report draws: lane spans per node, per-pixel-column series
//! (epochs, zxids, clock offsets, operation latencies), the fault schedule, and the first lines
//! of the history. Every line is also fed to `history::view`, which alone decides when faults
//! were in force, how long each took to a quorum-backed leader, who the quorum-backed leader
//! was (its changes are kept) and what held at each evidence event (`moment`). Memory stays
//! flat however long the run was.

use super::lane::LaneState;
use super::moment::{self, LeaderChange, Moment};
use super::schedule::{Schedule, ScheduleRow};
use super::series::ColumnSeries;
use crate::api::ZabPhase;
use crate::history::file::HistoryFile;
use crate::history::line::{Body, Line, StatusRead};
use crate::history::view::{FaultInterval, FaultRecovery, View};
use crate::history::{read, EventType, F};
use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

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
#[derive(Debug, Clone)]
pub struct NodeData {
    pub spans: Vec<Span>,
    pub epoch: ColumnSeries,
    /// The low 32 bits of the last logged zxid (the counter within the epoch).
    pub zxid_counter: ColumnSeries,
    /// Node wall clock minus the controller's idea of now, in seconds.
    pub clock_offset_s: ColumnSeries,
}

/// Operations of one outcome (ok, fail, info) per column: latency spread and count.
#[derive(Debug, Clone)]
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

/// Reads the history at `path`. `nodes` are test.json's nodes (lanes appear even for nodes
/// never read, and a quorum is a majority of them); `started_at_ms` anchors clock offsets.
pub fn scan(path: &Path, nodes: &[String], started_at_ms: i64) -> Result<RunData> {
    scan_at(path, nodes, started_at_ms, BTreeSet::new())
}

/// `scan`, also taking a `Moment` at each event whose history index is in `wanted` (the
/// evidence events).
pub fn scan_at(
    path: &Path,
    nodes: &[String],
    started_at_ms: i64,
    wanted: BTreeSet<u64>,
) -> Result<RunData> {
    let history = HistoryFile::open(path)?;
    let t_end_ns = last_event_time(&history)?.max(1);
    let mut s = Scanner::new(t_end_ns, nodes, started_at_ms);
    s.wanted = wanted;
    read::for_each_in(&history, |at, line, _| s.line(at, line))?;
    Ok(s.finish())
}

/// The time of the last complete event, read from the file's tail so that series can be
/// bucketed into columns during the single pass (decoded by the history's own decoder; a line
/// it rejects here is rejected, with its position, by the pass itself).
fn last_event_time(history: &HistoryFile) -> Result<u64> {
    let mut file = history.reader()?;
    let len = history.len();
    let mut window = 64 * 1024u64;
    loop {
        let from = len.saturating_sub(window);
        file.seek(SeekFrom::Start(from))?;
        let mut tail = Vec::new();
        (&mut file).take(window).read_to_end(&mut tail)?;
        let mut lines: Vec<&[u8]> = tail.split(|&b| b == b'\n').collect();
        if from > 0 && !lines.is_empty() {
            lines.remove(0); // may start mid-line
        }
        let time = lines.iter().rev().find_map(|l| {
            let text = std::str::from_utf8(l).ok()?;
            crate::history::line::decode(text).ok().map(|e| e.time)
        });
        if let Some(t) = time {
            return Ok(t);
        }
        if from == 0 {
            return Ok(0);
        }
        window *= 4;
    }
}

struct Scanner {
    t_end_ns: u64,
    started_at_ms: i64,
    events: u64,
    nodes: BTreeMap<String, NodeData>,
    ops: OpSeries,
    pending_ops: HashMap<String, u64>,
    schedule: Schedule,
    view: View,
    head: Vec<String>,
    wanted: BTreeSet<u64>,
    moments: BTreeMap<u64, Moment>,
    leader_changes: Vec<LeaderChange>,
    /// Something that can change the quorum-backed leader happened in this line.
    changed: bool,
}

impl Scanner {
    fn new(t_end_ns: u64, nodes: &[String], started_at_ms: i64) -> Self {
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
            schedule: Schedule::default(),
            view: View::new(nodes),
            head: Vec::new(),
            wanted: BTreeSet::new(),
            moments: BTreeMap::new(),
            leader_changes: Vec::new(),
            changed: false,
        };
        for n in nodes {
            s.node(n);
        }
        s
    }

    fn node(&mut self, name: &str) -> &mut NodeData {
        if !self.nodes.contains_key(name) {
            let series = || ColumnSeries::new(self.t_end_ns, COLUMNS);
            let data = NodeData {
                spans: Vec::new(),
                epoch: series(),
                zxid_counter: series(),
                clock_offset_s: series(),
            };
            self.nodes.insert(name.to_string(), data);
        }
        self.nodes.get_mut(name).expect("inserted above")
    }

    fn line(&mut self, at: read::Located, l: &Line<'_>) {
        self.events += 1;
        if self.head.len() < HEAD_LINES {
            self.head
                .push(super::text::shorten(l.text.trim_end(), HEAD_LINE_CHARS));
        }
        let e = self.view.of_line(at.pos, l);
        self.view.feed(e);
        match (&l.body, l.f) {
            (Body::Status(s), _) => self.status(l, Some(s)),
            (Body::Unreachable, _) if l.kind != EventType::Invoke => self.status(l, None),
            (_, F::Write | F::Read) => self.op(l),
            (Body::Fault(_), _) => {
                self.changed = true;
                self.schedule.line(l)
            }
            _ => {}
        }
        // The quorum-backed leader can only change when a lane or a fault does: asked then.
        if std::mem::take(&mut self.changed) {
            let now = moment::quorum_leader(&self.view);
            if self.leader_changes.last().map(|c| &c.leader) != Some(&now) {
                self.leader_changes.push(LeaderChange {
                    time_ns: l.time,
                    index: l.index,
                    leader: now,
                });
            }
        }
        if self.wanted.contains(&l.index) {
            let m = Moment::of(&self.view, l.index, at.line_no, l.time);
            self.moments.insert(l.index, m);
        }
    }

    /// A status read: `read` None when the node could not be read.
    fn status(&mut self, l: &Line<'_>, read: Option<&StatusRead<'_>>) {
        let name = l.node.as_deref().unwrap_or(&l.process);
        let t = l.time;
        let (state, leader, epoch, phase, zxid) = match read {
            Some(r) => (
                LaneState::from(r.state),
                r.leader,
                r.peer_epoch,
                Some(r.phase),
                r.last_zxid,
            ),
            None => (LaneState::Down, None, 0, None, 0),
        };
        let started_at_ms = self.started_at_ms;
        let index = l.index;
        let node = self.node(name);
        let mut changed = false;
        match node.spans.last_mut() {
            Some(last)
                if last.state == state
                    && last.leader == leader
                    && last.epoch == epoch
                    && last.phase == phase =>
            {
                last.end_ns = t;
                last.zxid_last = zxid;
            }
            last => {
                if let Some(last) = last {
                    last.end_ns = t;
                }
                node.spans.push(Span {
                    start_ns: t,
                    end_ns: t,
                    state,
                    leader,
                    epoch,
                    phase,
                    start_index: index,
                    zxid_first: zxid,
                    zxid_last: zxid,
                });
                changed = true;
            }
        }
        self.changed |= changed;
        let node = self.node(name);
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
        if l.kind == EventType::Invoke {
            self.pending_ops.insert(l.process.to_string(), l.time);
            return;
        }
        let Some(start) = self.pending_ops.remove(l.process.as_ref()) else {
            return;
        };
        let latency_ms = l.time.saturating_sub(start) as f64 / 1e6;
        let series = match l.kind {
            EventType::Ok => &mut self.ops.ok,
            EventType::Fail => &mut self.ops.fail,
            _ => &mut self.ops.info,
        };
        series.add(start, latency_ms);
    }

    fn finish(mut self) -> RunData {
        let t_end_ns = self.t_end_ns;
        // Each lane's last span runs to the end of the history.
        for node in self.nodes.values_mut() {
            if let Some(last) = node.spans.last_mut() {
                last.end_ns = last.end_ns.max(t_end_ns);
            }
        }
        let view = self.view.finish();
        RunData {
            t_end_ns,
            events: self.events,
            nodes: self.nodes,
            ops: self.ops,
            faults: view.intervals,
            schedule: self.schedule.rows,
            recoveries: view.recoveries,
            head: self.head,
            moments: self.moments,
            leader_changes: self.leader_changes,
            violations: Vec::new(),
        }
    }
}
