//! One streaming pass over `history.jsonl` that keeps only what the report draws: lane spans
//! per node, per-pixel-column series (epochs, zxids, clock offsets, write latencies and
//! throughput), the fault schedule and intervals, per-fault recovery, and the first lines
//! of the history. Memory stays flat however long the run was.

use super::faults::{FaultChange, FaultInterval, FaultKind, FaultTracker, ScheduleRow};
use super::lite::{LaneState, LiteEvent};
use super::recovery::{Recovery, RecoveryTracker};
use super::series::ColumnSeries;
use crate::history::{Event, EventType, F};
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
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
    pub faults: Vec<FaultInterval>,
    pub schedule: Vec<ScheduleRow>,
    pub recoveries: Vec<Recovery>,
    pub head: Vec<String>,
}

/// Reads the history at `path`. `nodes` are test.json's nodes (lanes appear even for nodes
/// never read); `started_at_ms` anchors clock offsets; `quorum` is for recovery.
pub fn scan(path: &Path, nodes: &[String], started_at_ms: i64, quorum: usize) -> Result<RunData> {
    let t_end_ns = last_event_time(path)?.max(1);
    let mut s = Scanner::new(t_end_ns, nodes, started_at_ms, quorum);
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open history {}", path.display()))?;
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4);
    // Parsing is most of the work and lines are independent: blocks of lines are parsed on
    // `workers` threads, round robin, and consumed here in file order.
    std::thread::scope(|scope| -> Result<()> {
        let mut to_workers = Vec::new();
        let mut from_workers = Vec::new();
        for _ in 0..workers {
            let (block_tx, block_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
            let (parsed_tx, parsed_rx) = std::sync::mpsc::sync_channel::<ParsedBlock>(2);
            scope.spawn(move || {
                for block in block_rx {
                    if parsed_tx.send(parse_block(block)).is_err() {
                        break;
                    }
                }
            });
            to_workers.push(block_tx);
            from_workers.push(parsed_rx);
        }
        let reader = scope.spawn(move || read_blocks(file, to_workers));
        let mut line_no = 0u64;
        for seq in 0.. {
            let Ok(block) = from_workers[seq % workers].recv() else {
                break;
            };
            for rec in block.recs {
                let line = &block.bytes[rec.line.0..rec.line.1];
                let event = LiteEvent {
                    time: rec.time,
                    process: rec.process.as_cow(&block.bytes),
                    kind: rec.kind,
                    f: rec.f,
                    node: rec.node.as_ref().map(|n| n.as_cow(&block.bytes)),
                    value: rec.value,
                };
                s.event(&event, line)?;
            }
            if let Some(bad) = block.error {
                // A torn last line (no newline: the controller died writing it) ends the
                // history; any other bad line is damage.
                if bad.unterminated {
                    break;
                }
                bail!(
                    "{}: line {} is not a history event ({}); the file is damaged: \
                     re-run the test or cut the history before this line",
                    path.display(),
                    line_no + bad.line + 1,
                    bad.error
                );
            }
            line_no += block.lines;
        }
        drop(from_workers);
        reader
            .join()
            .map_err(|_| anyhow::anyhow!("the history reader thread panicked"))?
            .with_context(|| format!("cannot read {}", path.display()))
    })?;
    Ok(s.finish())
}

const BLOCK_BYTES: usize = 4 << 20;

/// Reads whole lines in blocks of about `BLOCK_BYTES` and deals them to the workers.
fn read_blocks(
    file: std::fs::File,
    workers: Vec<std::sync::mpsc::SyncSender<Vec<u8>>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::with_capacity(1 << 20, file);
    for seq in 0.. {
        let mut block = Vec::with_capacity(BLOCK_BYTES + 4096);
        (&mut reader)
            .take(BLOCK_BYTES as u64)
            .read_to_end(&mut block)?;
        if block.is_empty() {
            return Ok(());
        }
        if block.last() != Some(&b'\n') {
            reader.read_until(b'\n', &mut block)?;
        }
        if workers[seq % workers.len()].send(block).is_err() {
            return Ok(()); // the consumer stopped (an error it reports itself)
        }
    }
    Ok(())
}

