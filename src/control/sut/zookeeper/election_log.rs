//! Following each server's zookeeper.log for its elections: at each observation the bytes
//! the log gained since the last one (at most `MAX_READ`, so a huge log is caught up over
//! several observations), read into election spans (`fle_log`), and the latest decided
//! election as fle-node would report it. Locally by seeking in the file; over SSH with one
//! `tail -c | head -c` round trip, at most once per `REMOTE_EVERY` unless the server's role
//! changed. A log that shrank (a server started afresh) is read again from its start.

use super::fle_log::{Span, Spans};
use crate::api::ElectionSummary;
use crate::control::Control;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most bytes read of one log per observation.
const MAX_READ: u64 = 4 << 20;
/// How often a remote log is read while the server's role holds still.
const REMOTE_EVERY: Duration = Duration::from_secs(1);

/// Where each server's log has been read to, and what it showed.
#[derive(Default)]
pub struct ElectionLogs {
    remote: bool,
    /// One lock per node: a slow remote read of one log holds up no other node's observer.
    nodes: Mutex<HashMap<String, Arc<Mutex<Follow>>>>,
}

#[derive(Default)]
struct Follow {
    offset: u64,
    /// A line cut by the end of the last read.
    partial: Vec<u8>,
    spans: Spans,
    /// The last ended span and what it was read as.
    judged: Option<(Span, Option<ElectionSummary>)>,
    read_at: Option<Instant>,
    role: Option<(bool, u64)>,
}

impl ElectionLogs {
    pub fn new(remote: bool) -> Self {
        ElectionLogs {
            remote,
            nodes: Mutex::default(),
        }
    }

    /// `node`'s latest decided election, after reading what its log at `path` gained; `role`
    /// is what the observation saw (a change makes a remote log be read now). None when no
    /// election was read, or the last could not be pinned down (`fle_log::summary`).
    pub fn last_election(
        &self,
        control: &dyn Control,
        node: &str,
        path: &Path,
        role: Option<(bool, u64)>,
        judge: impl Fn(&Span) -> Result<ElectionSummary, String>,
    ) -> Option<ElectionSummary> {
        let follow = self
            .nodes
            .lock()
            .unwrap()
            .entry(node.to_string())
            .or_default()
            .clone();
        let mut f = follow.lock().unwrap();
        let due =
            !self.remote || f.role != role || f.read_at.is_none_or(|t| t.elapsed() >= REMOTE_EVERY);
        if due {
            f.role = role;
            f.read_at = Some(Instant::now());
            let read = if self.remote {
                read_remote(control, node, path, f.offset)
            } else {
                read_local(path, f.offset).map_err(|e| e.to_string())
            };
            match read {
                Ok((size, bytes)) => f.take(size, &bytes),
                Err(e) => tracing::debug!("{node}: cannot read {}: {e}", path.display()),
            }
        }
        let last = f.spans.last.as_ref()?;
        if f.judged.as_ref().is_none_or(|(s, _)| s != last) {
            let summary = match judge(last) {
                Ok(s) => Some(s),
                Err(why) => {
                    tracing::debug!(
                        "{node}: its election at {} ms is not judged: {why}",
                        last.started_ms
                    );
                    None
                }
            };
            f.judged = Some((last.clone(), summary));
        }
        f.judged.as_ref().and_then(|(_, s)| s.clone())
    }
}

impl Follow {
    /// Takes `bytes` read at the offset of a log now `size` long.
    fn take(&mut self, size: u64, bytes: &[u8]) {
        if size < self.offset {
            // Shorter than what was read: a new log.
            self.offset = 0;
            self.partial.clear();
            return;
        }
        self.offset += bytes.len() as u64;
        self.partial.extend_from_slice(bytes);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        let whole: Vec<u8> = self.partial.drain(..=end).collect();
        for line in String::from_utf8_lossy(&whole).lines() {
            self.spans.line(line);
        }
    }
}

/// The file's size and at most `MAX_READ` bytes from `offset`.
fn read_local(path: &Path, offset: u64) -> std::io::Result<(u64, Vec<u8>)> {
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    if size <= offset {
        return Ok((size, Vec::new()));
    }
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.take(MAX_READ).read_to_end(&mut bytes)?;
    Ok((size, bytes))
}

/// The same over the node's control, in one round trip: its size on the first line, then
/// the bytes.
fn read_remote(
    control: &dyn Control,
    node: &str,
    path: &Path,
    offset: u64,
) -> Result<(u64, Vec<u8>), String> {
    let file = crate::control::backend::ssh::shell::quote(&path.to_string_lossy());
    let script = format!(
        "[ -f {file} ] || exit 0; wc -c < {file}; tail -c +{} {file} | head -c {MAX_READ}",
        offset + 1
    );
    let out = crate::control::blocking(|| control.exec(node, "sh", &["-c", &script]))
        .map_err(|e| format!("{e:#}"))?;
    let Some(nl) = out.stdout.iter().position(|&b| b == b'\n') else {
        return Ok((0, Vec::new()));
    };
    let size = String::from_utf8_lossy(&out.stdout[..nl])
        .trim()
        .parse()
        .map_err(|e| format!("its size: {e}"))?;
    Ok((size, out.stdout[nl + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = "2026-12-01T18:23:00.237+0000 [QuorumPeer[myid=1]] INFO org.apache.zookeeper.server.quorum.FastLeaderElection - New election. My id = 1, proposed zxid=0x0\n";
    const END: &str = "2026-12-01T18:23:00.666+0000 [QuorumPeer[myid=1]] INFO org.apache.zookeeper.server.quorum.QuorumPeer - FOLLOWING\n";

    /// A line cut by the end of a read is read whole at the next; a log that shrank is
    /// read again from its start.
    #[test]
    fn cut_lines_wait_for_their_end_and_a_new_log_starts_over() {
        let mut f = Follow::default();
        let log = format!("{START}{END}");
        let cut = START.len() + 20;
        f.take(cut as u64, &log.as_bytes()[..cut]);
        assert!(f.spans.electing() && f.spans.last.is_none());
        f.take(log.len() as u64, &log.as_bytes()[cut..]);
        assert_eq!(f.offset, log.len() as u64);
        let ended = f.spans.last.as_ref().expect("the election ended");
        assert_eq!(
            ended.ended.map(|e| e.1),
            Some(crate::api::ServerState::Following)
        );
        // A restarted server's new, shorter log.
        f.take(10, b"");
        assert_eq!((f.offset, f.partial.len()), (0, 0));
    }

    /// The local reader reads from the offset, at most MAX_READ at a time.
    #[test]
    fn the_local_reader_reads_from_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zookeeper.log");
        std::fs::write(&path, format!("{START}{END}")).unwrap();
        let (size, bytes) = read_local(&path, START.len() as u64).unwrap();
        assert_eq!(size as usize, START.len() + END.len());
        assert_eq!(bytes, END.as_bytes());
        assert!(read_local(&dir.path().join("missing"), 0).is_err());
    }
}
