//! The quorum-port protocol: Zab's messages as length-prefixed frames.
//!
//! A frame is `u32 length (big-endian) | u8 type | body`, the length counting type and body.
//! Integers are big-endian u64; a value is JSON filling the rest of the frame. The decoder never
//! panics: any bad byte is a [`DecodeError`], and the caller closes that one connection.

use crate::txnlog::Txn;

/// Frames longer than this are a protocol error (one value is far smaller; sync streams txns
/// one frame each).
pub const MAX_FRAME: usize = 16 << 20;

/// ACKEPOCH's `current_epoch` from a follower that had already accepted the offered epoch (from
/// this or another leader): like ZooKeeper's -1, it is no fresh promise and does not count toward
/// the new epoch's quorum, so two leaders can never both establish the same epoch.
pub const REPEATED_EPOCH: u64 = u64::MAX;

#[derive(Debug, Clone, PartialEq)]
pub enum Msg {
    /// Follower → leader, first: who I am, the epoch I last promised, my last logged zxid.
    FollowerInfo {
        sid: u64,
        accepted_epoch: u64,
        last_zxid: u64,
    },
    /// Leader → follower: the new epoch to promise.
    LeaderInfo {
        epoch: u64,
    },
    /// Follower → leader: promise made; my history's epoch and end.
    AckEpoch {
        current_epoch: u64,
        last_zxid: u64,
    },
    /// Sync by sending the txns the follower lacks (`Txn` frames follow).
    Diff {
        last_zxid: u64,
    },
    /// Sync by first cutting the follower's log back to `zxid` (`Txn` frames may follow).
    Trunc {
        zxid: u64,
    },
    /// Sync by replacing the follower's whole log (`Txn` frames follow).
    Snap {
        last_zxid: u64,
    },
    /// One txn of a sync.
    Txn {
        zxid: u64,
        value: serde_json::Value,
    },
    /// End of sync: `zxid` is `epoch << 32`.
    NewLeader {
        zxid: u64,
    },
    /// Follower → leader: everything up to `zxid` is durable here (NEWLEADER's zxid acks a sync).
    Ack {
        zxid: u64,
    },
    /// Leader → follower: serve; everything up to `committed_zxid` is committed.
    UpToDate {
        committed_zxid: u64,
    },
    Proposal {
        zxid: u64,
        value: serde_json::Value,
    },
    /// Everything up to `zxid` is committed (commits are in zxid order).
    Commit {
        zxid: u64,
    },
    Ping,
    /// Observer → leader, first (ZooKeeper's OBSERVERINFO): as FOLLOWERINFO, from a server
    /// that never votes or ACKs proposals.
    ObserverInfo {
        sid: u64,
        accepted_epoch: u64,
        last_zxid: u64,
    },
    /// Leader → observer: a txn a quorum committed (ZooKeeper's INFORM: proposal and commit
    /// in one, never ACKed).
    Inform {
        zxid: u64,
        value: serde_json::Value,
    },
}

const T_FOLLOWERINFO: u8 = 1;
const T_LEADERINFO: u8 = 2;
const T_ACKEPOCH: u8 = 3;
const T_DIFF: u8 = 4;
const T_TRUNC: u8 = 5;
const T_SNAP: u8 = 6;
const T_TXN: u8 = 7;
const T_NEWLEADER: u8 = 8;
const T_ACK: u8 = 9;
const T_UPTODATE: u8 = 10;
const T_PROPOSAL: u8 = 11;
const T_COMMIT: u8 = 12;
const T_PING: u8 = 13;
const T_OBSERVERINFO: u8 = 14;
const T_INFORM: u8 = 15;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("frame length {0} outside 1..={MAX_FRAME}")]
    BadFrameLength(u64),
    #[error("unknown message type {0}")]
    UnknownType(u8),
    #[error("message type {kind} with a {len}-byte body, expected {expected}")]
    BadBody {
        kind: u8,
        len: usize,
        expected: &'static str,
    },
    #[error("message type {kind} carries bad JSON: {reason}")]
    BadJson { kind: u8, reason: String },
}

