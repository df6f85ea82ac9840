//! The control socket of a mounted lazyfs: one request line in, one JSON line out.
//!
//! `drop [TEAR_SEED]` is the power loss: every write not yet fsynced is forgotten; with a seed,
//! a seeded prefix of the very last write is kept first (a torn write). `unmount` ends the
//! filesystem. A Unix socket (not a signal) so the caller learns exactly what was lost, for the
//! history, and so it works the same through `ssh host fle-node lazyfs drop`.
//!
//! The socket is a path, or (`@NAME`, how fle-chaos names it) a name in Linux's abstract socket
//! namespace: no file, so no `sun_path` length limit set by where the run folder lives, and
//! nothing to remove, since the kernel drops the name with the last descriptor (a SIGKILLed
//! filesystem included). Abstract names are per network namespace: the mount and every request
//! run in the host's own.

use std::io::{BufRead, BufReader, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::FileExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::fs::State;

/// Where a lazyfs control socket lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlSocket {
    /// A socket file (at most 107 bytes of path).
    Path(PathBuf),
    /// A name in the abstract namespace, written `@NAME`.
    Abstract(String),
}

/// The longest abstract name: `sun_path`'s 108 bytes less the leading NUL.
const MAX_ABSTRACT_NAME: usize = 107;

impl std::str::FromStr for ControlSocket {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.strip_prefix('@') {
            Some("") => Err("an abstract socket needs a name after '@'".into()),
            Some(n) if n.len() > MAX_ABSTRACT_NAME => Err(format!(
                "the abstract socket name {n:?} is {} bytes, over the {MAX_ABSTRACT_NAME} allowed",
                n.len()
            )),
            Some(n) => Ok(ControlSocket::Abstract(n.to_string())),
            None if s.is_empty() => Err("give a socket path, or @NAME for an abstract one".into()),
            None => Ok(ControlSocket::Path(PathBuf::from(s))),
        }
    }
}

impl std::fmt::Display for ControlSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlSocket::Path(p) => write!(f, "{}", p.display()),
            ControlSocket::Abstract(n) => write!(f, "@{n}"),
        }
    }
}

impl ControlSocket {
    fn addr(&self) -> std::io::Result<SocketAddr> {
        match self {
            ControlSocket::Path(p) => SocketAddr::from_pathname(p),
            ControlSocket::Abstract(n) => SocketAddr::from_abstract_name(n.as_bytes()),
        }
    }

    /// Binds it (a stale socket file of a dead filesystem is replaced).
    pub fn bind(&self) -> std::io::Result<UnixListener> {
        self.remove_file();
        UnixListener::bind_addr(&self.addr()?)
    }

    pub fn connect(&self) -> std::io::Result<UnixStream> {
        UnixStream::connect_addr(&self.addr()?)
    }

    /// Removes the socket file, if this socket has one.
    pub fn remove_file(&self) {
        if let ControlSocket::Path(p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

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
        // An abstract name has no file permissions: only our own user may drive the
        // filesystem, and a client that connects and says nothing must not stall the next
        // power loss behind it (one request at a time).
        if peer_uid(&conn) != Some(unsafe { libc::geteuid() }) {
            let _ = writeln!(&conn, "error: only the filesystem's own user may ask it");
            continue;
        }
        let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
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

/// The uid of the process at the other end of `conn` (`SO_PEERCRED`).
fn peer_uid(conn: &UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket, a ucred-sized out buffer and its length.
    let r = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(cred.uid)
}

/// Sends one request and returns the answer line.
pub fn request(socket: &ControlSocket, req: &str) -> anyhow::Result<String> {
    let mut conn = socket
        .connect()
        .with_context(|| format!("lazyfs control socket {socket}"))?;
    writeln!(conn, "{req}")?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    let line = line.trim().to_string();
    if let Some(e) = line.strip_prefix("error: ") {
        anyhow::bail!("lazyfs {socket}: {e}");
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_socket_is_a_path_or_an_abstract_name() {
        let abs: ControlSocket = "@flc-lazyfs-abc123-n1".parse().unwrap();
        assert_eq!(abs, ControlSocket::Abstract("flc-lazyfs-abc123-n1".into()));
        assert_eq!(abs.to_string(), "@flc-lazyfs-abc123-n1");
        let path: ControlSocket = "/run/x.sock".parse().unwrap();
        assert_eq!(path, ControlSocket::Path("/run/x.sock".into()));
        assert!("@".parse::<ControlSocket>().is_err());
        assert!("".parse::<ControlSocket>().is_err());
        assert!(format!("@{}", "x".repeat(108))
            .parse::<ControlSocket>()
            .unwrap_err()
            .contains("over the 107"));
    }

    #[test]
    fn an_abstract_socket_answers_and_leaves_no_file() {
        let name = format!("flc-lazyfs-test-{}", std::process::id());
        let sock: ControlSocket = format!("@{name}").parse().unwrap();
        let listener = sock.bind().unwrap();
        let server = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&conn).read_line(&mut line).unwrap();
            writeln!(&conn, "pong").unwrap();
            line
        });
        assert_eq!(request(&sock, "ping").unwrap(), "pong");
        assert_eq!(server.join().unwrap(), "ping\n");
        assert!(!std::path::Path::new(&name).exists());
    }

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
