//! The packet engine: delay, duplication and reordering for a kernel without netem. One thread
//! per node joins the node's network namespace, binds its fault's NFQUEUE (`Slot::queue`) there (queues are per
//! namespace) and gives every queued packet its verdict: at once, later (held in a timer
//! queue; NFQUEUE accepts verdicts in any order), or at once plus a copy sent through a raw
//! socket whose packets carry `MARK`, which the NFQUEUE rule lets pass.
//!
//! Stopping releases every held packet (nothing is lost by a heal) and unbinds. The decisions
//! are drawn from a seeded ChaCha, so a fault's seed fixes them (timing still varies).
//!
//! The `nfq` crate speaks the nfnetlink_queue protocol; it has no raw fd, so the loop polls
//! the non-blocking socket every millisecond (a held packet waits at most that much longer).

use super::{PacketMode, MARK};
use anyhow::{anyhow, bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What one node's engine did, for the heal's record.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct EngineStats {
    /// Packets the queue handed over.
    pub seen: u64,
    /// Held before their verdict (delay, reorder).
    pub held: u64,
    /// Sent twice (duplicate).
    pub duplicated: u64,
    /// Errors (a verdict or a copy that failed), at most the first few kept as text.
    pub errors: Vec<String>,
}

/// A running engine on one node's namespace.
pub struct Engine {
    node: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<EngineStats>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Engine({})", self.node)
    }
}

