//! Bytes <-> election messages, in ZooKeeper's exact layouts (big-endian).
//!
//! - A frame is `i32 length | payload`; lengths <= 0 or > 512 KiB are a protocol error.
//! - A notification payload is `i32 state | i64 leader | i64 zxid | i64 electionEpoch |
//!   i64 peerEpoch | i32 version | i32 configLen | config`; the legacy 28-byte (no peerEpoch)
//!   and 40-byte (no version) layouts still decode.
//! - The hello a dialer sends first is `i64 protocolVersion | i64 sid | i32 len | "host:port"`.
//!
//! Decoding never panics: every malformed input is a `WireError` the caller counts and drops.

use crate::api::ServerState;

/// Largest frame a peer may send (QuorumCnxManager's PACKETMAXSIZE).
pub const MAX_FRAME: usize = 512 * 1024;
/// The protocol version ZooKeeper 3.5+ puts at the start of the hello.
pub const PROTOCOL_VERSION: i64 = -65536;
/// The 3.4-era protocol version, still accepted.
pub const PROTOCOL_VERSION_V1: i64 = -65535;
/// Longest "host:port" a hello may carry.
pub const MAX_HELLO_ADDR: usize = 2048;
/// The notification version we send: 2 carries the config.
pub const NOTIFICATION_VERSION: i32 = 2;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("truncated message: {0} bytes")]
    Truncated(usize),
    #[error("unknown server state {0}")]
    UnknownState(i32),
    #[error("bad config length {0}")]
    BadConfigLength(i32),
    #[error("frame length {0} outside 1..={MAX_FRAME}")]
    BadFrameLength(i32),
    #[error("bad hello: {0}")]
    BadHello(String),
}

/// One election notification, as on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub state: ServerState,
    pub leader: u64,
    pub zxid: u64,
    pub election_epoch: u64,
    pub peer_epoch: u64,
    pub version: i32,
    pub config: Vec<u8>,
}

pub fn state_code(state: ServerState) -> i32 {
    match state {
        ServerState::Looking => 0,
        ServerState::Following => 1,
        ServerState::Leading => 2,
        ServerState::Observing => 3,
    }
}

pub fn state_from_code(code: i32) -> Result<ServerState, WireError> {
    match code {
        0 => Ok(ServerState::Looking),
        1 => Ok(ServerState::Following),
        2 => Ok(ServerState::Leading),
        3 => Ok(ServerState::Observing),
        other => Err(WireError::UnknownState(other)),
    }
}

/// The notification payload (without the frame length).
pub fn encode_notification(n: &Notification) -> Vec<u8> {
    let mut b = Vec::with_capacity(44 + n.config.len());
    b.extend_from_slice(&state_code(n.state).to_be_bytes());
    b.extend_from_slice(&(n.leader as i64).to_be_bytes());
    b.extend_from_slice(&(n.zxid as i64).to_be_bytes());
    b.extend_from_slice(&(n.election_epoch as i64).to_be_bytes());
    b.extend_from_slice(&(n.peer_epoch as i64).to_be_bytes());
    b.extend_from_slice(&n.version.to_be_bytes());
    b.extend_from_slice(&(n.config.len() as i32).to_be_bytes());
    b.extend_from_slice(&n.config);
    b
}

/// A payload prefixed by its i32 length, ready for the socket.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + payload.len());
    b.extend_from_slice(&(payload.len() as i32).to_be_bytes());
    b.extend_from_slice(payload);
    b
}

/// Checks a frame length read from a peer.
pub fn check_frame_length(len: i32) -> Result<usize, WireError> {
    if len <= 0 || len as usize > MAX_FRAME {
        Err(WireError::BadFrameLength(len))
    } else {
        Ok(len as usize)
    }
}

/// Reads big-endian fields off a slice, failing (not panicking) past its end.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or(WireError::Truncated(self.buf.len()))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn i32(&mut self) -> Result<i32, WireError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(i32::from_be_bytes(a))
    }
    fn i64(&mut self) -> Result<i64, WireError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_be_bytes(a))
    }
}

/// Decodes a notification payload the way ZooKeeper 3.8's WorkerReceiver does.
pub fn decode_notification(payload: &[u8]) -> Result<Notification, WireError> {
    let len = payload.len();
    if len < 28 {
        return Err(WireError::Truncated(len));
    }
    let mut r = Reader {
        buf: payload,
        pos: 0,
    };
    let state_raw = r.i32()?;
    let leader = r.i64()? as u64;
    let zxid = r.i64()? as u64;
    let election_epoch = r.i64()? as u64;
    let (peer_epoch, version) = if len == 28 {
        // Before ZOOKEEPER-107 there was no peerEpoch: it is the zxid's epoch.
        (zxid >> 32, 0)
    } else {
        let peer_epoch = r.i64()? as u64;
        // The 40-byte layout has no usable version (ZooKeeper ignores its last 4 bytes).
        let version = if len == 40 { 0 } else { r.i32()? };
        (peer_epoch, version)
    };
    let mut config = Vec::new();
    if version > 1 {
        let config_len = r.i32()?;
        if config_len < 0 || config_len as usize > len {
            return Err(WireError::BadConfigLength(config_len));
        }
        config = r.take(config_len as usize)?.to_vec();
    }
    let state = state_from_code(state_raw)?;
    Ok(Notification {
        state,
        leader,
        zxid,
        election_epoch,
        peer_epoch,
        version,
        config,
    })
}