/// Text of an event borrowed from its block, or owned when serde had to unescape it.
enum Text {
    Range(usize, usize),
    Owned(String),
}

impl Text {
    fn of(s: std::borrow::Cow<str>, block: &[u8]) -> Text {
        match s {
            std::borrow::Cow::Borrowed(b) => {
                let start = b.as_ptr() as usize - block.as_ptr() as usize;
                Text::Range(start, start + b.len())
            }
            std::borrow::Cow::Owned(o) => Text::Owned(o),
        }
    }

    fn as_cow<'a>(&'a self, block: &'a [u8]) -> std::borrow::Cow<'a, str> {
        match self {
            // The range was a &str of this very block.
            Text::Range(a, b) => {
                std::borrow::Cow::Borrowed(std::str::from_utf8(&block[*a..*b]).unwrap_or(""))
            }
            Text::Owned(s) => std::borrow::Cow::Borrowed(s),
        }
    }
}

/// One parsed line, pointing into its block.
struct Rec {
    time: u64,
    process: Text,
    kind: EventType,
    f: F,
    node: Option<Text>,
    value: super::lite::LiteValue,
    line: (usize, usize),
}

struct BadLine {
    /// 0-based line number within the block.
    line: u64,
    error: String,
    unterminated: bool,
}

struct ParsedBlock {
    bytes: Vec<u8>,
    recs: Vec<Rec>,
    lines: u64,
    error: Option<BadLine>,
}

fn parse_block(bytes: Vec<u8>) -> ParsedBlock {
    let mut recs = Vec::with_capacity(bytes.len() / 512);
    let mut lines = 0u64;
    let mut error = None;
    let mut start = 0;
    while start < bytes.len() {
        if let Some((e, took)) = super::fast::parse_next(&bytes[start..]) {
            let line = &bytes[start..start + took];
            let line = line.trim_ascii_end();
            recs.push(Rec {
                time: e.time,
                process: Text::of(e.process, &bytes),
                kind: e.kind,
                f: e.f,
                node: e.node.map(|n| Text::of(n, &bytes)),
                value: e.value,
                line: (start, start + line.len()),
            });
            lines += 1;
            start += took;
            continue;
        }
        // The slow path: find the line, let serde parse it or name the error.
        let end = bytes[start..]
            .iter()
            .position(|&c| c == b'\n')
            .map(|p| start + p);
        let line_end = end.unwrap_or(bytes.len());
        let text = bytes[start..line_end].trim_ascii_end();
        if !text.is_empty() {
            match serde_json::from_slice::<LiteEvent>(text) {
                Ok(e) => {
                    let offset = text.as_ptr() as usize - bytes.as_ptr() as usize;
                    recs.push(Rec {
                        time: e.time,
                        process: Text::of(e.process, &bytes),
                        kind: e.kind,
                        f: e.f,
                        node: e.node.map(|n| Text::of(n, &bytes)),
                        value: e.value,
                        line: (offset, offset + text.len()),
                    });
                }
                Err(e) => {
                    error = Some(BadLine {
                        line: lines,
                        error: e.to_string(),
                        unterminated: end.is_none(),
                    });
                    break;
                }
            }
        }
        lines += 1;
        start = line_end + 1;
    }
    ParsedBlock {
        bytes,
        recs,
        lines,
        error,
    }
}

