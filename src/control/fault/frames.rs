//! Bad election frames (the `frames` fault): the controller dials a node's election port as
//! one of its peers and sends what a broken or dying peer might, then hangs up.
//!
//! Why from the controller: a SIGKILLed sender's written bytes are still delivered whole by
//! TCP, so no other fault ever hands a server a partial notification (ZOOKEEPER-3769: one
//! killed the receiver thread, and the server heard no election message again).
//!
//! - The hello names a peer with a LARGER sid than the target's: a server keeps only the
//!   connections the larger sid dialed (it drops a smaller one and dials back) and refuses
//!   sids it does not know. Like a real reconnect of that peer, it replaces the target's
//!   connection from it; the peer dials again once ours closes.
//! - `truncated`: one whole frame whose payload is a notification cut short (a partial message:
//!   the length prefix matches the bytes, too few for any notification layout), then a length
//!   prefix whose payload stops part-way (a sender dying mid-frame), then FIN.
//! - `garbage`: seeded random bytes (almost surely a frame length out of range).
//!
//! The bytes come from the node's own encoders (`fle_node::wire`): one definition of the layout.

use anyhow::{Context, Result};
use fle_node::api::ServerState;
use fle_node::wire;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// What a `frames` fault writes after its hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameMode {
    Truncated,
    Garbage,
}

impl FrameMode {
    pub const ALL: [FrameMode; 2] = [FrameMode::Truncated, FrameMode::Garbage];

    pub fn name(self) -> &'static str {
        match self {
            FrameMode::Truncated => "truncated",
            FrameMode::Garbage => "garbage",
        }
    }

    pub fn parse(s: &str) -> Option<FrameMode> {
        FrameMode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// How long to connect and to write.
const IO_TIMEOUT: Duration = Duration::from_secs(1);
/// How long to wait for the node to close its side after our FIN (its reads of what was sent
/// finish first; the bytes it sends meanwhile are read and dropped, so our close is a FIN,
/// not a reset that could discard what it has not read yet).
const DRAIN: Duration = Duration::from_secs(1);

/// The bytes after the hello, and what they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    pub bytes: Vec<u8>,
    /// Truncated: the whole frame's payload length (the notification cut at this byte).
    pub cut: Option<usize>,
    /// Truncated: payload bytes sent after the last length prefix (which promised a whole
    /// notification).
    pub tail: Option<usize>,
}

/// The bytes `mode` sends as `as_sid`, from `seed` (same seed, same bytes).
pub fn payload(mode: FrameMode, as_sid: u64, seed: u64) -> Payload {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    match mode {
        FrameMode::Truncated => {
            let n = wire::encode_notification(&wire::Notification {
                state: ServerState::Looking,
                leader: as_sid,
                zxid: 0,
                election_epoch: 0,
                peer_epoch: 0,
                version: wire::NOTIFICATION_VERSION,
                config: Vec::new(),
            });
            // Every cut is too short for its layout except the legacy 28- and 40-byte ones.
            let cuts: Vec<usize> = (1..n.len()).filter(|c| *c != 28 && *c != 40).collect();
            let cut = cuts[rng.gen_range(0..cuts.len())];
            let tail = rng.gen_range(0..n.len());
            let mut bytes = wire::frame(&n[..cut]);
            bytes.extend_from_slice(&(n.len() as i32).to_be_bytes());
            bytes.extend_from_slice(&n[..tail]);
            Payload {
                bytes,
                cut: Some(cut),
                tail: Some(tail),
            }
        }
        FrameMode::Garbage => {
            let len = rng.gen_range(8..=256);
            Payload {
                bytes: (0..len).map(|_| rng.gen()).collect(),
                cut: None,
                tail: None,
            }
        }
    }
}

/// What one `frames` fault did to one node (recorded in the history).
#[derive(Debug, Clone, Serialize)]
pub struct Sent {
    pub mode: &'static str,
    /// The peer the hello named.
    pub as_sid: u64,
    pub seed: u64,
    /// Everything written: hello + payload.
    pub bytes_sent: usize,
    pub hello_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail: Option<usize>,
    /// Bytes the node sent us (its last vote, re-sent on every new connection).
    pub bytes_received: usize,
    /// Whether the node closed its side within the drain time.
    pub closed_by_node: bool,
}

