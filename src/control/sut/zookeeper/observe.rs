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
//!   epoch being established before its leader took it. But "the epoch it last served in" is
//!   what this controller saw, and a server can lead a whole epoch between two reads that
//!   vouch for it (a leader paused right after its election, its reads failing meanwhile):
//!   reporting that lower epoch would "prove" the server never reached the epoch its
//!   followers were seen following (election-safety's proof rule). So a LOOKING read reports
//!   it only when the currentEpoch file, read in this observation, holds exactly that epoch
//!   (`looking_epoch`); a file above it (syncing, or served unseen) makes the read fail rather
//!   than report a number that is wrong one way or the other. acceptedEpoch is always the
//!   file's.
//! - election epoch (logicalclock) and the counted votes are not exposed by the AdminServer:
//!   `election_epoch` is 0; `last_election` is read from the server's own log afterwards
//!   (`fle_log`), None here.
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
    /// Whether the server instance that answered is a leader's (`is_leader`: the AdminServer's
    /// current ZooKeeperServer is a LeaderZooKeeperServer).
    pub is_leader: Option<bool>,
}

#[derive(Deserialize)]
struct ZabBody {
    #[serde(default)]
    zabstate: Option<String>,
    #[serde(default)]
    last_zxid: Option<String>,
    #[serde(default)]
    is_leader: Option<bool>,
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
    Ok(ZabAnswer {
        phase,
        last_zxid,
        is_leader: b.is_leader,
    })
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Epochs {
    pub current: Option<u64>,
    pub accepted: Option<u64>,
}

/// The epoch files read before and after a server's answers: they only grow, so equal reads
/// mean the answers were given in that epoch. Different reads mean an election may have ended
/// in between, and the answers cannot be placed in either epoch.
pub fn unchanged_epochs(before: Epochs, after: Epochs) -> Result<Epochs, String> {
    if before == after {
        return Ok(after);
    }
    Err(format!(
        "its epoch files changed while it was read (currentEpoch {:?} then {:?}, acceptedEpoch {:?} then {:?})",
        before.current, after.current, before.accepted, after.accepted
    ))
}

/// Everything one observation gathered, before mapping.
#[derive(Debug, Clone)]
pub struct Observation {
    pub sid: u64,
    /// An observer (`:observer`): serving under a leader it OBSERVES, never FOLLOWS.
    pub observer: bool,
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

/// The epoch a server that does not serve reports: the one it was last seen serving in
/// (`last_served`), vouched for by its currentEpoch file read in the same observation
/// (`file`). An error when the file cannot vouch (see the module doc).
pub fn looking_epoch(last_served: u64, file: Option<u64>) -> Result<u64, String> {
    match file {
        // The file never goes back: below what it served in means a read of something else.
        Some(c) if c <= last_served => Ok(last_served),
        Some(c) => Err(format!(
            "not serving with currentEpoch {c} above epoch {last_served}, the last it was seen \
             serving in: syncing a new epoch, or served one unseen; its epoch is not reported"
        )),
        None => Err("not serving, and its currentEpoch file could not be read".into()),
    }
}

/// How far a server's committed history reaches. A server that serves in epoch `e` synced
/// with its leader up to the NEWLEADER zxid `e << 32`: it holds every transaction committed
/// before `e`, even when its data tree's last zxid is older (a follower synced by DIFF with
/// nothing to apply keeps reporting the previous epoch's last zxid, or 0x0, while its leader
/// reports `e << 32`: without this it would never count as caught up until a write lands).
pub fn committed_zxid(state: ServerState, last_zxid: u64, epoch: u64) -> u64 {
    match state {
        ServerState::Looking => last_zxid,
        _ => last_zxid.max(epoch << 32),
    }
}

/// Whether the two answers agree on the role: `/commands/leader` and `/commands/zabstate`
/// each say whether the server instance that answered leads. They differ when the AdminServer
/// moved to a new instance between them (a follower that just won an election), and then
/// zabstate's `last_zxid` may be the old role's. Only a change between leading and not is seen
/// this way (follower to follower is not).
pub fn same_role(leader: &LeaderAnswer, zab: &ZabAnswer) -> Result<(), String> {
    match (leader, zab.is_leader) {
        (LeaderAnswer::Serving { is_leader, .. }, Some(z)) if *is_leader != z => Err(format!(
            "its answers straddle a change of role (/commands/leader says {}leading, \
             /commands/zabstate {}leading)",
            if *is_leader { "" } else { "not " },
            if z { "" } else { "not " },
        )),
        _ => Ok(()),
    }
}

/// Maps an observation onto the history's status; an error when the epoch of a server that
/// does not serve cannot be vouched for (`looking_epoch`), or when its two answers disagree on
/// whether it leads (`same_role`).
pub fn to_status(o: &Observation) -> Result<NodeStatus, String> {
    same_role(&o.leader, &o.zab)?;
    let (state, leader) = match &o.leader {
        LeaderAnswer::Serving {
            is_leader: true,
            leader_id,
        } => (ServerState::Leading, Some(*leader_id)),
        LeaderAnswer::Serving {
            is_leader: false,
            leader_id,
        } if o.observer => (ServerState::Observing, Some(*leader_id)),
        LeaderAnswer::Serving {
            is_leader: false,
            leader_id,
        } => (ServerState::Following, Some(*leader_id)),
        LeaderAnswer::NotServing(_) => (ServerState::Looking, None),
    };
    // While it elects ZooKeeper reports no zxid, and the last one seen is kept. A serving
    // server whose zabstate did not answer (its request failed; 3.8 always sends `last_zxid`
    // when it answers) gets the last one seen only within its current epoch, else that epoch's
    // NEWLEADER zxid, which it holds once it serves (`committed_zxid`): carried into a new role,
    // the zxid it had applied as a follower (below what it logged, acknowledged and then led
    // with: ZooKeeper applies a txn only at its commit) made a new leader's first read look as
    // if it had been elected without a committed write (leader-completeness, seen on 3.8.0).
    let last_zxid = match (state, o.zab.last_zxid) {
        (_, Some(z)) => z,
        (ServerState::Looking, None) => o.previous_zxid,
        (_, None) => o.previous_zxid.max(o.epochs.current.unwrap_or(0) << 32),
    };
    let peer_epoch = match state {
        ServerState::Looking => looking_epoch(o.last_served_epoch, o.epochs.current)?,
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
    Ok(NodeStatus {
        sid: o.sid,
        state,
        leader,
        peer_epoch,
        accepted_epoch: o.epochs.accepted.unwrap_or(peer_epoch).max(peer_epoch),
        election_epoch: 0,
        last_zxid,
        last_zxid_hex: format!("0x{last_zxid:x}"),
        last_committed_zxid: committed_zxid(state, last_zxid, peer_epoch),
        zab_phase: phase,
        wall_clock_ms: o.wall_clock_ms,
        uptime_ms: o.uptime_ms,
        last_election: None,
        config: None,
        peer_type: if o.observer {
            crate::api::PeerType::Observer
        } else {
            crate::api::PeerType::Participant
        },
    })
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
            observer: false,
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
    fn answers_count_only_when_the_epoch_files_held_still_around_them() {
        let at = |c, a| Epochs {
            current: Some(c),
            accepted: Some(a),
        };
        assert_eq!(unchanged_epochs(at(3, 3), at(3, 3)), Ok(at(3, 3)));
        // A follower took epoch 4 at NEWLEADER while its answer (leader of epoch 3) was awaited.
        let moved = unchanged_epochs(at(3, 4), at(4, 4)).unwrap_err();
        assert!(
            moved.contains("currentEpoch Some(3) then Some(4)"),
            "{moved}"
        );
        // A file that appeared (a first start) is a change too.
        assert!(unchanged_epochs(Epochs::default(), at(1, 1)).is_err());
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
                last_zxid: Some(0x2_0000_0007),
                is_leader: Some(false),
            }
        );
        assert_eq!(
            parse_zabstate(ZAB_ELECTING.as_bytes()).unwrap(),
            ZabAnswer::default()
        );
        assert!(parse_zabstate(br#"{"last_zxid":"0xzz"}"#).is_err());
    }

    #[test]
    fn answers_that_disagree_on_the_role_are_no_read() {
        let leading = LeaderAnswer::Serving {
            is_leader: true,
            leader_id: 3,
        };
        let old_instance = ZabAnswer {
            phase: Some(ZabPhase::Broadcast),
            last_zxid: Some(0x1_0000_0021),
            is_leader: Some(false),
        };
        let o = observation(
            leading.clone(),
            old_instance,
            Epochs {
                current: Some(2),
                accepted: Some(2),
            },
        );
        let err = to_status(&o).unwrap_err();
        assert!(err.contains("straddle a change of role"), "{err}");
        // The leader's own instance answering both: a read.
        let own = ZabAnswer {
            is_leader: Some(true),
            ..old_instance
        };
        assert!(to_status(&observation(leading, own, o.epochs)).is_ok());
    }

    #[test]
    fn a_follower_takes_its_epoch_from_the_current_epoch_file_not_its_stale_zxid() {
        let o = observation(
            parse_leader(LEADER_FOLLOWER.as_bytes()).unwrap(),
            ZabAnswer {
                phase: Some(ZabPhase::Broadcast),
                last_zxid: Some(0x1_0000_0004),
                is_leader: None,
            },
            Epochs {
                current: Some(2),
                accepted: Some(2),
            },
        );
        let s = to_status(&o).unwrap();
        assert_eq!(s.state, ServerState::Following);
        assert_eq!(s.leader, Some(3));
        assert_eq!(s.peer_epoch, 2);
        assert_eq!(s.last_zxid, 0x1_0000_0004);
        assert_eq!(s.last_zxid_hex, "0x100000004");
        // Synced into epoch 2: everything committed before it is there.
        assert_eq!(s.last_committed_zxid, 0x2_0000_0000);
        assert!(s.last_election.is_none());
    }

    #[test]
    fn without_epoch_files_the_epoch_is_the_zxid_high_half() {
        let o = observation(
            LeaderAnswer::Serving {
                is_leader: true,
                leader_id: 2,
            },
            // The body is a follower's: here its instance leads.
            ZabAnswer {
                is_leader: Some(true),
                ..parse_zabstate(ZAB_BROADCAST.as_bytes()).unwrap()
            },
            Epochs::default(),
        );
        let s = to_status(&o).unwrap();
        assert_eq!(s.state, ServerState::Leading);
        assert_eq!(s.leader, Some(2));
        assert_eq!(s.peer_epoch, 2);
        assert_eq!(s.accepted_epoch, 2);
    }

    #[test]
    fn a_follower_synced_with_nothing_to_apply_is_as_far_as_its_new_leader() {
        // Seen under TCG: the leader of epoch 1 reported 0x100000000, a follower synced by
        // DIFF 0x0, and with no write after the election that follower never "caught up".
        let leader = committed_zxid(ServerState::Leading, 0x1_0000_0000, 1);
        let follower = committed_zxid(ServerState::Following, 0x0, 1);
        assert_eq!(follower, leader);
        // A follower behind on a write of this epoch is still behind.
        let leader = committed_zxid(ServerState::Leading, 0x1_0000_0003, 1);
        assert!(committed_zxid(ServerState::Following, 0x1_0000_0002, 1) < leader);
        // Not serving: only what it reported.
        assert_eq!(committed_zxid(ServerState::Looking, 0x5, 1), 0x5);
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
        let s = to_status(&o).unwrap();
        assert_eq!(s.state, ServerState::Looking);
        assert_eq!(s.leader, None);
        assert_eq!(s.zab_phase, ZabPhase::Election);
        assert_eq!(s.last_zxid, 0x1_0000_0004);
        assert_eq!((s.peer_epoch, s.accepted_epoch), (1, 2));
    }

    #[test]
    fn a_syncing_server_reports_no_epoch_until_it_serves_the_new_one() {
        // currentEpoch is already 2 on disk (written during sync), the server does not serve:
        // neither 2 (not established yet as far as the reads show) nor 1 (below its file).
        let syncing = observation(
            parse_leader(LEADER_NOT_SERVING.as_bytes()).unwrap(),
            ZabAnswer {
                phase: Some(ZabPhase::Sync),
                last_zxid: None,
                is_leader: None,
            },
            Epochs {
                current: Some(2),
                accepted: Some(2),
            },
        );
        let err = to_status(&syncing).unwrap_err();
        assert!(err.contains("currentEpoch 2 above epoch 1"), "{err}");
        let serving = Observation {
            leader: LeaderAnswer::Serving {
                is_leader: true,
                leader_id: 2,
            },
            zab: ZabAnswer {
                last_zxid: Some(0x2_0000_0000),
                ..syncing.zab
            },
            ..syncing.clone()
        };
        assert_eq!(to_status(&serving).unwrap().peer_epoch, 2);
        // Serving without a zxid of its own (zabstate did not answer): never the one kept from
        // an earlier epoch, but the new epoch's NEWLEADER zxid it holds once it serves.
        let no_zxid = Observation {
            zab: syncing.zab,
            previous_zxid: 0x1_0000_0021,
            ..serving.clone()
        };
        assert_eq!(to_status(&no_zxid).unwrap().last_zxid, 0x2_0000_0000);
        let same_epoch = Observation {
            previous_zxid: 0x2_0000_0005,
            ..no_zxid.clone()
        };
        assert_eq!(to_status(&same_epoch).unwrap().last_zxid, 0x2_0000_0005);
        // An unreadable file vouches for nothing.
        let unread = Observation {
            epochs: Epochs::default(),
            ..syncing
        };
        assert!(to_status(&unread).is_err());
    }

    /// Observations of three servers, mapped as the target maps them and judged by the
    /// checkers: the sequences behind the SSH false alarm (2026-11-30) and real violations.
    mod judged {
        use super::*;
        use crate::checker::{check_history, CheckOptions, Validity};
        use crate::history::Event;

        const MS: u64 = 1_000_000;

        /// What one observation of `sid` saw: serving as (is_leader, leader), or not, with
        /// its currentEpoch file and the epoch this controller last saw it serve in.
        struct Obs {
            ms: u64,
            sid: u64,
            role: Option<(bool, u64)>,
            file: u64,
            served: u64,
        }

        fn status(o: &Obs) -> Result<serde_json::Value, String> {
            let leader = match o.role {
                Some((is_leader, leader_id)) => LeaderAnswer::Serving {
                    is_leader,
                    leader_id,
                },
                None => LeaderAnswer::NotServing("not currently serving requests".into()),
            };
            let zab = ZabAnswer {
                phase: o.role.map(|_| ZabPhase::Broadcast),
                // A serving server's data tree is at least at its epoch's NEWLEADER.
                last_zxid: o.role.map(|_| o.file << 32),
                is_leader: o.role.map(|(is_leader, _)| is_leader),
            };
            let s = to_status(&Observation {
                sid: o.sid,
                observer: false,
                leader,
                zab,
                previous_zxid: 0,
                last_served_epoch: o.served,
                epochs: Epochs {
                    current: Some(o.file),
                    accepted: Some(o.file),
                },
                wall_clock_ms: 0,
                uptime_ms: 0,
            })?;
            Ok(serde_json::to_value(s).unwrap())
        }

        /// election-safety's verdict on the statuses the observations map to (failed ones
        /// recorded as failed reads, as the observers do).
        fn election_safety(obs: &[Obs]) -> (Validity, String) {
            let events: Vec<Event> = obs
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    let n = format!("n{}", o.sid);
                    let (kind, value) = match status(o) {
                        Ok(v) => ("ok", v),
                        Err(e) => ("info", serde_json::json!({ "error": e })),
                    };
                    serde_json::from_value(serde_json::json!({
                        "index": i, "time": o.ms * MS, "process": n, "type": kind,
                        "f": "status", "node": n, "value": value
                    }))
                    .unwrap()
                })
                .collect();
            let info = serde_json::from_value(serde_json::json!({
                "name": "t", "target": "zookeeper", "nodes": ["n1", "n2", "n3"],
                "workload": "election", "nemesis": ["pause"], "seed": 1, "time_limit_s": 10.0,
                "tick_ms": 200, "init_limit": 10, "sync_limit": 5,
                "started_at": "2026-11-30T00:00:00Z", "replay_command": "x", "version": "0"
            }))
            .unwrap();
            let results = check_history(&events, &info, &CheckOptions::default());
            let c = results
                .checkers
                .iter()
                .find(|c| c.name == "election-safety")
                .unwrap();
            (c.valid, c.explanation.clone())
        }

        const LEADS: Option<(bool, u64)> = Some((true, 2));
        const FOLLOWS_N2: Option<(bool, u64)> = Some((false, 2));

        /// The false alarm: n2 led epoch 1 but was paused before any of its reads as leader
        /// vouched for its epoch, so this controller last saw it serve in epoch 0; after the
        /// pause it stepped down with currentEpoch 1. Reported as "epoch 0" that read was
        /// taken for proof that n2 never reached epoch 1.
        #[test]
        fn a_leader_that_served_unseen_is_not_proof_against_its_followers() {
            let obs = [
                Obs {
                    ms: 10,
                    sid: 1,
                    role: None,
                    file: 0,
                    served: 0,
                },
                Obs {
                    ms: 11,
                    sid: 2,
                    role: None,
                    file: 0,
                    served: 0,
                },
                Obs {
                    ms: 500,
                    sid: 1,
                    role: FOLLOWS_N2,
                    file: 1,
                    served: 0,
                },
                Obs {
                    ms: 510,
                    sid: 3,
                    role: FOLLOWS_N2,
                    file: 1,
                    served: 0,
                },
                Obs {
                    ms: 3000,
                    sid: 2,
                    role: None,
                    file: 1,
                    served: 0,
                },
            ];
            let (valid, why) = election_safety(&obs);
            assert_ne!(valid, Validity::False, "{why}");
        }

        /// The proof rule still works on ZooKeeper's reads: n2, seen serving in epoch 1 and
        /// read not serving with currentEpoch 1 after n1 followed it "in epoch 2".
        #[test]
        fn a_follower_of_an_epoch_its_leader_never_reached_is_caught() {
            let obs = [
                Obs {
                    ms: 10,
                    sid: 2,
                    role: LEADS,
                    file: 1,
                    served: 0,
                },
                Obs {
                    ms: 500,
                    sid: 1,
                    role: FOLLOWS_N2,
                    file: 2,
                    served: 1,
                },
                Obs {
                    ms: 3000,
                    sid: 2,
                    role: None,
                    file: 1,
                    served: 1,
                },
            ];
            let (valid, why) = election_safety(&obs);
            assert_eq!(valid, Validity::False, "{why}");
            assert!(why.contains("had not even reached epoch 2"), "{why}");
        }

        /// Two leaders in one epoch, however far apart they were seen.
        #[test]
        fn two_leaders_of_one_epoch_are_caught() {
            let obs = [
                Obs {
                    ms: 10,
                    sid: 1,
                    role: Some((true, 1)),
                    file: 1,
                    served: 0,
                },
                Obs {
                    ms: 20,
                    sid: 3,
                    role: Some((false, 1)),
                    file: 1,
                    served: 0,
                },
                Obs {
                    ms: 5000,
                    sid: 2,
                    role: LEADS,
                    file: 1,
                    served: 0,
                },
            ];
            let (valid, why) = election_safety(&obs);
            assert_eq!(valid, Validity::False, "{why}");
            assert!(why.contains("n1 and n2 both led epoch 1"), "{why}");
        }
    }
}
