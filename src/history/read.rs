//! Reading `history.jsonl`: the one block splitter, the one torn-tail rule and the one error
//! format, over the one line decoder (`line::decode`).
//!
//! - Lines are handed out borrowed from large blocks (no copy or allocation per line).
//! - Blank lines (JSON whitespace only) are skipped; they are not events.
//! - The torn-tail rule: only an unterminated LAST line (no newline: the controller died
//!   while writing it) that does not decode is forgiven, and ends the history. Any other line
//!   that does not decode, a newline-terminated last line included, is a [`BadLine`] naming
//!   file, line and column (callers map it to exit 254 via `crate::exit::bad_input`).
//! - Each line is checked to be UTF-8 before it is decoded (both decoder paths get `&str`).
//! - Events must come in recorded order: indices growing, times never going back (the one
//!   writer takes both under one lock). A line out of order is a [`BadLine`]: checkers that
//!   walk time would otherwise measure nonsense (a recovery of 0 s).
//! - A status read's `last_election` is decoded into an `ElectionSummary` whenever its text
//!   differs from that node's previous one (so a malformed summary is rejected by every
//!   reader), and handed to the visitor as [`Election::New`]; unchanged ones are
//!   [`Election::Same`] and cost nothing.
//!
//! [`for_each`] reads a file in one pass; [`fold_parts`] cuts it at line boundaries into
//! parts read on several threads (a visitor state per part, joined by the caller). Both
//! shapes on disk, compressed or plain, are read through `file::HistoryFile`: offsets, line
//! numbers and parts are the plain text's either way.

use super::file::{HistoryFile, Reader};
use super::line::{decode_after, Body, Line};
use crate::api::ElectionSummary;
use anyhow::{Context, Result};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Where a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    /// The event's position: its ordinal among the file's (or part's) events, blank lines
    /// skipped. Evidence refers to events by position.
    pub pos: u32,
    /// 1-based line number in the file (or part).
    pub line_no: u64,
    /// Byte offset of the line's start in the file (absolute, also in parts).
    pub offset: u64,
}

/// A status read's `last_election`, compared with the node's previous read.
#[derive(Debug, Clone, PartialEq)]
pub enum Election {
    /// Not a status read, or no summary in it.
    None,
    /// The same text as the node's previous summary (in this part).
    Same,
    /// A summary that differs from the node's previous one, decoded.
    New(ElectionSummary),
}

/// A line that is not a history event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    pub file: PathBuf,
    pub line: u64,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: line {}, column {}: {}; the history is damaged (only an unterminated last line is forgiven): re-run the test, or cut the file before this line",
            self.file.display(),
            self.line,
            self.column,
            self.message
        )
    }
}

impl std::error::Error for BadLine {}