impl Msg {
    /// Appends this message's frame to `buf`.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let start = buf.len();
        buf.extend_from_slice(&[0; 4]);
        let ints = |buf: &mut Vec<u8>, t: u8, xs: &[u64]| {
            buf.push(t);
            for x in xs {
                buf.extend_from_slice(&x.to_be_bytes());
            }
        };
        match self {
            Msg::FollowerInfo {
                sid,
                accepted_epoch,
                last_zxid,
            } => ints(buf, T_FOLLOWERINFO, &[*sid, *accepted_epoch, *last_zxid]),
            Msg::ObserverInfo {
                sid,
                accepted_epoch,
                last_zxid,
            } => ints(buf, T_OBSERVERINFO, &[*sid, *accepted_epoch, *last_zxid]),
            Msg::LeaderInfo { epoch } => ints(buf, T_LEADERINFO, &[*epoch]),
            Msg::AckEpoch {
                current_epoch,
                last_zxid,
            } => ints(buf, T_ACKEPOCH, &[*current_epoch, *last_zxid]),
            Msg::Diff { last_zxid } => ints(buf, T_DIFF, &[*last_zxid]),
            Msg::Trunc { zxid } => ints(buf, T_TRUNC, &[*zxid]),
            Msg::Snap { last_zxid } => ints(buf, T_SNAP, &[*last_zxid]),
            Msg::Txn { zxid, value }
            | Msg::Proposal { zxid, value }
            | Msg::Inform { zxid, value } => {
                let t = match self {
                    Msg::Txn { .. } => T_TXN,
                    Msg::Proposal { .. } => T_PROPOSAL,
                    _ => T_INFORM,
                };
                ints(buf, t, &[*zxid]);
                // Serializing a serde_json::Value into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *buf, value);
            }
            Msg::NewLeader { zxid } => ints(buf, T_NEWLEADER, &[*zxid]),
            Msg::Ack { zxid } => ints(buf, T_ACK, &[*zxid]),
            Msg::UpToDate { committed_zxid } => ints(buf, T_UPTODATE, &[*committed_zxid]),
            Msg::Commit { zxid } => ints(buf, T_COMMIT, &[*zxid]),
            Msg::Ping => ints(buf, T_PING, &[]),
        }
        let len = (buf.len() - start - 4) as u32;
        buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
    }

    pub fn to_frame(&self) -> Vec<u8> {
        let mut b = Vec::new();
        self.encode(&mut b);
        b
    }

    /// The sender of a learner's first message (FOLLOWERINFO or OBSERVERINFO).
    pub fn learner_sid(&self) -> Option<u64> {
        match self {
            Msg::FollowerInfo { sid, .. } | Msg::ObserverInfo { sid, .. } => Some(*sid),
            _ => None,
        }
    }

    /// Builds the sync/broadcast txn message for a logged txn.
    pub fn txn(t: &Txn) -> Msg {
        Msg::Txn {
            zxid: t.zxid,
            value: t.value.clone(),
        }
    }
}

/// A frame's message type (its byte after the length) without decoding the rest: the
/// simulator's coverage tells Zab messages apart by it. None for a frame too short to hold one.
pub fn frame_type(frame: &[u8]) -> Option<u8> {
    frame.get(4).copied()
}

/// Decodes the first frame of `buf`: `Ok(None)` while it is incomplete, else the message and how
/// many bytes it used. An error means the stream is garbage: close the connection.
pub fn decode_frame(buf: &[u8]) -> Result<Option<(Msg, usize)>, DecodeError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(DecodeError::BadFrameLength(len as u64));
    }
    if buf.len() < 4 + len {
        return Ok(None);
    }
    let msg = decode_body(buf[4], &buf[5..4 + len])?;
    Ok(Some((msg, 4 + len)))
}

