//! Writing `history.jsonl`: the one writer. `HistoryWriter` assigns indices, appends one line
//! per event and flushes each line, so that a controller killed mid-run leaves a readable
//! history (at worst an unterminated last line, which readers forgive). Reading is
//! `history::read`'s.

use super::Event;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// Appends events to a history file, one JSON line each, flushed per line.
pub struct HistoryWriter {
    out: std::io::BufWriter<std::fs::File>,
    next_index: u64,
    line: Vec<u8>,
}

impl HistoryWriter {
    pub fn create(path: &Path) -> Result<Self> {
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot create history {}", path.display()))?;
        Ok(Self {
            out: std::io::BufWriter::new(file),
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
        self.out.write_all(&self.line)?;
        self.out.flush()?;
        self.next_index += 1;
        let text = std::str::from_utf8(&self.line[..self.line.len() - 1])
            .expect("serde_json writes UTF-8");
        Ok((event.index, text))
    }
}

/// Reads a whole history into owned events (kept for callers of the old name; the reader is
/// `history::read`).
pub use super::read::read_events as read_history;