impl Engine {
    /// Starts the engine in namespace `netns` (a name under /run/netns) for `mode`; returns
    /// once the queue is bound, or the reason it could not be.
    pub fn start(
        node: &str,
        netns: &str,
        mode: PacketMode,
        seed: u64,
        queue: u16,
    ) -> Result<Engine> {
        if !mode.needs_engine() {
            bail!("{} needs no engine", mode.name());
        }
        let path = std::path::Path::new("/run/netns").join(netns);
        let ns = std::fs::File::open(&path)
            .with_context(|| format!("cannot open the namespace {}", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("flc-packet-{node}"))
            .spawn(move || run(ns, mode, seed, queue, stop2, ready_tx))
            .context("cannot start the packet engine's thread")?;
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(Engine {
                node: node.to_string(),
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(anyhow!("{node}: the packet engine could not start: {e}"))
            }
            Err(_) => {
                stop.store(true, Ordering::SeqCst);
                Err(anyhow!(
                    "{node}: the packet engine did not start within 10 s"
                ))
            }
        }
    }

    /// The node whose namespace the engine works in.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Releases every held packet, unbinds the queue and returns what the engine did.
    pub fn stop(mut self) -> EngineStats {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // A dropped engine (a run torn down mid-fault) still lets its packets go.
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "the engine thread's one loop: read a packet, decide, release what is due"
)]
fn run(
    ns: std::fs::File,
    mode: PacketMode,
    seed: u64,
    queue: u16,
    stop: Arc<AtomicBool>,
    ready: mpsc::Sender<Result<(), String>>,
) -> EngineStats {
    let mut stats = EngineStats::default();
    let setup = (|| -> Result<(nfq::Queue, Option<RawSocket>)> {
        // SAFETY: a valid namespace fd; setns moves only this thread.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            bail!("setns: {}", std::io::Error::last_os_error());
        }
        let mut q = nfq::Queue::open().context("cannot open an nfnetlink socket")?;
        q.bind(queue)
            .with_context(|| format!("cannot bind NFQUEUE {queue}"))?;
        // A full queue lets packets pass rather than drop them: the fault is delay, not loss.
        q.set_fail_open(queue, true)?;
        q.set_queue_max_len(queue, 8192)?;
        q.set_nonblocking(true);
        let raw = match mode {
            PacketMode::Duplicate { .. } => Some(RawSocket::open()?),
            _ => None,
        };
        Ok((q, raw))
    })();
    let (mut q, raw) = match setup {
        Ok(x) => {
            let _ = ready.send(Ok(()));
            x
        }
        Err(e) => {
            let _ = ready.send(Err(format!("{e:#}")));
            return stats;
        }
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // (due, sequence) -> packet; the sequence keeps equal due times in arrival order.
    let mut held: BTreeMap<(Instant, u64), nfq::Message> = BTreeMap::new();
    let mut seq = 0u64;
    let note = |stats: &mut EngineStats, e: String| {
        if stats.errors.len() < 5 {
            stats.errors.push(e);
        }
    };
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let now = Instant::now();
        while let Some(entry) = held.first_entry() {
            if !stopping && entry.key().0 > now {
                break;
            }
            let mut msg = entry.remove();
            msg.set_verdict(nfq::Verdict::Accept);
            if let Err(e) = q.verdict(msg) {
                note(&mut stats, format!("verdict: {e}"));
            }
        }
        if stopping {
            break;
        }
        let mut got = 0;
        loop {
            let mut msg = match q.recv() {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    note(&mut stats, format!("recv: {e}"));
                    break;
                }
            };
            got += 1;
            stats.seen += 1;
            let hold = match mode {
                PacketMode::Delay {
                    delay_ms,
                    jitter_ms,
                } => {
                    let j = jitter_ms as i64;
                    let ms = delay_ms as i64 + if j > 0 { rng.gen_range(-j..=j) } else { 0 };
                    Some(Duration::from_millis(ms.max(0) as u64))
                }
                PacketMode::Reorder { percent, delay_ms } => {
                    (rng.gen::<f64>() * 100.0 < percent).then(|| Duration::from_millis(delay_ms))
                }
                PacketMode::Duplicate { percent } => {
                    if rng.gen::<f64>() * 100.0 < percent {
                        if let Some(raw) = &raw {
                            match raw.send_copy(msg.get_payload()) {
                                Ok(()) => stats.duplicated += 1,
                                Err(e) => note(&mut stats, format!("copy: {e}")),
                            }
                        }
                    }
                    None
                }
                PacketMode::Loss { .. } | PacketMode::Bandwidth { .. } => None,
            };
            match hold {
                Some(d) => {
                    stats.held += 1;
                    seq += 1;
                    held.insert((Instant::now() + d, seq), msg);
                }
                None => {
                    msg.set_verdict(nfq::Verdict::Accept);
                    if let Err(e) = q.verdict(msg) {
                        note(&mut stats, format!("verdict: {e}"));
                    }
                }
            }
        }
        if got == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let _ = q.unbind(queue);
    stats
}

/// A raw IPv4 socket (IP_HDRINCL) in the node's namespace whose packets carry `MARK`.
struct RawSocket(std::os::fd::OwnedFd);

impl RawSocket {
    fn open() -> Result<RawSocket> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain socket(2); the fd is owned from here on.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
        if fd < 0 {
            bail!("raw socket: {}", std::io::Error::last_os_error());
        }
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let mark: libc::c_int = MARK as libc::c_int;
        // SAFETY: a valid fd and an int option of the right size.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_MARK,
                &mark as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            bail!("SO_MARK: {}", std::io::Error::last_os_error());
        }
        Ok(RawSocket(fd))
    }

    /// Sends `packet` (a whole IPv4 packet, as queued) again, to its own destination.
    fn send_copy(&self, packet: &[u8]) -> std::io::Result<()> {
        if packet.len() < 20 || packet[0] >> 4 != 4 {
            return Err(std::io::Error::other("not an IPv4 packet"));
        }
        let dst = [packet[16], packet[17], packet[18], packet[19]];
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(dst),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: valid buffer and address for the call's duration.
        let n = unsafe {
            libc::sendto(
                self.0.as_raw_fd(),
                packet.as_ptr() as *const libc::c_void,
                packet.len(),
                0,
                &addr as *const libc::sockaddr_in as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}
