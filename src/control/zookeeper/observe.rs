//! Reading a ZooKeeper server's state and mapping it onto `api::NodeStatus`.
//!
//! Evidence, in order of trust (and what each field comes from):
//! - role and leader: the AdminServer's `/commands/leader` (`is_leader`, `leader_id`). It
//!   answers only while the server serves clients; "not currently serving requests" means
//!   electing or still syncing, reported as LOOKING with no leader (ZooKeeper's own view:
//!   a server that does not serve has not joined a leader yet, whatever its election said).
//! - Zab phase and last zxid: `/commands/zabstate` (`zabstate`, `last_zxid`: the last zxid
//!   applied to the server's data tree, so last_zxid = last_committed_zxid). While electing it
//!   reports neither; the last zxid this controller saw from that server is kept.
//! - peer (current) epoch and accepted epoch: the `currentEpoch` / `acceptedEpoch` files Zab
//!   persists in `dataDir/version-2`, when the controller can read the node's folder. The
//!   high 32 bits of the reported zxid are only the fallback: a follower that synced by DIFF
//!   with nothing written since still reports the previous epoch's zxid, so the zxid alone
//!   would show it following two leaders "in one epoch" (seen on 3.8.0: a follower reported
//!   zxid 0x0 under the epoch-1 leader and again under the epoch-2 leader).
//!   A server that does not serve reports the epoch it last served in: ZooKeeper writes the
//!   new currentEpoch during sync (the leader after the epoch acks, a follower at NEWLEADER),
//!   before it serves, and a LOOKING read already carrying the new epoch would look like the
//!   epoch being established before its leader took it. acceptedEpoch is always the file's.
//! - election epoch (logicalclock) and the counted votes are not exposed by ZooKeeper:
//!   `election_epoch` is 0 and `last_election` None, so the vote-rule checker answers unknown.
//! - the node's wall clock: the `Date` header of the AdminServer's answer (the JVM's clock,
//!   which libfaketime moves; one-second resolution), else the controller's clock.

use crate::api::{epoch_of, NodeStatus, ServerState, ZabPhase};
use serde::Deserialize;
use std::path::Path;

/// What `/commands/leader` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderAnswer {
    /// The server serves clients under leader `leader_id`.
    Serving { is_leader: bool, leader_id: u64 },
    /// Electing or syncing (ZooKeeper's "not currently serving requests").
    NotServing(String),
}

#[derive(Deserialize)]
struct LeaderBody {
    #[serde(default)]
    is_leader: Option<bool>,
    #[serde(default)]
    leader_id: Option<i64>,
    #[serde(default)]
    error: Option<String>,
}

/// Parses `/commands/leader`; an error names what was wrong with the body.
pub fn parse_leader(body: &[u8]) -> Result<LeaderAnswer, String> {
    let b: LeaderBody = serde_json::from_slice(body)
        .map_err(|e| format!("unreadable /commands/leader answer: {e}"))?;
    if let Some(err) = b.error {
        return Ok(LeaderAnswer::NotServing(err));
    }
    match (b.is_leader, b.leader_id) {
        (Some(is_leader), Some(id)) if id > 0 => Ok(LeaderAnswer::Serving {
            is_leader,
            leader_id: id as u64,
        }),
        _ => Ok(LeaderAnswer::NotServing(
            "no leader in /commands/leader".into(),
        )),
    }
}

/// What `/commands/zabstate` said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZabAnswer {
    pub phase: Option<ZabPhase>,
    pub last_zxid: Option<u64>,
}

#[derive(Deserialize)]
struct ZabBody {
    #[serde(default)]
    zabstate: Option<String>,
    #[serde(default)]
    last_zxid: Option<String>,
}

/// Parses `/commands/zabstate` (`"zabstate": "broadcast"`, `"last_zxid": "0x100000003"`).
pub fn parse_zabstate(body: &[u8]) -> Result<ZabAnswer, String> {
    let b: ZabBody = serde_json::from_slice(body)
        .map_err(|e| format!("unreadable /commands/zabstate answer: {e}"))?;
    let phase = match b.zabstate.as_deref() {
        Some("election") => Some(ZabPhase::Election),
        Some("discovery") => Some(ZabPhase::Discovery),
        Some("synchronization") => Some(ZabPhase::Sync),
        Some("broadcast") => Some(ZabPhase::Broadcast),
        _ => None,
    };
    let last_zxid = match b.last_zxid {
        Some(hex) => Some(parse_hex_zxid(&hex)?),
        None => None,
    };
    Ok(ZabAnswer { phase, last_zxid })
}

fn parse_hex_zxid(s: &str) -> Result<u64, String> {
    let digits = s.strip_prefix("0x").unwrap_or(s);
    u64::from_str_radix(digits, 16).map_err(|e| format!("bad zxid {s:?}: {e}"))
}