/// The hello a dialer sends: protocol version, its sid, its election address.
pub fn encode_hello(sid: u64, addr: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + addr.len());
    b.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    b.extend_from_slice(&(sid as i64).to_be_bytes());
    b.extend_from_slice(&(addr.len() as i32).to_be_bytes());
    b.extend_from_slice(addr.as_bytes());
    b
}

/// What the first 8 bytes of a hello say comes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelloStart {
    /// A protocol version: sid, address length and address follow.
    Versioned,
    /// Pre-3.5 servers send their sid alone.
    LegacySid(u64),
}

pub fn hello_start(first: i64) -> Result<HelloStart, WireError> {
    match first {
        PROTOCOL_VERSION | PROTOCOL_VERSION_V1 => Ok(HelloStart::Versioned),
        sid if sid >= 0 => Ok(HelloStart::LegacySid(sid as u64)),
        other => Err(WireError::BadHello(format!(
            "unknown protocol version {other}"
        ))),
    }
}

pub fn check_hello_addr_len(len: i32) -> Result<usize, WireError> {
    if len <= 0 || len as usize > MAX_HELLO_ADDR {
        Err(WireError::BadHello(format!(
            "address length {len} outside 1..={MAX_HELLO_ADDR}"
        )))
    } else {
        Ok(len as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Notification {
        Notification {
            state: ServerState::Following,
            leader: 3,
            zxid: 0x0000_0002_0000_0009,
            election_epoch: 7,
            peer_epoch: 2,
            version: 2,
            config: b"v".to_vec(),
        }
    }

    #[test]
    fn encodes_zookeepers_exact_layout() {
        let bytes = encode_notification(&sample());
        let expected: Vec<u8> = [
            &[0, 0, 0, 1][..],         // state FOLLOWING
            &[0, 0, 0, 0, 0, 0, 0, 3], // leader
            &[0, 0, 0, 2, 0, 0, 0, 9], // zxid
            &[0, 0, 0, 0, 0, 0, 0, 7], // electionEpoch
            &[0, 0, 0, 0, 0, 0, 0, 2], // peerEpoch
            &[0, 0, 0, 2],             // version
            &[0, 0, 0, 1],             // config length
            b"v",                      // config
        ]
        .concat();
        assert_eq!(bytes, expected);
        assert_eq!(decode_notification(&bytes), Ok(sample()));
        assert_eq!(&frame(&bytes)[..4], &[0, 0, 0, 45]);
    }

    #[test]
    fn decodes_legacy_28_byte_layout_with_epoch_from_zxid() {
        let bytes = encode_notification(&sample());
        let n = decode_notification(&bytes[..28]).unwrap();
        assert_eq!(n.peer_epoch, 2, "peerEpoch comes from the zxid's high bits");
        assert_eq!(n.version, 0);
        assert_eq!(n.leader, 3);
    }

    #[test]
    fn decodes_legacy_40_byte_layout_without_version() {
        let bytes = encode_notification(&sample());
        let n = decode_notification(&bytes[..40]).unwrap();
        assert_eq!((n.peer_epoch, n.version, n.config.len()), (2, 0, 0));
    }

    #[test]
    fn truncated_and_unknown_state_messages_are_errors_not_panics() {
        let bytes = encode_notification(&sample());
        for cut in [0, 1, 27, 36, 43] {
            assert!(decode_notification(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad_state = bytes.clone();
        bad_state[3] = 9;
        assert_eq!(
            decode_notification(&bad_state),
            Err(WireError::UnknownState(9))
        );
        let mut huge_config = bytes.clone();
        huge_config[40..44].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_notification(&huge_config).is_err());
        let mut neg_config = bytes;
        neg_config[40..44].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(
            decode_notification(&neg_config),
            Err(WireError::BadConfigLength(-1))
        );
    }

    proptest::proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..128)) {
            let _ = decode_notification(&bytes);
        }

        #[test]
        fn every_notification_round_trips(
            state in 0i32..4, leader: u64, zxid: u64, round: u64, epoch: u64,
            config in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            let n = Notification {
                state: state_from_code(state).unwrap(),
                leader, zxid, election_epoch: round, peer_epoch: epoch,
                version: NOTIFICATION_VERSION, config,
            };
            proptest::prop_assert_eq!(decode_notification(&encode_notification(&n)), Ok(n));
        }
    }

    #[test]
    fn frame_lengths_outside_limits_are_rejected() {
        assert!(check_frame_length(0).is_err());
        assert!(check_frame_length(-5).is_err());
        assert!(check_frame_length(512 * 1024 + 1).is_err());
        assert_eq!(check_frame_length(512 * 1024), Ok(512 * 1024));
    }

    #[test]
    fn hello_layout_and_checks() {
        let h = encode_hello(5, "127.0.0.1:3888");
        assert_eq!(&h[..8], &PROTOCOL_VERSION.to_be_bytes());
        assert_eq!(&h[8..16], &5i64.to_be_bytes());
        assert_eq!(&h[16..20], &14i32.to_be_bytes());
        assert_eq!(&h[20..], b"127.0.0.1:3888");
        assert_eq!(hello_start(PROTOCOL_VERSION), Ok(HelloStart::Versioned));
        assert_eq!(hello_start(4), Ok(HelloStart::LegacySid(4)));
        assert!(hello_start(-7).is_err());
        assert!(check_hello_addr_len(0).is_err());
        assert!(check_hello_addr_len(2049).is_err());
    }
}
