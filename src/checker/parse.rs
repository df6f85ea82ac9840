//! The fast path from `history.jsonl` to a `Digest`, without a `serde_json::Value` per event.
//!
//! Status reads are nearly every line of a history. Each is parsed into a borrowed struct
//! holding only the fields the checkers judge; its `last_election` is kept as raw JSON text and
//! parsed only when it differs from the node's previous one (it changes once per election,
//! not once per read). Failed reads and client writes (most of the rest) are scanned too; a
//! final log (one line of every committed write) is read straight into its type; every other
//! event goes through `Event` and the ordinary builder.

use super::model::{log_entries, Digest, DigestBuilder, NodeIx, StatusCore, WriteOp};
use super::scan;
use crate::api::{ElectionSummary, LogResponse, ServerState, ZabPhase};
use crate::history::{Event, EventType, F};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::io::{BufRead, BufReader};
use std::path::Path;

#[derive(Deserialize)]
struct Line<'a> {
    index: u64,
    time: u64,
    #[serde(borrow)]
    process: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: EventType,
    f: F,
    #[serde(default, borrow)]
    node: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    value: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct StatusFields<'a> {
    state: ServerState,
    leader: Option<u64>,
    peer_epoch: u64,
    #[serde(default)]
    accepted_epoch: u64,
    #[serde(default = "election_phase")]
    zab_phase: ZabPhase,
    #[serde(default, borrow)]
    last_election: Option<&'a RawValue>,
}

fn election_phase() -> ZabPhase {
    ZabPhase::Election
}

/// Reads a history file into a digest. Also returns each line's byte offset, so evidence can
/// quote the original events. A torn last line (a killed controller) is skipped, as in
/// `history::store::read_history`; any other bad line is an error naming it.
///
/// A large file is cut at line boundaries into one part per core, parsed in parallel and the
/// parts joined (parsing is nearly all of a check's time). If any part finds a bad line, the
/// whole file is read again in one pass, which names the line and tells a torn tail from a
/// corrupt middle.
pub fn digest_file(path: &Path, nodes: &[String]) -> Result<(Digest, Vec<u64>)> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("cannot open history {}", path.display()))?
        .len();
    let cores = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    // Below this a second thread costs more than it saves.
    const PART_MIN: u64 = 16 << 20;
    digest_file_in(path, nodes, (len / PART_MIN).clamp(1, cores as u64))
}

/// `digest_file` with a chosen number of parts (tests use it on small files).
pub fn digest_file_in(path: &Path, nodes: &[String], parts: u64) -> Result<(Digest, Vec<u64>)> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("cannot open history {}", path.display()))?
        .len();
    if parts <= 1 {
        return digest_range(path, 0, u64::MAX, nodes).and_then(finish_whole);
    }
    let bounds = part_bounds(path, len, parts)?;
    let results: Vec<Result<Part>> = std::thread::scope(|s| {
        let handles: Vec<_> = bounds
            .windows(2)
            .map(|w| s.spawn(move || digest_range(path, w[0], w[1], nodes)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a parser thread panicked")))
            })
            .collect()
    });
    let last = results.len() - 1;
    let clean = results
        .iter()
        .enumerate()
        .all(|(i, r)| r.as_ref().is_ok_and(|p| i == last || p.torn_tail.is_none()));
    if !clean {
        return digest_range(path, 0, u64::MAX, nodes).and_then(finish_whole);
    }
    let parts: Vec<Part> = results
        .into_iter()
        .map(|r| r.expect("checked above"))
        .collect();
    Ok(join(parts))
}

/// Byte offsets that cut the file into `parts` pieces, each starting at a line.
fn part_bounds(path: &Path, len: u64, parts: u64) -> Result<Vec<u64>> {
    use std::io::{Seek, SeekFrom};
    let mut file = BufReader::new(std::fs::File::open(path)?);
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
    bounds.push(len);
    Ok(bounds)
}

/// One part's digest, its lines' offsets, and the error of its last line if that line was bad
/// (a torn tail only at the end of the file).
struct Part {
    digest: Digest,
    offsets: Vec<u64>,
    torn_tail: Option<anyhow::Error>,
}

fn finish_whole(p: Part) -> Result<(Digest, Vec<u64>)> {
    Ok((p.digest, p.offsets))
}