/// What `/commands/srvr` said: the version (`"3.8.0-<commit>, built on <date>"`, kept up to
/// the first comma) and `server_stats.uptime`, ms since the serving instance started (see
/// `epochs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SrvrAnswer {
    pub version: Option<String>,
    pub uptime_ms: Option<u64>,
}

pub fn parse_srvr(body: &[u8]) -> SrvrAnswer {
    #[derive(Deserialize)]
    struct Stats {
        uptime: Option<u64>,
    }
    #[derive(Deserialize)]
    struct Srvr {
        version: Option<String>,
        server_stats: Option<Stats>,
    }
    let Ok(b) = serde_json::from_slice::<Srvr>(body) else {
        return SrvrAnswer::default();
    };
    SrvrAnswer {
        version: b
            .version
            .and_then(|v| v.split(',').next().map(|v| v.trim().to_string()))
            .filter(|v| !v.is_empty()),
        uptime_ms: b.server_stats.and_then(|s| s.uptime),
    }
}

/// Reads one of Zab's epoch files (`currentEpoch`, `acceptedEpoch`): a decimal number.
pub fn read_epoch_file(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Where the epochs came from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Epochs {
    pub current: Option<u64>,
    pub accepted: Option<u64>,
}

/// Everything one observation gathered, before mapping.
#[derive(Debug, Clone)]
pub struct Observation {
    pub sid: u64,
    pub leader: LeaderAnswer,
    pub zab: ZabAnswer,
    /// The last zxid seen from this server before (kept while it elects).
    pub previous_zxid: u64,
    /// The epoch this server last served in, as this controller saw it (0: never served).
    pub last_served_epoch: u64,
    pub epochs: Epochs,
    pub wall_clock_ms: i64,
    pub uptime_ms: u64,
}

/// Maps an observation onto the history's status.
pub fn to_status(o: &Observation) -> NodeStatus {
    let (state, leader) = match &o.leader {
        LeaderAnswer::Serving {
            is_leader: true,
            leader_id,
        } => (ServerState::Leading, Some(*leader_id)),
        LeaderAnswer::Serving {
            is_leader: false,
            leader_id,
        } => (ServerState::Following, Some(*leader_id)),
        LeaderAnswer::NotServing(_) => (ServerState::Looking, None),
    };
    let last_zxid = o.zab.last_zxid.unwrap_or(o.previous_zxid);
    let peer_epoch = match state {
        ServerState::Looking => o.last_served_epoch,
        _ => o.epochs.current.unwrap_or_else(|| epoch_of(last_zxid)),
    };
    let phase = match (state, o.zab.phase) {
        // Not serving yet says more than a zabstate read a moment apart.
        (ServerState::Looking, Some(ZabPhase::Broadcast)) | (ServerState::Looking, None) => {
            ZabPhase::Election
        }
        (_, Some(p)) => p,
        (_, None) => ZabPhase::Broadcast,
    };
    NodeStatus {
        sid: o.sid,
        state,
        leader,
        peer_epoch,
        accepted_epoch: o.epochs.accepted.unwrap_or(peer_epoch).max(peer_epoch),
        election_epoch: 0,
        last_zxid,
        last_zxid_hex: format!("0x{last_zxid:x}"),
        last_committed_zxid: last_zxid,
        zab_phase: phase,
        wall_clock_ms: o.wall_clock_ms,
        uptime_ms: o.uptime_ms,
        last_election: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Bodies as ZooKeeper 3.8.0 (Debian) sent them.
    const LEADER_FOLLOWER: &str = r#"{
  "is_leader" : false,
  "leader_id" : 3,
  "leader_ip" : "127.0.0.1",
  "command" : "leader",
  "error" : null
}"#;
    const LEADER_NOT_SERVING: &str = r#"{
  "command" : "leader",
  "error" : "This ZooKeeper instance is not currently serving requests"
}"#;
    const ZAB_BROADCAST: &str = r#"{
  "myid" : 2, "is_leader" : false, "voting" : true,
  "last_zxid" : "0x200000007", "zab_epoch" : 2, "zab_counter" : 7,
  "zabstate" : "broadcast", "command" : "zabstate", "error" : null
}"#;
    const ZAB_ELECTING: &str =
        r#"{ "voting" : false, "zabstate" : "", "command" : "zabstate", "error" : null }"#;

    fn observation(leader: LeaderAnswer, zab: ZabAnswer, epochs: Epochs) -> Observation {
        Observation {
            sid: 2,
            leader,
            zab,
            previous_zxid: 0x1_0000_0004,
            last_served_epoch: 1,
            epochs,
            wall_clock_ms: 5,
            uptime_ms: 6,
        }
    }

    #[test]
    fn leader_answers_parse() {
        assert_eq!(
            parse_leader(LEADER_FOLLOWER.as_bytes()).unwrap(),
            LeaderAnswer::Serving {
                is_leader: false,
                leader_id: 3
            }
        );
        assert!(matches!(
            parse_leader(LEADER_NOT_SERVING.as_bytes()).unwrap(),
            LeaderAnswer::NotServing(m) if m.contains("not currently serving")
        ));
        assert!(parse_leader(b"<html>500</html>").is_err());
    }

    #[test]
    fn the_version_and_uptime_are_read_from_srvr() {
        let body = br#"{ "version" : "3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC",
            "read_only" : false, "server_stats" : { "server_state" : "leader", "uptime" : 4704 } }"#;
        let s = parse_srvr(body);
        assert_eq!(s.version.as_deref(), Some("3.8.0-${mvngit.commit.id}"));
        assert_eq!(s.uptime_ms, Some(4704));
        assert_eq!(parse_srvr(br#"{"command":"srvr"}"#), SrvrAnswer::default());
        assert_eq!(parse_srvr(b"<html>"), SrvrAnswer::default());
    }

    #[test]
    fn zabstate_answers_parse() {
        assert_eq!(
            parse_zabstate(ZAB_BROADCAST.as_bytes()).unwrap(),
            ZabAnswer {
                phase: Some(ZabPhase::Broadcast),
                last_zxid: Some(0x2_0000_0007)
            }
        );
        assert_eq!(
            parse_zabstate(ZAB_ELECTING.as_bytes()).unwrap(),
            ZabAnswer::default()
        );
        assert!(parse_zabstate(br#"{"last_zxid":"0xzz"}"#).is_err());
    }

    #[test]
    fn a_follower_takes_its_epoch_from_the_current_epoch_file_not_its_stale_zxid() {
        let o = observation(
            parse_leader(LEADER_FOLLOWER.as_bytes()).unwrap(),
            ZabAnswer {
                phase: Some(ZabPhase::Broadcast),
                last_zxid: Some(0x1_0000_0004),
            },
            Epochs {
                current: Some(2),
                accepted: Some(2),
            },
        );
        let s = to_status(&o);
        assert_eq!(s.state, ServerState::Following);
        assert_eq!(s.leader, Some(3));
        assert_eq!(s.peer_epoch, 2);
        assert_eq!(s.last_zxid, 0x1_0000_0004);
        assert_eq!(s.last_zxid_hex, "0x100000004");
        assert!(s.last_election.is_none());
    }

    #[test]
    fn without_epoch_files_the_epoch_is_the_zxid_high_half() {
        let o = observation(
            LeaderAnswer::Serving {
                is_leader: true,
                leader_id: 2,
            },
            parse_zabstate(ZAB_BROADCAST.as_bytes()).unwrap(),
            Epochs::default(),
        );
        let s = to_status(&o);
        assert_eq!(s.state, ServerState::Leading);
        assert_eq!(s.leader, Some(2));
        assert_eq!(s.peer_epoch, 2);
        assert_eq!(s.accepted_epoch, 2);
    }

    #[test]
    fn not_serving_is_looking_and_keeps_the_last_zxid_seen() {
        let o = observation(
            parse_leader(LEADER_NOT_SERVING.as_bytes()).unwrap(),
            parse_zabstate(ZAB_ELECTING.as_bytes()).unwrap(),
            Epochs {
                current: Some(1),
                accepted: Some(2),
            },
        );
        let s = to_status(&o);
        assert_eq!(s.state, ServerState::Looking);
        assert_eq!(s.leader, None);
        assert_eq!(s.zab_phase, ZabPhase::Election);
        assert_eq!(s.last_zxid, 0x1_0000_0004);
        assert_eq!((s.peer_epoch, s.accepted_epoch), (1, 2));
    }

    #[test]
    fn a_syncing_server_keeps_its_served_epoch_until_it_serves_the_new_one() {
        // currentEpoch is already 2 on disk (written during sync), the server does not serve.
        let syncing = observation(
            parse_leader(LEADER_NOT_SERVING.as_bytes()).unwrap(),
            ZabAnswer {
                phase: Some(ZabPhase::Sync),
                last_zxid: None,
            },
            Epochs {
                current: Some(2),
                accepted: Some(2),
            },
        );
        let s = to_status(&syncing);
        assert_eq!(
            (s.state, s.zab_phase),
            (ServerState::Looking, ZabPhase::Sync)
        );
        assert_eq!((s.peer_epoch, s.accepted_epoch), (1, 2));
        let serving = Observation {
            leader: LeaderAnswer::Serving {
                is_leader: true,
                leader_id: 2,
            },
            ..syncing
        };
        assert_eq!(to_status(&serving).peer_epoch, 2);
    }
}