/// The time of the last complete event, read from the file's tail so that series can be
/// bucketed into columns during the single pass.
fn last_event_time(path: &Path) -> Result<u64> {
    let mut file = std::fs::File::open(path)
        .with_context(|| format!("cannot open history {}", path.display()))?;
    let len = file.metadata()?.len();
    let mut window = 64 * 1024u64;
    loop {
        let from = len.saturating_sub(window);
        file.seek(SeekFrom::Start(from))?;
        let mut tail = Vec::new();
        (&mut file).take(window).read_to_end(&mut tail)?;
        let text = String::from_utf8_lossy(&tail);
        let mut lines: Vec<&str> = text.lines().collect();
        if from > 0 && !lines.is_empty() {
            lines.remove(0); // may start mid-line
        }
        if let Some(t) = lines
            .iter()
            .rev()
            .find_map(|l| serde_json::from_str::<LiteEvent>(l).ok().map(|e| e.time))
        {
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
    faults: FaultTracker,
    recovery: RecoveryTracker,
    head: Vec<String>,
}

impl Scanner {
    fn new(t_end_ns: u64, nodes: &[String], started_at_ms: i64, quorum: usize) -> Self {
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
            faults: FaultTracker::default(),
            recovery: RecoveryTracker::new(quorum),
            head: Vec::new(),
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

    fn event(&mut self, e: &LiteEvent, line: &[u8]) -> Result<()> {
        self.events += 1;
        if self.head.len() < HEAD_LINES {
            let l = String::from_utf8_lossy(line);
            self.head.push(super::text::shorten(&l, HEAD_LINE_CHARS));
        }
        match e.f {
            F::Status => self.status(e),
            F::Write | F::Read => self.op(e),
            f if FaultTracker::is_nemesis_f(f) && e.process == crate::history::NEMESIS => {
                // Rare: parse the whole event, its value says what was done to whom.
                let full: Event = serde_json::from_slice(line)?;
                match self.faults.observe(&full) {
                    FaultChange::Started(kind, nodes) => {
                        let at = self
                            .faults
                            .schedule
                            .last()
                            .and_then(|r| r.invoke_ns)
                            .unwrap_or(e.time);
                        self.recovery.fault_started(kind, &nodes, at);
                    }
                    FaultChange::Ended | FaultChange::None => {}
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn status(&mut self, e: &LiteEvent) {
        let Some(name) = e.node.as_deref().or(Some(e.process.as_ref())) else {
            return;
        };
        let v = &e.value;
        let state = match (e.kind, v.state) {
            (EventType::Ok, Some(s)) => s,
            (EventType::Ok, None) => return, // an ok read without a state: nothing to draw
            (EventType::Invoke, _) => return,
            _ => LaneState::Down,
        };
        let epoch = v.peer_epoch.unwrap_or(0);
        let leader = if state == LaneState::Down {
            None
        } else {
            v.leader
        };
        let t = e.time;
        let offset = v
            .wall_clock_ms
            .map(|w| (w - self.started_at_ms) as f64 / 1e3 - t as f64 / 1e9);
        let node = self.node(name);
        match node.spans.last_mut() {
            Some(last) if last.state == state && last.leader == leader && last.epoch == epoch => {
                last.end_ns = t;
            }
            Some(last) => {
                last.end_ns = t;
                node.spans.push(Span {
                    start_ns: t,
                    end_ns: t,
                    state,
                    leader,
                    epoch,
                });
            }
            None => node.spans.push(Span {
                start_ns: t,
                end_ns: t,
                state,
                leader,
                epoch,
            }),
        }
        if state != LaneState::Down {
            if let Some(ep) = v.peer_epoch {
                node.epoch.add(t, ep as f64);
            }
            if let Some(z) = v.last_zxid {
                node.zxid_counter.add(t, crate::api::counter_of(z) as f64);
            }
            if let Some(o) = offset {
                node.clock_offset_s.add(t, o);
            }
        }
        let faults = &self.faults;
        self.recovery
            .status(name, t, state, leader, epoch, |a, b| faults.connected(a, b));
    }

    fn op(&mut self, e: &LiteEvent) {
        if e.kind == EventType::Invoke {
            self.pending_ops.insert(e.process.to_string(), e.time);
            return;
        }
        let Some(start) = self.pending_ops.remove(e.process.as_ref()) else {
            return;
        };
        let latency_ms = e.time.saturating_sub(start) as f64 / 1e6;
        let series = match e.kind {
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
        let (faults, schedule) = self.faults.finish(t_end_ns);
        RunData {
            t_end_ns,
            events: self.events,
            nodes: self.nodes,
            ops: self.ops,
            faults,
            schedule,
            recoveries: self.recovery.finish(),
            head: self.head,
        }
    }
}

/// Kinds of fault that occur in a run, in legend order.
pub fn fault_kinds(faults: &[FaultInterval]) -> Vec<FaultKind> {
    let mut kinds: Vec<FaultKind> = faults.iter().map(|f| f.kind).collect();
    kinds.sort();
    kinds.dedup();
    kinds
}
