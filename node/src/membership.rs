//! The ensemble's membership and its version, as ZooKeeper's dynamic configuration holds it.
//!
//! - The text is ZooKeeper's: `server.N=host:quorumPort:electionPort:role[;client]` lines and a
//!   last `version=<hex>` line, as every election notification carries it. Without the version
//!   line it is the dynamic file a server keeps (`zoo.cfg.dynamic.<hex version>` in its
//!   dataDir: the version is in the name, as in ZooKeeper) and the body of a reconfig txn.
//! - A config's version is the zxid of the txn that committed it (0: the static zoo.cfg).
//! - A reconfig is one txn (`{"reconfig": text}`) the leader proposes. It commits only with a
//!   quorum of the old voters AND of the new ones (`zab::leader`), and every server activates
//!   it once committed: it writes the dynamic file and elects again under it (`server`).
//! - [`Change`] is an incremental reconfig (ZooKeeper's `reconfig -add ... -remove ...`),
//!   checked against the config in force before anything is proposed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::api::PeerType;
use crate::config::{server_line, ServerAddr};
use crate::txnlog::Txn;

/// The membership in force, as the long-lived parts of a server read it (the election port's
/// peers, the quorum port's acceptor, the HTTP API); the server loop sends each activation.
pub type Members = tokio::sync::watch::Receiver<Membership>;

/// The file name prefix of a dynamic config in the dataDir.
pub const DYNAMIC_PREFIX: &str = "zoo.cfg.dynamic.";
/// The txn value key of a reconfig.
const RECONFIG_KEY: &str = "reconfig";

/// Every server of the ensemble, voters and observers, under one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The zxid of the reconfig txn that made it (0: the static zoo.cfg).
    pub version: u64,
    pub servers: BTreeMap<u64, ServerAddr>,
}

impl Membership {
    /// The servers that vote and count toward quorums.
    pub fn voters(&self) -> BTreeSet<u64> {
        self.of_type(PeerType::Participant)
    }

    /// The servers that only observe.
    pub fn observers(&self) -> BTreeSet<u64> {
        self.of_type(PeerType::Observer)
    }

    fn of_type(&self, t: PeerType) -> BTreeSet<u64> {
        sids_of_type(&self.servers, t)
    }

    /// ZooKeeper's text: server lines, then `version=<hex>`.
    pub fn text(&self) -> String {
        let mut s = servers_text(&self.servers);
        s.push_str(&format!("version={:x}", self.version));
        s
    }

    /// The version a config text's last `version=<hex>` line says, without parsing the rest
    /// (an election reads it off every notification).
    pub fn version_of(text: &str) -> Option<u64> {
        let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
        u64::from_str_radix(line.trim().strip_prefix("version=")?, 16).ok()
    }

    /// Parses server lines and an optional `version=<hex>` line (`name` is used in errors).
    pub fn parse(name: &str, text: &str) -> Result<Membership, String> {
        let mut servers = BTreeMap::new();
        let mut version = 0;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |what: String| format!("{name} line {}: {what}", i + 1);
            let Some((key, value)) = line.split_once('=') else {
                return Err(err(format!("{line:?} is not `key=value`")));
            };
            let (key, value) = (key.trim(), value.trim());
            if key == "version" {
                version = u64::from_str_radix(value, 16)
                    .map_err(|_| err(format!("version={value:?} must be a hex number")))?;
            } else if key.starts_with("server.") {
                let (sid, addr) = server_line(key, value).map_err(err)?;
                if servers.insert(sid, addr).is_some() {
                    return Err(err(format!("server.{sid} is given twice")));
                }
            } else {
                return Err(err(format!(
                    "{key:?} does not belong in a dynamic config (only server.N and version lines)"
                )));
            }
        }
        check_voters(&servers).map_err(|why| format!("{name}: {why}"))?;
        Ok(Membership { version, servers })
    }
}