/// Dials `to` (a node's election port), says hello as `as_sid` at `as_addr` (that peer's
/// election address), sends `mode`'s bytes from `seed`, then closes. Blocking (at most
/// ~3 s), wrapped in `control::blocking` for the async nemesis.
pub fn send(
    to: SocketAddr,
    as_sid: u64,
    as_addr: SocketAddr,
    mode: FrameMode,
    seed: u64,
) -> Result<Sent> {
    crate::control::blocking(|| send_now(to, as_sid, as_addr, mode, seed))
}

fn send_now(
    to: SocketAddr,
    as_sid: u64,
    as_addr: SocketAddr,
    mode: FrameMode,
    seed: u64,
) -> Result<Sent> {
    let mut stream = TcpStream::connect_timeout(&to, IO_TIMEOUT)
        .with_context(|| format!("cannot connect to the election port {to}"))?;
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let hello = wire::encode_hello(as_sid, &as_addr.to_string());
    let body = payload(mode, as_sid, seed);
    // One write, so one segment: the node reads the payload in the same turn that hands it
    // the connection. In two, a loaded sender could deliver the payload after the real peer
    // dialed again and replaced our connection, and the payload was never read.
    let bytes = [hello.as_slice(), &body.bytes].concat();
    stream
        .write_all(&bytes)
        .with_context(|| format!("writing to the election port {to}"))?;
    stream.shutdown(Shutdown::Write)?;
    let (bytes_received, closed_by_node) = drain(&mut stream, DRAIN);
    Ok(Sent {
        mode: mode.name(),
        as_sid,
        seed,
        bytes_sent: hello.len() + body.bytes.len(),
        hello_bytes: hello.len(),
        cut: body.cut,
        tail: body.tail,
        bytes_received,
        closed_by_node,
    })
}

/// Reads and drops until EOF or `within`; returns the bytes read and whether EOF came.
fn drain(stream: &mut TcpStream, within: Duration) -> (usize, bool) {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 4096];
    let mut total = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return (total, false);
        }
        match stream.read(&mut buf) {
            Ok(0) => return (total, true),
            Ok(n) => total += n,
            // A reset is the node closing too.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (total, true),
            Err(_) => return (total, false),
        }
    }
}

/// The peer to impersonate for a target with sid `target_sid`: the largest configured sid
/// above it (the one the target dials last and keeps). None when `target_sid` is the largest:
/// such a server keeps no connection another server dialed.
pub fn impersonate(target_sid: u64, sids: &[u64]) -> Option<u64> {
    sids.iter().copied().filter(|s| *s > target_sid).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncated_payload_is_a_short_whole_frame_then_a_frame_cut_mid_way() {
        for seed in 0..200 {
            let p = payload(FrameMode::Truncated, 5, seed);
            let cut = p.cut.unwrap();
            let len = i32::from_be_bytes(p.bytes[..4].try_into().unwrap()) as usize;
            assert_eq!(len, cut);
            let first = &p.bytes[4..4 + cut];
            assert!(
                matches!(
                    wire::decode_notification(first),
                    Err(wire::WireError::Truncated(_))
                ),
                "seed {seed}: cut {cut} must decode as truncated"
            );
            let rest = &p.bytes[4 + cut..];
            let promised = i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            assert_eq!(rest.len() - 4, p.tail.unwrap());
            assert!(rest.len() - 4 < promised, "the last frame stops part-way");
        }
        assert_eq!(
            payload(FrameMode::Truncated, 5, 7),
            payload(FrameMode::Truncated, 5, 7)
        );
    }

    #[test]
    fn garbage_follows_the_seed() {
        let a = payload(FrameMode::Garbage, 3, 1);
        assert_eq!(a, payload(FrameMode::Garbage, 3, 1));
        assert_ne!(a.bytes, payload(FrameMode::Garbage, 3, 2).bytes);
        assert!(a.bytes.len() >= 8);
    }

    #[test]
    fn the_impersonated_peer_is_the_largest_larger_sid() {
        let sids = [1, 2, 3, 4, 5];
        assert_eq!(impersonate(2, &sids), Some(5));
        assert_eq!(impersonate(4, &sids), Some(5));
        assert_eq!(impersonate(5, &sids), None);
        assert_eq!(FrameMode::parse("garbage"), Some(FrameMode::Garbage));
        assert_eq!(FrameMode::parse("cut"), None);
    }
}