fn decode_body(kind: u8, body: &[u8]) -> Result<Msg, DecodeError> {
    let ints = |n: usize| -> Result<Vec<u64>, DecodeError> {
        if body.len() != 8 * n {
            return Err(DecodeError::BadBody {
                kind,
                len: body.len(),
                expected: ["0 bytes", "8 bytes", "16 bytes", "24 bytes"][n],
            });
        }
        Ok(body
            .chunks_exact(8)
            .map(|c| u64::from_be_bytes(c.try_into().unwrap_or([0; 8])))
            .collect())
    };
    let with_value = || -> Result<(u64, serde_json::Value), DecodeError> {
        if body.len() < 9 {
            return Err(DecodeError::BadBody {
                kind,
                len: body.len(),
                expected: "a zxid and a JSON value",
            });
        }
        let zxid = u64::from_be_bytes(body[..8].try_into().unwrap_or([0; 8]));
        let value = serde_json::from_slice(&body[8..]).map_err(|e| DecodeError::BadJson {
            kind,
            reason: e.to_string(),
        })?;
        Ok((zxid, value))
    };
    Ok(match kind {
        T_FOLLOWERINFO => {
            let v = ints(3)?;
            Msg::FollowerInfo {
                sid: v[0],
                accepted_epoch: v[1],
                last_zxid: v[2],
            }
        }
        T_OBSERVERINFO => {
            let v = ints(3)?;
            Msg::ObserverInfo {
                sid: v[0],
                accepted_epoch: v[1],
                last_zxid: v[2],
            }
        }
        T_INFORM => {
            let (zxid, value) = with_value()?;
            Msg::Inform { zxid, value }
        }
        T_LEADERINFO => Msg::LeaderInfo { epoch: ints(1)?[0] },
        T_ACKEPOCH => {
            let v = ints(2)?;
            Msg::AckEpoch {
                current_epoch: v[0],
                last_zxid: v[1],
            }
        }
        T_DIFF => Msg::Diff {
            last_zxid: ints(1)?[0],
        },
        T_TRUNC => Msg::Trunc { zxid: ints(1)?[0] },
        T_SNAP => Msg::Snap {
            last_zxid: ints(1)?[0],
        },
        T_TXN => {
            let (zxid, value) = with_value()?;
            Msg::Txn { zxid, value }
        }
        T_NEWLEADER => Msg::NewLeader { zxid: ints(1)?[0] },
        T_ACK => Msg::Ack { zxid: ints(1)?[0] },
        T_UPTODATE => Msg::UpToDate {
            committed_zxid: ints(1)?[0],
        },
        T_PROPOSAL => {
            let (zxid, value) = with_value()?;
            Msg::Proposal { zxid, value }
        }
        T_COMMIT => Msg::Commit { zxid: ints(1)?[0] },
        T_PING => {
            ints(0)?;
            Msg::Ping
        }
        k => return Err(DecodeError::UnknownType(k)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A frame's type byte names its message without decoding it; a frame too short has none.
    #[test]
    fn frame_type_is_the_byte_after_the_length() {
        assert_eq!(frame_type(&Msg::Ack { zxid: 9 }.to_frame()), Some(T_ACK));
        assert_eq!(
            frame_type(&Msg::NewLeader { zxid: 1 << 32 }.to_frame()),
            Some(T_NEWLEADER)
        );
        assert_eq!(frame_type(&[0, 0, 0, 1]), None);
    }

    /// Known byte layouts, so a change of the wire format is a visible test change.
    #[test]
    fn vectors() {
        let cases: Vec<(Msg, Vec<u8>)> = vec![
            (Msg::Ping, vec![0, 0, 0, 1, 13]),
            (
                Msg::LeaderInfo { epoch: 0x0102 },
                vec![0, 0, 0, 9, 2, 0, 0, 0, 0, 0, 0, 1, 2],
            ),
            (
                Msg::AckEpoch {
                    current_epoch: 1,
                    last_zxid: 0x1_0000_0002,
                },
                vec![
                    0, 0, 0, 17, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2,
                ],
            ),
            (
                Msg::Proposal {
                    zxid: 5,
                    value: json!(7),
                },
                vec![0, 0, 0, 10, 11, 0, 0, 0, 0, 0, 0, 0, 5, b'7'],
            ),
        ];
        for (msg, bytes) in cases {
            assert_eq!(msg.to_frame(), bytes, "{msg:?}");
            assert_eq!(
                decode_frame(&bytes).unwrap(),
                Some((msg.clone(), bytes.len()))
            );
        }
    }

    fn all_kinds() -> Vec<Msg> {
        let v = json!({"k": [1, "x", null]});
        vec![
            Msg::FollowerInfo {
                sid: 3,
                accepted_epoch: 4,
                last_zxid: 5,
            },
            Msg::LeaderInfo { epoch: 9 },
            Msg::AckEpoch {
                current_epoch: 1,
                last_zxid: 2,
            },
            Msg::Diff { last_zxid: 8 },
            Msg::Trunc { zxid: 7 },
            Msg::Snap { last_zxid: 6 },
            Msg::Txn {
                zxid: 1,
                value: v.clone(),
            },
            Msg::NewLeader { zxid: 2 << 32 },
            Msg::Ack { zxid: 11 },
            Msg::UpToDate { committed_zxid: 3 },
            Msg::Proposal {
                zxid: 12,
                value: v.clone(),
            },
            Msg::Commit { zxid: 12 },
            Msg::Ping,
            Msg::ObserverInfo {
                sid: 6,
                accepted_epoch: 4,
                last_zxid: 5,
            },
            Msg::Inform { zxid: 13, value: v },
        ]
    }

    #[test]
    fn every_kind_round_trips_and_partial_frames_wait() {
        let mut stream = Vec::new();
        for m in all_kinds() {
            m.encode(&mut stream);
        }
        let mut pos = 0;
        let mut got = Vec::new();
        while pos < stream.len() {
            // Every strict prefix of a frame is incomplete, never an error.
            let (m, used) = decode_frame(&stream[pos..]).unwrap().unwrap();
            for cut in 0..used {
                assert_eq!(decode_frame(&stream[pos..pos + cut]), Ok(None));
            }
            got.push(m);
            pos += used;
        }
        assert_eq!(got, all_kinds());
    }

    #[test]
    fn bad_frames_are_errors() {
        assert_eq!(
            decode_frame(&[0, 0, 0, 0]),
            Err(DecodeError::BadFrameLength(0))
        );
        assert!(matches!(
            decode_frame(&[0xff, 0xff, 0xff, 0xff]),
            Err(DecodeError::BadFrameLength(_))
        ));
        assert_eq!(
            decode_frame(&[0, 0, 0, 1, 99]),
            Err(DecodeError::UnknownType(99))
        );
        assert!(matches!(
            decode_frame(&[0, 0, 0, 3, T_ACK, 1, 2]),
            Err(DecodeError::BadBody { kind: T_ACK, .. })
        ));
        let mut bad_json = vec![0, 0, 0, 11, T_PROPOSAL, 0, 0, 0, 0, 0, 0, 0, 1];
        bad_json.extend_from_slice(b"{x");
        assert!(matches!(
            decode_frame(&bad_json),
            Err(DecodeError::BadJson { .. })
        ));
    }

    proptest! {
        /// Arbitrary bytes never panic the decoder, and a decoded frame re-encodes to its bytes'
        /// meaning.
        #[test]
        fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(Some((m, used))) = decode_frame(&bytes) {
                prop_assert!(used <= bytes.len());
                let again = m.to_frame();
                prop_assert_eq!(decode_frame(&again).unwrap().unwrap().0, m);
            }
        }
    }
}