/// The sids of `servers` of type `t` (voters or observers): one definition for a config in
/// force (`Config`) and one carried or saved (`Membership`).
pub(crate) fn sids_of_type(servers: &BTreeMap<u64, ServerAddr>, t: PeerType) -> BTreeSet<u64> {
    let of = |(s, a): (&u64, &ServerAddr)| (a.peer_type == t).then_some(*s);
    servers.iter().filter_map(of).collect()
}

/// The server lines of a config, each ending in a newline.
fn servers_text(servers: &BTreeMap<u64, ServerAddr>) -> String {
    let mut s = String::new();
    for (sid, a) in servers {
        let role = if a.peer_type.is_observer() {
            "observer"
        } else {
            "participant"
        };
        s.push_str(&format!(
            "server.{sid}={}:{}:{}:{role}",
            a.host, a.quorum_port, a.election_port
        ));
        if let Some(client) = &a.client {
            s.push_str(&format!(";{client}"));
        }
        s.push('\n');
    }
    s
}

/// A config must leave at least one voter (ZooKeeper refuses a reconfig without one).
fn check_voters(servers: &BTreeMap<u64, ServerAddr>) -> Result<(), String> {
    if servers.values().all(|a| a.peer_type.is_observer()) {
        return Err("no server votes in it (keep at least one participant)".into());
    }
    Ok(())
}

/// An incremental reconfig, as `POST /reconfig` takes it: `server.N=...` lines to add (or to
/// change: a role or an address) and sids to remove.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    #[serde(default)]
    pub add: Vec<String>,
    #[serde(default)]
    pub remove: Vec<u64>,
}

impl Change {
    /// The servers after this change to `current`, or one line saying what is wrong.
    pub fn apply_to(&self, current: &Membership) -> Result<BTreeMap<u64, ServerAddr>, String> {
        if self.add.is_empty() && self.remove.is_empty() {
            return Err("the reconfig changes nothing (give add or remove)".into());
        }
        let mut servers = current.servers.clone();
        for sid in &self.remove {
            if servers.remove(sid).is_none() {
                return Err(format!(
                    "cannot remove server {sid}: it is not in config version {:#x}",
                    current.version
                ));
            }
        }
        for line in &self.add {
            let (key, value) = line.split_once('=').ok_or_else(|| {
                format!("{line:?} is not server.N=host:quorumPort:electionPort[:role][;client]")
            })?;
            let (sid, addr) = server_line(key.trim(), value.trim())?;
            if self.remove.contains(&sid) {
                return Err(format!("server {sid} is both added and removed"));
            }
            servers.insert(sid, addr);
        }
        check_voters(&servers)?;
        if servers == current.servers {
            return Err(format!(
                "the reconfig leaves config version {:#x} as it is",
                current.version
            ));
        }
        Ok(servers)
    }
}

/// The txn value of a reconfig to `servers` (its version will be the txn's zxid).
pub fn reconfig_value(servers: &BTreeMap<u64, ServerAddr>) -> Value {
    json!({ RECONFIG_KEY: servers_text(servers) })
}

/// Whether a txn value is a reconfig's (the ensemble's own txn, no client's write).
pub fn is_reconfig(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|o| o.contains_key(RECONFIG_KEY))
}

/// [`is_reconfig`] of a value's JSON text (a final log's canonical entry).
pub fn is_reconfig_text(text: &str) -> bool {
    text.starts_with('{') && serde_json::from_str::<Value>(text).is_ok_and(|v| is_reconfig(&v))
}

/// The config a txn makes, if it is a reconfig: its servers under version = its zxid. A txn
/// whose reconfig text does not parse is not a reconfig (the leader only proposes good ones).
pub fn reconfig_of(txn: &Txn) -> Option<Membership> {
    let text = txn.value.as_object()?.get(RECONFIG_KEY)?.as_str()?;
    let mut m = Membership::parse("reconfig txn", text).ok()?;
    m.version = txn.zxid;
    Some(m)
}