/// Reads every event of `path` in order, calling `visit` for each.
pub fn for_each(path: &Path, visit: impl FnMut(Located, &Line<'_>, Election)) -> Result<Summary> {
    for_each_in(&HistoryFile::open(path)?, visit)
}

/// [`for_each`] over an opened history.
pub fn for_each_in(
    file: &HistoryFile,
    mut visit: impl FnMut(Located, &Line<'_>, Election),
) -> Result<Summary> {
    let part = read_range(file, 0, u64::MAX, &mut visit)?;
    part.result
        .map_err(|e| anyhow::Error::new(e.into_bad(file.path(), 0)))?;
    Ok(Summary {
        events: part.events,
        lines: part.lines,
    })
}

/// Counts of a file or part read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub events: u32,
    pub lines: u64,
}

/// One part's visitor state; its `Located::pos` and `line_no` were relative to the part,
/// `pos_base`/`line_base` shift them to the whole file.
pub struct Part<S> {
    pub state: S,
    pub pos_base: u32,
    pub line_base: u64,
    pub events: u32,
}

/// Reads `file` in `parts` parts (cut at line starts) on as many threads; each part gets
/// its own state from `init` and its events in order. The parts come back in file order.
pub fn fold_parts<S: Send>(
    file: &HistoryFile,
    parts: usize,
    init: impl Fn() -> S + Sync,
    step: impl Fn(&mut S, Located, &Line<'_>, Election) + Sync,
) -> Result<Vec<Part<S>>> {
    let path = file.path();
    let bounds = part_bounds(file, parts.max(1) as u64)?;
    let results: Vec<Result<(S, PartRead)>> = std::thread::scope(|s| {
        let handles: Vec<_> = bounds
            .windows(2)
            .map(|w| {
                let (init, step) = (&init, &step);
                s.spawn(move || {
                    let mut state = init();
                    let r =
                        read_range(file, w[0], w[1], &mut |at, l, e| step(&mut state, at, l, e))?;
                    Ok((state, r))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a history reader thread panicked")))
            })
            .collect()
    });
    let mut out = Vec::new();
    let (mut pos_base, mut line_base) = (0u32, 0u64);
    let mut prev: Option<Order> = None;
    for r in results {
        let (state, read) = r?;
        if let Err(e) = read.result {
            return Err(anyhow::Error::new(e.into_bad(path, line_base)));
        }
        if let (Some(p), Some((first, line))) = (prev, read.first) {
            if let Some(message) = first.after(p) {
                let bad = Bad {
                    line,
                    column: 1,
                    message,
                };
                return Err(anyhow::Error::new(bad.into_bad(path, line_base)));
            }
        }
        prev = read.last.or(prev);
        out.push(Part {
            state,
            pos_base,
            line_base,
            events: read.events,
        });
        pos_base += read.events;
        line_base += read.lines;
    }
    Ok(out)
}

/// The number of parts worth reading a history of `len` plain bytes in: one per 16 MiB, at
/// most one per core (8).
pub fn parts_for(len: u64) -> usize {
    let cores = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    // Below this a second thread costs more than it saves.
    const PART_MIN: u64 = 16 << 20;
    (len / PART_MIN).clamp(1, cores as u64) as usize
}

/// The time of the last complete event, read from the file's tail (so that a one-pass fold
/// can bucket time series into columns from its first line). A line the decoder rejects here
/// is rejected, with its position, by the pass itself.
pub fn last_event_time(history: &HistoryFile) -> Result<u64> {
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
            super::line::decode(text).ok().map(|e| e.time)
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

/// The whole line at plain offset `offset`, as JSON (evidence quotes the original event).
pub fn quote(file: &mut BufReader<Reader>, offset: u64) -> Option<serde_json::Value> {
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut line = Vec::new();
    file.read_until(b'\n', &mut line).ok()?;
    serde_json::from_slice(&line).ok()
}

/// Plain offsets that cut the file into `parts` pieces, each starting at a line.
fn part_bounds(history: &HistoryFile, parts: u64) -> Result<Vec<u64>> {
    let len = history.len();
    let mut file = BufReader::new(history.reader()?);
    let mut bounds = vec![0];
    for k in 1..parts {
        let guess = len * k / parts;
        file.seek(SeekFrom::Start(guess))?;
        let mut skipped = Vec::new();
        let n = file.read_until(b'\n', &mut skipped)? as u64;
        let cut = (guess + n).min(len);
        if cut > *bounds.last().unwrap() {
            bounds.push(cut);
        }
    }
    if *bounds.last().unwrap() < len || bounds.len() == 1 {
        bounds.push(len);
    }
    Ok(bounds)
}

/// A bad line found in a part, relative to it.
struct Bad {
    line: u64,
    column: usize,
    message: String,
}

impl Bad {
    fn into_bad(self, path: &Path, line_base: u64) -> BadLine {
        BadLine {
            file: path.to_path_buf(),
            line: line_base + self.line,
            column: self.column,
            message: self.message,
        }
    }
}

struct PartRead {
    events: u32,
    lines: u64,
    result: std::result::Result<(), Bad>,
    /// The part's first event (its order, and its line for an error) and last event's order:
    /// joined parts are checked to follow each other.
    first: Option<(Order, u64)>,
    last: Option<Order>,
}

/// An event's place in the recorded order: the writer gives indices one by one and takes each
/// time under the same lock, so indices grow and times never go back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Order {
    index: u64,
    time: u64,
}

impl Order {
    /// Why `self` cannot come after `prev`, if it cannot.
    fn after(self, prev: Order) -> Option<String> {
        if self.index <= prev.index {
            Some(format!(
                "index {} does not follow the previous event's {} (indices grow by one per event)",
                self.index, prev.index
            ))
        } else if self.time < prev.time {
            Some(format!(
                "time {} ns is before the previous event's {} ns (events are recorded in time order)",
                self.time, prev.time
            ))
        } else {
            None
        }
    }
}

/// JSON's whitespace (what serde skips between tokens).
fn is_blank(line: &[u8]) -> bool {
    line.iter()
        .all(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
}

/// Reads the lines that start in `[start, end)`.
fn read_range(
    history: &HistoryFile,
    start: u64,
    end: u64,
    visit: &mut dyn FnMut(Located, &Line<'_>, Election),
) -> Result<PartRead> {
    let path = history.path();
    let mut file = history.reader()?;
    file.seek(SeekFrom::Start(start))?;
    let mut lines = Blocks::new(file);
    let (mut first, mut last): (Option<(Order, u64)>, Option<Order>) = (None, None);
    // Each node's previous raw `last_election` (by node name).
    let mut last_raw: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut offset = start;
    let (mut line_no, mut events) = (0u64, 0u32);
    loop {
        if offset >= end {
            break;
        }
        let line = lines
            .next()
            .with_context(|| format!("{}: cannot read line {}", path.display(), line_no + 1))?;
        let Some(line) = line else { break };
        line_no += 1;
        let at = Located {
            pos: events,
            line_no,
            offset,
        };
        offset += line.len() as u64;
        let terminated = line.last() == Some(&b'\n');
        if is_blank(line) {
            continue;
        }
        let body = if terminated {
            &line[..line.len() - 1]
        } else {
            line
        };
        let decoded = decode_one(body, &last_raw, visit, at, last);
        match decoded {
            Ok((order, raw)) => {
                first.get_or_insert((order, line_no));
                last = Some(order);
                events += 1;
                if let Some((node, raw)) = raw {
                    match last_raw.iter_mut().find(|(n, _)| *n == node) {
                        Some(slot) => slot.1 = raw,
                        None => last_raw.push((node, raw)),
                    }
                }
            }
            // The torn tail: an unterminated line can only be the file's last.
            Err(_) if !terminated => break,
            Err(b) => {
                return Ok(PartRead {
                    events,
                    lines: line_no,
                    result: Err(Bad {
                        line: line_no,
                        column: b.column,
                        message: b.message,
                    }),
                    first,
                    last,
                })
            }
        }
    }
    Ok(PartRead {
        events,
        lines: line_no,
        result: Ok(()),
        first,
        last,
    })
}

/// A node name and its new raw `last_election`, to remember.
type NewElection = Option<(Vec<u8>, Vec<u8>)>;

fn decode_one(
    body: &[u8],
    last_raw: &[(Vec<u8>, Vec<u8>)],
    visit: &mut dyn FnMut(Located, &Line<'_>, Election),
    at: Located,
    prev: Option<Order>,
) -> std::result::Result<(Order, NewElection), super::line::LineError> {
    let text = std::str::from_utf8(body).map_err(|e| super::line::LineError {
        column: e.valid_up_to() + 1,
        message: format!("not UTF-8 text: {e}"),
    })?;
    let previous = |node: &[u8]| {
        last_raw
            .iter()
            .find(|(n, _)| n == node)
            .map(|(_, r)| r.as_slice())
    };
    let l = decode_after(text, previous)?;
    let order = Order {
        index: l.index,
        time: l.time,
    };
    if let Some(message) = prev.and_then(|p| order.after(p)) {
        return Err(super::line::LineError { column: 1, message });
    }
    let mut remember = None;
    let election = match (&l.body, &l.node) {
        (Body::Status(s), Some(node)) => match s.last_election {
            None => Election::None,
            Some(raw) if previous(node.as_bytes()) == Some(raw.as_bytes()) => Election::Same,
            Some(raw) => {
                let summary =
                    super::line::election(raw).map_err(|message| super::line::LineError {
                        column: raw.as_ptr() as usize - text.as_ptr() as usize + 1,
                        message,
                    })?;
                remember = Some((node.as_bytes().to_vec(), raw.as_bytes().to_vec()));
                Election::New(summary)
            }
        },
        _ => Election::None,
    };
    visit(at, &l, election);
    Ok((order, remember))
}

/// Reads a file's lines in large blocks, handing out each line (with its newline; the last may
/// lack one) borrowed from the block: no copy per line, and no allocation once the block has
/// grown to the longest line.
struct Blocks {
    file: Reader,
    buf: Vec<u8>,
    /// `buf[lo..hi]` is read but not yet handed out; `buf[lo..searched]` holds no newline.
    lo: usize,
    searched: usize,
    hi: usize,
    eof: bool,
}

impl Blocks {
    /// Fits in a core's L2 cache, so the decoder reads what the kernel just copied there.
    const BLOCK: usize = 512 << 10;

    fn new(file: Reader) -> Self {
        Blocks {
            file,
            buf: vec![0; Self::BLOCK],
            lo: 0,
            searched: 0,
            hi: 0,
            eof: false,
        }
    }

    fn next(&mut self) -> std::io::Result<Option<&[u8]>> {
        loop {
            if let Some(p) = memchr::memchr(b'\n', &self.buf[self.searched..self.hi]) {
                let line = self.lo..self.searched + p + 1;
                self.lo = line.end;
                self.searched = line.end;
                return Ok(Some(&self.buf[line]));
            }
            self.searched = self.hi;
            if self.eof {
                let line = self.lo..self.hi;
                self.lo = self.hi;
                return Ok((!line.is_empty()).then(|| &self.buf[line]));
            }
            // Keep the unfinished line, at the front; a line longer than the block grows it.
            self.buf.copy_within(self.lo..self.hi, 0);
            (self.hi, self.searched, self.lo) = (self.hi - self.lo, self.hi - self.lo, 0);
            if self.hi == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            match self.file.read(&mut self.buf[self.hi..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.hi += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Reads a whole history into owned [`super::Event`]s (tests and small tools; the checkers
/// and the report visit lines instead). Same rules as [`for_each`].
pub fn read_events(path: &Path) -> Result<Vec<super::Event>> {
    let mut events = Vec::new();
    let history = HistoryFile::open(path)?;
    let mut file = BufReader::new(history.reader()?);
    let mut offsets = Vec::new();
    for_each_in(&history, |at, _, _| offsets.push(at.offset))?;
    for off in offsets {
        let v = quote(&mut file, off).context("cannot re-read a history line")?;
        events.push(serde_json::from_value(v)?);
    }
    Ok(events)
}