/// Joins parts parsed separately: positions shift by the lines before each part, node indices
/// are mapped by name (a part may meet a node test.json does not list), and an election a node
/// reported across the cut is kept once.
fn join(parts: Vec<Part>) -> (Digest, Vec<u64>) {
    let mut it = parts.into_iter();
    let first = it.next().expect("at least one part");
    let (mut d, mut offsets) = (first.digest, first.offsets);
    for p in it {
        let shift = offsets.len() as u32;
        let map: Vec<NodeIx> = p
            .digest
            .nodes
            .iter()
            .map(|name| match d.nodes.iter().position(|n| n == name) {
                Some(ix) => ix as NodeIx,
                None => {
                    d.nodes.push(name.clone());
                    d.reads.push(0);
                    (d.nodes.len() - 1) as NodeIx
                }
            })
            .collect();
        for (ix, reads) in p.digest.reads.iter().enumerate() {
            d.reads[map[ix] as usize] += reads;
        }
        d.events += p.digest.events;
        d.reads_with_election += p.digest.reads_with_election;
        let mut seen_first = vec![false; d.nodes.len()];
        for mut el in p.digest.elections {
            el.pos += shift;
            el.node = map[el.node as usize];
            let first_here = !std::mem::replace(&mut seen_first[el.node as usize], true);
            let repeats = d
                .elections
                .iter()
                .rev()
                .find(|e| e.node == el.node)
                .is_some_and(|e| e.summary == el.summary);
            if !(first_here && repeats) {
                d.elections.push(el);
            }
        }
        for mut recs in p.digest.parts {
            recs.iter_mut().for_each(|r| r.shift(shift, &map));
            d.parts.push(recs);
        }
        offsets.extend(p.offsets);
    }
    (d, offsets)
}

/// Reads a file's lines in large blocks, handing out each line (with its newline; the last may
/// lack one) borrowed from the block: no copy per line, and no allocation once the block has
/// grown to the longest line.
struct Lines {
    file: std::fs::File,
    buf: Vec<u8>,
    /// `buf[lo..hi]` is read but not yet handed out; `buf[lo..searched]` holds no newline.
    lo: usize,
    searched: usize,
    hi: usize,
    eof: bool,
}

impl Lines {
    /// Fits in a core's L2 cache, so the scanner reads what the kernel just copied there.
    const BLOCK: usize = 512 << 10;

    fn new(file: std::fs::File) -> Self {
        Lines {
            file,
            buf: vec![0; Self::BLOCK],
            lo: 0,
            searched: 0,
            hi: 0,
            eof: false,
        }
    }