/// The newest committed reconfig of a log, found incrementally: each call reads only the
/// txns committed since the last one (a log cut below what was read is read again).
#[derive(Debug, Default, Clone)]
pub struct CommittedConfig {
    read_upto: u64,
    newest: Option<Membership>,
}

impl CommittedConfig {
    /// The newest reconfig in `txns` (zxid order) at or below `committed`.
    pub fn refresh(&mut self, txns: &[Txn], committed: u64) -> Option<&Membership> {
        let last = txns.last().map_or(0, |t| t.zxid);
        if committed < self.read_upto || last < self.read_upto {
            *self = CommittedConfig::default();
        }
        let from = txns.partition_point(|t| t.zxid <= self.read_upto);
        let upto = txns.partition_point(|t| t.zxid <= committed);
        if let Some(m) = txns[from..upto.max(from)]
            .iter()
            .rev()
            .find_map(reconfig_of)
        {
            self.newest = Some(m);
        }
        self.read_upto = self.read_upto.max(committed.min(last));
        self.newest.as_ref()
    }
}

/// Where the dynamic config of `version` lives in `dir`.
pub fn dynamic_path(dir: &Path, version: u64) -> PathBuf {
    dir.join(format!("{DYNAMIC_PREFIX}{version:x}"))
}

/// Writes `m` as `zoo.cfg.dynamic.<hex version>` in `dir` (server lines; the version is in the
/// name), durably: a power loss leaves no half-written config.
pub fn save(dir: &Path, m: &Membership) -> anyhow::Result<()> {
    let tmp = dir.join(format!("{DYNAMIC_PREFIX}next.tmp"));
    let text = servers_text(&m.servers);
    crate::txnlog::write_durably(&dynamic_path(dir, m.version), &tmp, text.as_bytes())
}

/// The version a dynamic config file's name says (ZooKeeper's `<zoo.cfg>.dynamic.<hex>`), if
/// it is one.
pub fn version_in_name(file_name: &str) -> Option<u64> {
    let (_, hex) = file_name.rsplit_once(".dynamic.")?;
    u64::from_str_radix(hex, 16).ok()
}

/// The newest dynamic config saved in `dir`, if any (`zoo.cfg.dynamic.<hex>` files only).
pub fn load_newest(dir: &Path) -> Result<Option<Membership>, String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let newest = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(DYNAMIC_PREFIX))
        .filter_map(|n| version_in_name(&n))
        .max();
    let Some(version) = newest else {
        return Ok(None);
    };
    let path = dynamic_path(dir, version);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let name = path.display().to_string();
    let mut m = Membership::parse(&name, &text).map_err(|why| {
        format!("{why} (remove the damaged file to start from the previous config)")
    })?;
    m.version = version;
    Ok(Some(m))
}

