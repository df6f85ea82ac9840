//! Writing the history: the one writer. `HistoryWriter` assigns indices and appends one line
//! per event. A `.zst` path (what a run writes, `file::WRITTEN`) gets independent zstd frames
//! of whole lines: the lines gather in memory and a frame is closed, written and flushed once
//! its first line is a second old or it holds 4 MiB (and by `flush`, and on drop), so a
//! controller killed mid-run loses at most about the last second, and what it leaves reads
//! back with at worst a torn last frame, which readers forgive (see `file`). Any other path
//! gets plain lines, each flushed as it is written. Reading is `history::read`'s.

use super::Event;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// A frame is closed when its first line is this old...
const FRAME_AGE: Duration = Duration::from_secs(1);
/// ...or when it holds this much text (a burst of writes).
const FRAME_BYTES: usize = 4 << 20;
/// zstd's level: status reads repeat so much that level 3 already shrinks a run's history
/// about 33 times (17 MB to 0.5 MB); higher levels cost the controller CPU for little more.
const LEVEL: i32 = 3;

/// Appends events to a history file, one JSON line each.
pub struct HistoryWriter {
    out: std::fs::File,
    frames: Option<Framer>,
    next_index: u64,
    line: Vec<u8>,
}

/// The lines of the frame being gathered.
struct Framer {
    compressor: zstd::bulk::Compressor<'static>,
    text: Vec<u8>,
    since: Option<Instant>,
}

impl HistoryWriter {
    pub fn create(path: &Path) -> Result<Self> {
        let out = std::fs::File::create(path)
            .with_context(|| format!("cannot create history {}", path.display()))?;
        let frames = if path.extension().is_some_and(|e| e == "zst") {
            Some(Framer {
                compressor: compressor()?,
                text: Vec::new(),
                since: None,
            })
        } else {
            None
        };
        Ok(Self {
            out,
            frames,
            next_index: 0,
            line: Vec::new(),
        })
    }

    /// Writes `event` with the next index (the index field of `event` is overwritten) and
    /// returns that index.
    pub fn append(&mut self, event: Event) -> Result<u64> {
        self.append_line(event).map(|(i, _)| i)
    }

    /// As `append`, also returning the line as written (without its newline), so the caller
    /// can decode it with `history::line::decode` exactly as any reader will.
    pub fn append_line(&mut self, mut event: Event) -> Result<(u64, &str)> {
        event.index = self.next_index;
        self.line.clear();
        serde_json::to_writer(&mut self.line, &event)?;
        self.line.push(b'\n');
        match &mut self.frames {
            None => self.out.write_all(&self.line)?,
            Some(f) => {
                f.text.extend_from_slice(&self.line);
                let since = *f.since.get_or_insert_with(Instant::now);
                if f.text.len() >= FRAME_BYTES || since.elapsed() >= FRAME_AGE {
                    self.flush()?;
                }
            }
        }
        self.next_index += 1;
        let text = std::str::from_utf8(&self.line[..self.line.len() - 1])
            .expect("serde_json writes UTF-8");
        Ok((event.index, text))
    }

    /// Writes out the lines gathered so far (a compressed history's open frame).
    pub fn flush(&mut self) -> Result<()> {
        let Some(f) = &mut self.frames else {
            return Ok(());
        };
        if f.text.is_empty() {
            return Ok(());
        }
        let frame = f.compressor.compress(&f.text)?;
        // One write of the whole frame: a kill can cut only this last frame short.
        self.out.write_all(&frame)?;
        f.text.clear();
        f.since = None;
        Ok(())
    }

    /// Flushes if the open frame's first line is a second old (a run's quiet moments).
    pub fn flush_if_due(&mut self) -> Result<()> {
        match self.frames.as_ref().and_then(|f| f.since) {
            Some(since) if since.elapsed() >= FRAME_AGE => self.flush(),
            _ => Ok(()),
        }
    }
}

impl Drop for HistoryWriter {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::error!("cannot write the history's last lines: {e:#}");
        }
    }
}

fn compressor() -> Result<zstd::bulk::Compressor<'static>> {
    let mut c = zstd::bulk::Compressor::new(LEVEL)?;
    // A damaged frame is then found by its checksum, not read as other text.
    c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
    Ok(c)
}

/// A plain history's text stored as the writer stores it, in frames of whole lines of about
/// `frame_bytes` each (the tests' compressed copies of fixtures).
pub fn compress_lines(text: &[u8], frame_bytes: usize) -> Result<Vec<u8>> {
    let mut c = compressor()?;
    let (mut out, mut rest) = (Vec::new(), text);
    while !rest.is_empty() {
        let cut = match memchr::memchr(b'\n', &rest[frame_bytes.min(rest.len() - 1)..]) {
            Some(p) => frame_bytes.min(rest.len() - 1) + p + 1,
            None => rest.len(),
        };
        out.extend(c.compress(&rest[..cut])?);
        rest = &rest[cut..];
    }
    Ok(out)
}

/// Reads a whole history into owned events (kept for callers of the old name; the reader is
/// `history::read`).
pub use super::read::read_events as read_history;
