//! The quorum port's front door: what a connection must do before the leader sees it.
//!
//! The port stays open for the server's whole life (a follower that decided first dials before
//! its leader leads), so strangers can reach it while nobody leads. Each accepted connection must
//! send a FOLLOWERINFO of another voter within tickTime·initLimit (ZooKeeper's socket timeout for
//! a learner's first packet) in at most `MAX_HANDSHAKE_BYTES`; at most `MAX_UNIDENTIFIED` may be
//! waiting for theirs: a new one beyond that closes the OLDEST waiting one, not itself, because
//! a real follower speaks within milliseconds of connecting while a flood's connections sit
//! silent (refusing new ones let a flood that filled the slots shut out the next follower). An identified connection waits in the [`Lobby`]
//! for a leader to take it, and is closed (not left in CLOSE-WAIT) once its deadline passes:
//! its follower gives up after initLimit anyway.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Notify};

use crate::peers::{bump, WireCounters, MAX_UNIDENTIFIED};
use crate::warn_limit::WarnLimiter;
use crate::zab::messages::{decode_frame, Msg};

/// A FOLLOWERINFO frame is 29 bytes; a first frame longer than this is not one.
pub const MAX_HANDSHAKE_BYTES: usize = 1024;

/// A follower's connection that said who it is, with the bytes read so far (FOLLOWERINFO
/// included: the leader decodes it again).
pub struct Identified {
    pub stream: TcpStream,
    pub prefix: Vec<u8>,
    pub sid: u64,
    expires: Instant,
}

/// Identified connections waiting for a leader.
#[derive(Default)]
pub struct Lobby {
    waiting: Mutex<VecDeque<Identified>>,
    arrived: Notify,
}

impl Lobby {
    fn push(&self, c: Identified) {
        self.lock().push_back(c);
        self.arrived.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Identified>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the connections whose deadline passed; returns how many.
    fn expire(&self, now: Instant) -> usize {
        let mut q = self.lock();
        let before = q.len();
        q.retain(|c| c.expires > now);
        before - q.len()
    }

    /// The next identified connection still within its deadline (one consumer: the leader).
    pub async fn next(&self) -> Identified {
        loop {
            loop {
                let c = self.lock().pop_front();
                match c {
                    Some(c) if c.expires > Instant::now() => return c,
                    Some(_) => continue,
                    None => break,
                }
            }
            self.arrived.notified().await;
        }
    }
}

/// What the acceptor needs to know.
pub struct AcceptConfig {
    pub my_sid: u64,
    /// The servers in force, voters and observers: who may introduce itself.
    pub members: crate::membership::Members,
    /// tickTime·initLimit.
    pub deadline: Duration,
}

/// Accepts on the quorum port forever, handing identified connections to `lobby`.
pub async fn accept_loop(
    listener: TcpListener,
    cfg: AcceptConfig,
    lobby: Arc<Lobby>,
    counters: Arc<WireCounters>,
    warnings: Arc<WarnLimiter>,
) {
    let cfg = Arc::new(cfg);
    // One cancel handle per connection still waiting for its FOLLOWERINFO, oldest first.
    let mut waiting: VecDeque<oneshot::Sender<()>> = VecDeque::new();
    loop {
        let (stream, from) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors and the like: do not spin on it.
                tracing::warn!("accepting on the quorum port: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        bump(&counters.quorum_accepted);
        waiting.retain(|c| !c.is_closed());
        if waiting.len() >= MAX_UNIDENTIFIED {
            // Dropping its sender ends the oldest handshake, which closes its connection.
            waiting.pop_front();
            bump(&counters.quorum_refused);
            if let Some(n) = warnings.allow(&from.ip().to_string(), Instant::now()) {
                tracing::warn!(from = %from, suppressed = n, limit = MAX_UNIDENTIFIED, "quorum port: too many connections without a FOLLOWERINFO; closing the oldest");
            }
        }
        let (cancel, mut cancelled) = oneshot::channel::<()>();
        waiting.push_back(cancel);
        let (cfg, lobby, counters, warnings) = (
            cfg.clone(),
            lobby.clone(),
            counters.clone(),
            warnings.clone(),
        );
        tokio::spawn(async move {
            let accepted = Instant::now();
            let first = tokio::select! {
                first = tokio::time::timeout(cfg.deadline, first_frame(stream)) => first,
                _ = &mut cancelled => return,
            };
            // No longer waiting: frees its place among the unidentified.
            drop(cancelled);
            let why = match first.map(|r| r.map(|(s, p, m)| (s, p, m.learner_sid(), m))) {
                Ok(Ok((stream, prefix, Some(sid), _)))
                    if sid != cfg.my_sid && cfg.members.borrow().servers.contains_key(&sid) =>
                {
                    let expires = accepted + cfg.deadline;
                    lobby.push(Identified {
                        stream,
                        prefix,
                        sid,
                        expires,
                    });
                    // Not taken by then: its follower has given up; close it.
                    tokio::time::sleep_until(expires.into()).await;
                    let n = lobby.expire(Instant::now());
                    for _ in 0..n {
                        bump(&counters.quorum_expired);
                    }
                    return;
                }
                Ok(Ok((_, _, Some(sid), m))) => format!(
                    "{} from sid {sid}, which is not another server of the ensemble",
                    crate::zab::leader::short_name(&m)
                ),
                Ok(Ok((_, _, None, m))) => format!(
                    "first message is {}, not FOLLOWERINFO or OBSERVERINFO",
                    crate::zab::leader::short_name(&m)
                ),
                Ok(Err(e)) => e,
                Err(_) => format!("no FOLLOWERINFO within {:?} (initLimit)", cfg.deadline),
            };
            bump(&counters.quorum_bad_handshakes);
            warn_bad(&warnings, from, &why);
        });
    }
}

fn warn_bad(warnings: &WarnLimiter, from: SocketAddr, why: &str) {
    if let Some(n) = warnings.allow(&from.ip().to_string(), Instant::now()) {
        tracing::warn!(from = %from, suppressed = n, error = %why, "closed a quorum-port connection");
    }
}

/// Reads until the first whole frame: (stream, bytes read, message), or why not.
async fn first_frame(mut stream: TcpStream) -> Result<(TcpStream, Vec<u8>, Msg), String> {
    let mut buf = Vec::with_capacity(64);
    let mut chunk = [0u8; 256];
    loop {
        match decode_frame(&buf) {
            Ok(Some((m, _))) => return Ok((stream, buf, m)),
            Ok(None) if buf.len() >= MAX_HANDSHAKE_BYTES => {
                return Err(format!(
                    "no whole first frame in {MAX_HANDSHAKE_BYTES} bytes"
                ))
            }
            Ok(None) => {}
            Err(e) => return Err(format!("bad bytes: {e}")),
        }
        match stream.read(&mut chunk).await {
            Ok(0) => return Err("closed before FOLLOWERINFO".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("read failed: {e}")),
        }
    }
}