    fn next(&mut self) -> std::io::Result<Option<&[u8]>> {
        use std::io::Read;
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

/// Parses the lines that start in `[start, end)`.
fn digest_range(path: &Path, start: u64, end: u64, nodes: &[String]) -> Result<Part> {
    use std::io::{Seek, SeekFrom};
    let mut file = std::fs::File::open(path)
        .with_context(|| format!("cannot open history {}", path.display()))?;
    file.seek(SeekFrom::Start(start))?;
    let span = end.min(file.metadata()?.len()).saturating_sub(start);
    let mut lines = Lines::new(file);
    let mut b = DigestBuilder::new(nodes);
    // Status lines are several hundred bytes; reserved but untouched room costs no memory.
    b.reserve((span / 160) as usize);
    let mut last_raw: Vec<Vec<u8>> = Vec::new();
    let mut offsets = Vec::new();
    let mut offset = start;
    let mut lineno = 0u64;
    let mut pending_err: Option<anyhow::Error> = None;
    loop {
        let line = lines
            .next()
            .with_context(|| format!("{}: cannot read line {}", path.display(), lineno + 1))?;
        let Some(line) = line else { break };
        if offset >= end {
            break;
        }
        lineno += 1;
        let start = offset;
        offset += line.len() as u64;
        if line.iter().all(|c| c.is_ascii_whitespace()) {
            continue;
        }
        // An error only counts if another line follows (else it is a torn last line).
        if let Some(e) = pending_err.take() {
            return Err(e);
        }
        let pos = offsets.len() as u32;
        let added = match std::str::from_utf8(line) {
            Ok(text) => {
                let text = text.trim_end();
                let prev = |node: &[u8]| {
                    let ix = b.find_node(node)?;
                    last_raw.get(ix as usize).map(|v| v.as_slice())
                };
                match scan::line(text.as_bytes(), prev) {
                    Some(s) => add_scanned(&mut b, &mut last_raw, pos, s),
                    None => add_line(&mut b, &mut last_raw, pos, text),
                }
            }
            Err(e) => Err(anyhow::anyhow!("not UTF-8 text: {e}")),
        };
        match added {
            Ok(()) => offsets.push(start),
            Err(e) => {
                pending_err = Some(e.context(format!(
                    "{}: line {lineno}: not a history event",
                    path.display()
                )))
            }
        }
    }
    Ok(Part {
        digest: b.finish(),
        offsets,
        torn_tail: pending_err,
    })
}

fn add_line(
    b: &mut DigestBuilder,
    last_raw: &mut Vec<Vec<u8>>,
    pos: u32,
    line: &str,
) -> Result<()> {
    let l: Line = serde_json::from_str(line)?;
    if l.f == F::Status && l.kind == EventType::Ok {
        let Some(node) = l.node.as_deref() else {
            bail!("a status read without \"node\"")
        };
        let node: NodeIx = b.node(node);
        let Some(value) = l.value else {
            bail!("a status read without a value")
        };
        let s: StatusFields = serde_json::from_str(value.get()).context("not a node status")?;
        let core = StatusCore {
            state: s.state,
            phase: s.zab_phase,
            leader: s.leader,
            peer_epoch: s.peer_epoch,
            accepted_epoch: s.accepted_epoch,
        };
        b.status(pos, l.index, l.time, node, core);
        let raw = s.last_election.map(|r| r.get()).filter(|r| *r != "null");
        return election(b, last_raw, pos, node, raw.map(str::as_bytes));
    }
    // A final log is one line of every committed write (megabytes): read it straight into
    // its type rather than through a `Value` tree. Should that fail, the `Value` path below
    // decides (it also takes, say, a repeated key, which a typed parse refuses).
    if let (F::FinalLog, EventType::Ok, Some(node), Some(v)) = (l.f, l.kind, &l.node, l.value) {
        if let Ok(log) = serde_json::from_str::<LogResponse>(v.get()) {
            let node = b.node(node);
            b.final_log(pos, node, Ok(log_entries(log)));
            return Ok(());
        }
    }
    let value = match l.value {
        Some(v) => serde_json::from_str(v.get())?,
        None => serde_json::Value::Null,
    };
    let e = Event {
        index: l.index,
        time: l.time,
        process: l.process.into_owned(),
        kind: l.kind,
        f: l.f,
        node: l.node.map(Cow::into_owned),
        value,
    };
    b.event(pos, &e).map_err(anyhow::Error::msg)
}

/// Adds an event the scanner took apart, as `DigestBuilder::event` would.
fn add_scanned(
    b: &mut DigestBuilder,
    last_raw: &mut Vec<Vec<u8>>,
    pos: u32,
    s: scan::Scanned,
) -> Result<()> {
    match s {
        scan::Scanned::Status(s) => {
            let node = b.node_bytes(s.node);
            let core = StatusCore {
                state: s.state,
                phase: s.phase,
                leader: s.leader,
                peer_epoch: s.peer_epoch,
                accepted_epoch: s.accepted_epoch,
            };
            b.status(pos, s.index, s.time, node, core);
            election(b, last_raw, pos, node, s.last_election)
        }
        scan::Scanned::Unreachable { time, node } => {
            let node = node.map(|n| b.node_bytes(n));
            b.unreachable(pos, time, node);
            Ok(())
        }
        scan::Scanned::Write {
            time,
            process,
            kind,
            node,
            value,
            zxid,
        } => {
            // The builder names every node an event mentions, a write's too.
            if let Some(n) = node {
                b.node_bytes(n);
            }
            // The scanner took both from a line already checked to be UTF-8.
            let text = |t: &[u8]| String::from_utf8_lossy(t).into_owned();
            b.write(WriteOp {
                pos,
                time,
                process: text(process),
                kind,
                value: value.map(text),
                zxid,
            });
            Ok(())
        }
    }
}

/// Records a read's `last_election`, parsing it only when its text differs from the node's
/// previous one.
fn election(
    b: &mut DigestBuilder,
    last_raw: &mut Vec<Vec<u8>>,
    pos: u32,
    node: NodeIx,
    raw: Option<&[u8]>,
) -> Result<()> {
    let Some(raw) = raw else { return Ok(()) };
    if last_raw.len() <= node as usize {
        last_raw.resize(node as usize + 1, Vec::new());
    }
    let last = &mut last_raw[node as usize];
    if last.as_slice() == raw {
        b.note_election_present();
        return Ok(());
    }
    let summary: ElectionSummary =
        serde_json::from_slice(raw).context("last_election is not an election summary")?;
    b.election(pos, node, Some(summary));
    last.clear();
    last.extend_from_slice(raw);
    Ok(())
}