/// Members of one voter `sid` whose client (HTTP) address is `addr`, for route tests.
#[cfg(test)]
pub(crate) fn members_with_client(sid: u64, addr: String) -> Members {
    let text = format!("server.{sid}=127.0.0.1:1:2;{addr}");
    let m = Membership::parse("test", &text).expect("a valid server line");
    tokio::sync::watch::channel(m).1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Membership {
        Membership::parse(
            "test",
            "server.1=127.0.0.1:2001:3001:participant;127.0.0.1:8001\n\
             server.2=127.0.0.1:2002:3002\n\
             server.3=127.0.0.1:2003:3003:observer\n",
        )
        .unwrap()
    }

    #[test]
    fn the_text_is_zookeepers_and_reads_back() {
        let mut m = three();
        m.version = 0x1_0000_0003;
        let text = m.text();
        assert!(text.starts_with("server.1=127.0.0.1:2001:3001:participant;127.0.0.1:8001\n"));
        assert!(text.contains("server.3=127.0.0.1:2003:3003:observer\n"));
        assert!(text.ends_with("version=100000003"), "{text}");
        assert_eq!(Membership::version_of(&text), Some(0x1_0000_0003));
        assert_eq!(Membership::version_of("server.1=h:1:2\n"), None);
        assert_eq!(Membership::parse("again", &text).unwrap(), m);
        assert_eq!(m.voters(), BTreeSet::from([1, 2]));
        assert_eq!(m.observers(), BTreeSet::from([3]));
    }

    #[test]
    fn a_change_adds_removes_and_promotes_or_says_why_not() {
        let m = three();
        let change = Change {
            add: vec![
                "server.3=127.0.0.1:2003:3003:participant".into(),
                "server.4=127.0.0.1:2004:3004".into(),
            ],
            remove: vec![1],
        };
        let after = change.apply_to(&m).unwrap();
        assert_eq!(after.keys().copied().collect::<Vec<_>>(), vec![2, 3, 4]);
        assert!(!after[&3].peer_type.is_observer());
        let refused = |c: Change| c.apply_to(&m).unwrap_err();
        assert!(refused(Change::default()).contains("changes nothing"));
        let unknown = refused(Change {
            remove: vec![9],
            ..Change::default()
        });
        assert!(unknown.contains("cannot remove server 9"), "{unknown}");
        let no_voter = refused(Change {
            remove: vec![1, 2],
            ..Change::default()
        });
        assert!(no_voter.contains("no server votes"), "{no_voter}");
        let bad_line = refused(Change {
            add: vec!["server.5=nowhere".into()],
            ..Change::default()
        });
        assert!(bad_line.contains("server.5"), "{bad_line}");
    }

    #[test]
    fn a_reconfig_txn_takes_its_zxid_as_version_and_other_txns_are_none() {
        let after = Change {
            remove: vec![2],
            ..Change::default()
        }
        .apply_to(&three())
        .unwrap();
        let txn = Txn {
            zxid: 0x2_0000_0005,
            value: reconfig_value(&after),
        };
        let m = reconfig_of(&txn).unwrap();
        assert_eq!((m.version, m.servers), (0x2_0000_0005, after));
        let data = Txn {
            zxid: 7,
            value: json!({"op": "set"}),
        };
        assert_eq!(reconfig_of(&data), None);
    }

    #[test]
    fn the_committed_config_is_the_newest_committed_reconfig_read_once() {
        let servers = three().servers;
        let txn = |zxid: u64, reconfig: bool| Txn {
            zxid,
            value: if reconfig {
                reconfig_value(&servers)
            } else {
                json!("w")
            },
        };
        let log = vec![txn(1, false), txn(2, true), txn(3, false), txn(4, true)];
        let mut c = CommittedConfig::default();
        assert_eq!(c.refresh(&log, 1), None);
        assert_eq!(c.refresh(&log, 3).map(|m| m.version), Some(2));
        // Txn 4 is logged, not committed: it does not count until it is.
        assert_eq!(c.refresh(&log, 3).map(|m| m.version), Some(2));
        assert_eq!(c.refresh(&log, 4).map(|m| m.version), Some(4));
        // A log reset below what was read is read again from the start.
        assert_eq!(c.refresh(&log[..1], 1), None);
    }

    #[test]
    fn the_newest_dynamic_file_is_loaded_and_a_damaged_one_named() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(load_newest(d.path()).unwrap(), None);
        let mut m = three();
        for version in [0x1_0000_0002, 0x1_0000_0010] {
            m.version = version;
            save(d.path(), &m).unwrap();
        }
        assert_eq!(load_newest(d.path()).unwrap(), Some(m.clone()));
        assert_eq!(version_in_name("zoo1.cfg.dynamic.1f"), Some(0x1f));
        assert_eq!(version_in_name("zoo.cfg.dynamic.next.tmp"), None);
        std::fs::write(dynamic_path(d.path(), 0x2_0000_0001), "server.1=x").unwrap();
        let err = load_newest(d.path()).unwrap_err();
        assert!(err.contains("zoo.cfg.dynamic.200000001"), "{err}");
    }
}
