//! Reading and writing `history.jsonl`.
//!
//! Writing: `HistoryWriter` assigns indices, appends one line per event and flushes each line
//! so that a controller killed mid-run leaves a readable history.
//! Reading: `read_history` parses a whole file; a torn last line (the controller died while
//! writing it) is skipped, any other bad line is an error naming the line.

use super::Event;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

/// Reads every event of a history file.
pub fn read_history(path: &Path) -> Result<Vec<Event>> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open history {}", path.display()))?;
    let mut events = Vec::new();
    let mut lines = BufReader::new(file).lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let line =
            line.with_context(|| format!("{}: cannot read line {}", path.display(), i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Event>(&line) {
            Ok(e) => events.push(e),
            // A torn final line is what a killed controller leaves: keep everything before it.
            Err(_) if lines.peek().is_none() => break,
            Err(e) => bail!(
                "{}: line {}: not a history event: {e}",
                path.display(),
                i + 1
            ),
        }
    }
    Ok(events)
}

/// Appends events to a history file, one JSON line each, flushed per line.
pub struct HistoryWriter {
    out: std::io::BufWriter<std::fs::File>,
    next_index: u64,
}

impl HistoryWriter {
    pub fn create(path: &Path) -> Result<Self> {
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot create history {}", path.display()))?;
        Ok(Self {
            out: std::io::BufWriter::new(file),
            next_index: 0,
        })
    }

    /// Writes `event` with the next index (the index field of `event` is overwritten) and
    /// returns that index.
    pub fn append(&mut self, mut event: Event) -> Result<u64> {
        event.index = self.next_index;
        self.next_index += 1;
        serde_json::to_writer(&mut self.out, &event)?;
        self.out.write_all(b"\n")?;
        self.out.flush()?;
        Ok(event.index)
    }
}
