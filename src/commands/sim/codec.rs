//! What crosses the simulated network: the bytes fle-node writes on its sockets, made and read
//! by its own codecs (`fle_node::wire` for election notifications, `zab::messages` for Zab
//! frames), so a codec that cannot read back what it wrote fails in simulation as on real
//! processes, not only in the codecs' unit tests.
//!
//! Reading back a frame the sender's codec made is not a peer's garbage (real peers close such
//! a connection): it is the node's bug, and it panics, which the world records as the
//! receiving server's exit (`World::handle`), so `crash` says so.

use fle_node::wire::{self, Notification};
use fle_node::zab::messages::{decode_frame, Msg};

/// An election notification as `peers.rs` writes it: its i32 length, then its payload.
pub fn note_frame(n: &Notification) -> Vec<u8> {
    wire::frame(&wire::encode_notification(n))
}

/// A notification frame read as `peers.rs` reads one: the length checked, the payload decoded.
pub fn read_note(frame: &[u8]) -> Notification {
    let (len, payload) = frame.split_at_checked(4).expect("a frame holds its length");
    let len = i32::from_be_bytes(len.try_into().expect("four bytes"));
    let read = wire::check_frame_length(len)
        .map_err(|e| e.to_string())
        .and_then(|n| match n == payload.len() {
            true => wire::decode_notification(payload).map_err(|e| e.to_string()),
            false => Err(format!("length {n}, payload {} bytes", payload.len())),
        });
    read.unwrap_or_else(|e| panic!("fle-node cannot read back its own notification: {e}"))
}

/// A Zab message as `zab::conn` writes it.
pub fn zab_frame(m: &Msg) -> Vec<u8> {
    m.to_frame()
}

/// A Zab frame read as `zab::conn` reads one: exactly one message, all of its bytes used.
pub fn read_zab(frame: &[u8]) -> Msg {
    match decode_frame(frame) {
        Ok(Some((m, used))) if used == frame.len() => m,
        other => panic!("fle-node cannot read back its own Zab frame: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fle_node::api::ServerState;

    /// Every message the world carries comes back as it went, through the bytes.
    #[test]
    fn frames_read_back_as_they_were_written() {
        let n = Notification {
            state: ServerState::Following,
            leader: 3,
            zxid: 0x2_0000_0007,
            election_epoch: 4,
            peer_epoch: 2,
            version: 2,
            config: b"server.1=a:1:2".to_vec(),
        };
        assert_eq!(read_note(&note_frame(&n)), n);
        for m in [
            Msg::Ack {
                zxid: 0x3_0000_0001,
            },
            Msg::Commit { zxid: 7 },
            Msg::Ping,
            Msg::Txn {
                zxid: 0x1_0000_0002,
                value: serde_json::json!(41),
            },
        ] {
            assert_eq!(read_zab(&zab_frame(&m)), m);
        }
    }

    /// A frame cut short is the node's own bug here: it panics, naming the codec.
    #[test]
    #[should_panic(expected = "cannot read back its own Zab frame")]
    fn a_zab_frame_that_does_not_read_back_panics() {
        let f = zab_frame(&Msg::Commit { zxid: 7 });
        read_zab(&f[..f.len() - 1]);
    }
}
