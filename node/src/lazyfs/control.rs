//! The control socket of a mounted lazyfs: one request line in, one JSON line out.
//!
//! `drop [TEAR_SEED]` is the power loss: every write not yet fsynced is forgotten; with a seed,
//! a seeded prefix of the very last write is kept first (a torn write). `unmount` ends the
//! filesystem. A Unix socket (not a signal) so the caller learns exactly what was lost, for the
//! history, and so it works the same through `ssh host fle-node lazyfs drop`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::fs::State;

/// One file's forgotten writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedFile {
    /// Path relative to the mount.
    pub file: String,
    /// The first offset whose bytes were lost (the lowest pending write).
    pub from_offset: u64,
    /// How many bytes of pending writes were thrown away.
    pub bytes: u64,
}

/// The last write, partly kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TornWrite {
    pub file: String,
    pub offset: u64,
    /// Bytes of the write kept (made durable); the rest was lost.
    pub kept: u64,
    pub len: u64,
}

/// What a power loss did, exactly (recorded in the history by the controller).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropReport {
    pub dropped: Vec<DroppedFile>,
    pub torn: Option<TornWrite>,
}

/// A seeded point in `0..len` (splitmix64; no RNG crate in the node for one number).
fn tear_point(seed: u64, len: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % len.max(1)
}

/// The power loss itself.
pub fn power_loss(state: &mut State, tear_seed: Option<u64>) -> std::io::Result<DropReport> {
    // The torn part is read through the overlay before it is forgotten.
    let torn = match (tear_seed, state.overlay.last()) {
        (Some(seed), Some(last)) if last.len > 0 => {
            let kept = tear_point(seed, last.len);
            let mut buf = vec![0u8; kept as usize];
            if let Some(p) = state.overlay.get(last.ino) {
                p.overlay(last.offset, &mut buf);
            }
            Some((last, kept, buf))
        }
        _ => None,
    };
    let mut report = DropReport::default();
    for (ino, p) in state.overlay.drain() {
        report.dropped.push(DroppedFile {
            file: state.rel(ino),
            from_offset: p.writes.iter().map(|(o, _)| *o).min().unwrap_or(0),
            bytes: p.bytes(),
        });
    }
    if let Some((last, kept, buf)) = torn {
        if let Ok(path) = state.path(last.ino) {
            let f = std::fs::OpenOptions::new().write(true).open(path)?;
            f.write_all_at(&buf, last.offset)?;
            f.sync_data()?;
        }
        report.torn = Some(TornWrite {
            file: state.rel(last.ino),
            offset: last.offset,
            kept,
            len: last.len,
        });
    }
    Ok(report)
}

/// Serves the socket until `unmount` (then calls `on_unmount`).
pub fn serve(
    listener: UnixListener,
    state: Arc<Mutex<State>>,
    on_unmount: impl Fn() + Send + 'static,
) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let mut line = String::new();
        if BufReader::new(&conn).read_line(&mut line).is_err() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let answer = match words.as_slice() {
            ["drop"] | ["drop", _] => {
                let seed = words.get(1).and_then(|s| s.parse().ok());
                let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
                match power_loss(&mut s, seed) {
                    Ok(r) => serde_json::to_string(&r).unwrap_or_default(),
                    Err(e) => format!("error: {e}"),
                }
            }
            ["ping"] => "pong".to_string(),
            ["unmount"] => {
                let _ = writeln!(&conn, "unmounting");
                on_unmount();
                return;
            }
            _ => format!(
                "error: unknown request {:?} (drop [SEED], ping, unmount)",
                line.trim()
            ),
        };
        let _ = writeln!(&conn, "{answer}");
    }
}

/// Sends one request and returns the answer line.
pub fn request(socket: &Path, req: &str) -> anyhow::Result<String> {
    let mut conn = UnixStream::connect(socket)
        .with_context(|| format!("lazyfs control socket {}", socket.display()))?;
    writeln!(conn, "{req}")?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    let line = line.trim().to_string();
    if let Some(e) = line.strip_prefix("error: ") {
        anyhow::bail!("lazyfs {}: {e}", socket.display());
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tear_point_is_seeded_and_inside_the_write() {
        assert_eq!(tear_point(7, 100), tear_point(7, 100));
        assert!((0..50).map(|s| tear_point(s, 10)).all(|k| k < 10));
        assert!(
            (0..50)
                .map(|s| tear_point(s, 1000))
                .collect::<std::collections::HashSet<_>>()
                .len()
                > 10
        );
    }
}
