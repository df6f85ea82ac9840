//! ZooKeeper's dynamic reconfiguration as the controller drives and reads it (3.5+):
//! - the dynamic form of a server line (`server.N=host:quorum:election:role;host:client`),
//!   which zoo.cfg takes when the run reconfigures and a joining server's `reconfig -add`
//!   names;
//! - a config as ZooKeeper prints it (the four-letter word `conf`'s `membership:` section, the
//!   answer of a `reconfig`): server lines, then `version=<hex>`;
//! - what a `reconfig` error code means to the nemesis.
//!
//! A run that reconfigures sets `reconfigEnabled=true` and `skipACL=yes` (a reconfig is
//! otherwise for the super user only: the run's servers are its own, nothing else reads them).
//! ZooKeeper then moves the server lines of each zoo.cfg into `zoo.cfg.dynamic.<version>`
//! beside it and rewrites zoo.cfg to point there; the run writes zoo.cfg once, so a restarted
//! server reads the config it last committed, as it would in production.

use super::client::Sessions;
use super::config::Server;
use crate::api::ConfigView;
use crate::control::sut::DataOutcome;
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zookeeper_client as zk;

/// zoo.cfg lines a reconfiguring run adds (ZooKeeper's own keys; an unknown key such as
/// `skipACL` becomes the system property `zookeeper.skipACL`).
pub const ZOO_CFG_LINES: &[&str] = &["reconfigEnabled=true", "skipACL=yes"];

/// The four-letter word that prints a server's config in force (its quorum verifier).
pub const CONF_WORD: &str = "conf";

/// How ZooKeeper names a committed config's file beside zoo.cfg: this, then its version in hex.
pub const DYNAMIC_FILE_PREFIX: &str = "zoo.cfg.dynamic.";

/// `s`'s server line; `dynamic`: with its role and client address, as a reconfig names it.
pub fn server_line(s: &Server, dynamic: bool) -> String {
    let head = format!(
        "server.{}={}:{}:{}",
        s.sid, s.host, s.ports.quorum, s.ports.election
    );
    match (dynamic, s.observer) {
        (true, observer) => {
            let role = if observer { "observer" } else { "participant" };
            format!("{head}:{role};{}:{}", s.host, s.ports.client)
        }
        (false, true) => format!("{head}:observer"),
        (false, false) => head,
    }
}

/// A config as ZooKeeper prints it: `server.N=...:participant|observer;...` lines and one
/// `version=<hex>` line, anything else around them ignored (`conf` prints its settings
/// first). An error names what is missing or malformed.
pub fn parse_config(text: &str) -> Result<ConfigView, String> {
    let mut config = ConfigView {
        version: 0,
        voters: Vec::new(),
        observers: Vec::new(),
    };
    let mut version = None;
    for line in text.lines().map(str::trim) {
        if let Some(hex) = line.strip_prefix("version=") {
            let v = u64::from_str_radix(hex, 16)
                .map_err(|e| format!("version={hex} is not a hex zxid: {e}"))?;
            version = Some(v);
        } else if let Some(rest) = line.strip_prefix("server.") {
            let (sid, spec) = rest
                .split_once('=')
                .ok_or_else(|| format!("{line:?} is not a server line"))?;
            let sid: u64 = sid
                .parse()
                .map_err(|e| format!("{line:?}: server id {sid:?}: {e}"))?;
            // host:quorum:election[:role][;client]: the role is the field before ';', if any.
            let addresses = spec.split(';').next().unwrap_or(spec);
            let observer = addresses.rsplit(':').next() == Some("observer");
            if observer {
                config.observers.push(sid);
            } else {
                config.voters.push(sid);
            }
        }
    }
    config.version = version.ok_or("no version= line")?;
    if config.voters.is_empty() {
        return Err("no voting server line".into());
    }
    config.voters.sort_unstable();
    config.observers.sort_unstable();
    Ok(config)
}

/// What a reconfig's error means to the nemesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not now: another reconfig is in flight, or the new config's quorum is not synced with
    /// the leader (ask again).
    NotNow,
    /// Never: reconfig is disabled, not allowed, or the request is malformed.
    Never,
}

/// ZooKeeper's error codes a reconfig answers with, as the client library reports the ones
/// it has no name for: NewConfigNoQuorum (-13) and ReconfigInProgress (-14) are "not now".
pub fn refusal_of_code(code: i32) -> Refusal {
    match code {
        -13 | -14 => Refusal::NotNow,
        _ => Refusal::Never,
    }
}

/// The configs the servers reported, and what a status read says of them. ZooKeeper gives
/// the ensemble's first config a version too (the first leader's NEWLEADER zxid), though no
/// reconfig made it: a status read reports it as fle-node reports its zoo.cfg, as none (the
/// static config of test.json), so the checkers judge only the configs reconfigs made. An
/// answer that is no config (a server that does not serve, whose dynamic file could not be
/// read either: over SSH) leaves its last one read standing.
#[derive(Debug, Default)]
pub struct Configs {
    /// Each server's last config read.
    last: Mutex<HashMap<String, ConfigView>>,
    /// The versions read before the first reconfig was asked: the ensemble's first config.
    first: Mutex<BTreeSet<u64>>,
    reconfig_asked: AtomicBool,
}

impl Configs {
    /// A reconfig is about to be asked: versions read from now on may be its.
    pub fn reconfig_asked(&self) {
        self.reconfig_asked.store(true, Ordering::SeqCst);
    }

    /// What a status read of `node` reports, given its `conf` answer.
    pub fn reported(&self, node: &str, answer: Result<ConfigView, String>) -> Option<ConfigView> {
        let mut last = self.last.lock().unwrap();
        let mut first = self.first.lock().unwrap();
        if let Ok(config) = answer {
            if !self.reconfig_asked.load(Ordering::SeqCst) {
                first.insert(config.version);
            }
            last.insert(node.to_string(), config);
        }
        let config = last.get(node)?;
        (!first.contains(&config.version)).then(|| config.clone())
    }
}

/// The newest config among the dynamic files in `dir` (`zoo.cfg.dynamic.<hex version>`, server
/// lines only): ZooKeeper writes one for each committed config it adopts, as it adopts it,
/// from a peer's election notification too. What a server that does not serve (and so answers
/// `conf` with no config) runs; its last proposal seen (`zoo.cfg.dynamic.next`) is no
/// committed config and is passed over.
pub fn newest_dynamic_config(dir: &Path) -> Result<ConfigView, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let version =
        |name: String| u64::from_str_radix(name.strip_prefix(DYNAMIC_FILE_PREFIX)?, 16).ok();
    let newest = (entries.flatten())
        .filter_map(|e| version(e.file_name().into_string().ok()?))
        .max()
        .ok_or_else(|| format!("no {DYNAMIC_FILE_PREFIX}* file in {}", dir.display()))?;
    let path = dir.join(format!("{DYNAMIC_FILE_PREFIX}{newest:x}"));
    let lines = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_config(&format!("{lines}\nversion={newest:x}"))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The config `addr`'s server has in force, from its four-letter word `conf`, within
/// `timeout`; an error says what failed.
pub async fn read_config(addr: SocketAddr, timeout: Duration) -> Result<ConfigView, String> {
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(CONF_WORD.as_bytes()).await?;
        let mut text = String::new();
        stream.read_to_string(&mut text).await?;
        Ok::<_, std::io::Error>(text)
    };
    let text = tokio::time::timeout(timeout, ask)
        .await
        .map_err(|_| format!("{CONF_WORD}: no answer within {timeout:?}"))?
        .map_err(|e| format!("{CONF_WORD}: {e}"))?;
    parse_config(&text).map_err(|e| format!("{CONF_WORD}: {e}"))
}

impl Sessions {
    /// One incremental reconfig through `via`'s session: `joining` server lines (dynamic
    /// form) in, `leaving` sids out. The new config's version once committed; `Unavailable`
    /// when it cannot be done now (no session, no quorum of the new config synced, another
    /// reconfig in flight), `Refused` when never, `Info` when it may have committed.
    pub async fn reconfig(
        &self,
        via: &str,
        joining: &[String],
        leaving: &[u64],
    ) -> DataOutcome<u64> {
        let client = match self.connected(via).await {
            Ok(c) => c,
            Err(e) => return DataOutcome::Unavailable(e),
        };
        let leaving: Vec<String> = leaving.iter().map(u64::to_string).collect();
        let update = zk::EnsembleUpdate::Incremental {
            joinings: joining.iter().map(String::as_str),
            leavings: leaving.iter().map(String::as_str),
        };
        let asked = client.update_ensemble(update, None);
        match tokio::time::timeout(self.opts.write_timeout, asked).await {
            Ok(Ok((data, _))) => match parse_config(&String::from_utf8_lossy(&data)) {
                Ok(config) => DataOutcome::Ok(config.version),
                Err(e) => DataOutcome::Info(format!("committed, its config unreadable: {e}")),
            },
            Ok(Err(zk::Error::UnexpectedErrorCode(code))) => match refusal_of_code(code) {
                Refusal::NotNow => DataOutcome::Unavailable(format!("error code {code}: not now")),
                Refusal::Never => DataOutcome::Refused(format!("error code {code}")),
            },
            Ok(Err(e)) => self.outcome_of_error(via, e, DataOutcome::Refused).await,
            Err(_) => DataOutcome::Info(format!("no answer within {:?}", self.opts.write_timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::sut::zookeeper::config::Ports;
    use std::net::{IpAddr, Ipv4Addr};

    fn server(sid: u64, observer: bool) -> Server {
        Server {
            sid,
            host: IpAddr::V4(Ipv4Addr::new(10, 0, 0, sid as u8)),
            ports: Ports {
                client: 2181,
                quorum: 2888,
                election: 3888,
                admin: 8080,
            },
            observer,
        }
    }

    #[test]
    fn server_lines_in_static_and_dynamic_form() {
        assert_eq!(
            server_line(&server(1, false), false),
            "server.1=10.0.0.1:2888:3888"
        );
        assert_eq!(
            server_line(&server(2, true), false),
            "server.2=10.0.0.2:2888:3888:observer"
        );
        assert_eq!(
            server_line(&server(3, false), true),
            "server.3=10.0.0.3:2888:3888:participant;10.0.0.3:2181"
        );
        assert_eq!(
            server_line(&server(4, true), true),
            "server.4=10.0.0.4:2888:3888:observer;10.0.0.4:2181"
        );
    }

    /// `conf` as ZooKeeper 3.8.0 printed it after n3 was removed from three servers.
    const CONF_AFTER_REMOVE: &str = "clientPort=2181\nsecureClientPort=-1\n\
        dataDir=/tmp/n1/data/version-2\ntickTime=200\nserverId=1\ninitLimit=10\nsyncLimit=5\n\
        electionAlg=3\nelectionPort=3811\nquorumPort=2811\npeerType=0\nmembership: \n\
        server.1=127.0.0.1:2811:3811:participant;127.0.0.1:2181\n\
        server.2=127.0.0.1:2821:3821:participant;127.0.0.1:2281\nversion=100000002";

    #[test]
    fn a_config_is_read_from_conf_and_from_a_reconfig_answer() {
        let c = parse_config(CONF_AFTER_REMOVE).unwrap();
        assert_eq!(
            (c.version, c.voters, c.observers),
            (0x100000002, vec![1, 2], vec![])
        );
        let answer = "server.1=h:1:2:participant;h:3\nserver.4=h:1:2:observer;h:3\n\
                      server.2=h:1:2\nversion=200000003";
        let c = parse_config(answer).unwrap();
        assert_eq!(
            (c.version, c.voters, c.observers),
            (0x200000003, vec![1, 2], vec![4])
        );
    }

    #[test]
    fn a_config_without_a_version_or_voters_or_with_a_bad_line_is_no_config() {
        for (text, says) in [
            ("server.1=h:1:2:participant;h:3", "no version"),
            ("version=100000000", "no voting server"),
            ("server.x=h:1:2\nversion=1", "server id"),
            ("server.1\nversion=1", "not a server line"),
            ("server.1=h:1:2\nversion=zz", "not a hex zxid"),
        ] {
            let e = parse_config(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_first_config_is_reported_as_none_and_a_reconfig_s_as_itself() {
        let config = |version, voters: &[u64]| ConfigView {
            version,
            voters: voters.to_vec(),
            observers: Vec::new(),
        };
        let configs = Configs::default();
        let first = config(0x100000000, &[1, 2, 3]);
        assert_eq!(configs.reported("n1", Ok(first.clone())), None);
        configs.reconfig_asked();
        // Still the first config, read after a reconfig was asked: still none.
        assert_eq!(configs.reported("n2", Ok(first)), None);
        let removed = config(0x100000002, &[1, 2]);
        assert_eq!(
            configs.reported("n1", Ok(removed.clone())),
            Some(removed.clone())
        );
        // A server that does not serve answers no config: its last one stands.
        assert_eq!(
            configs.reported("n1", Err("not serving".into())),
            Some(removed)
        );
        assert_eq!(configs.reported("n3", Err("not serving".into())), None);
    }

    #[test]
    fn the_newest_dynamic_file_is_the_config_a_server_runs() {
        let dir = tempfile::Builder::new()
            .prefix("flc-dyn")
            .tempdir()
            .unwrap();
        let none = newest_dynamic_config(dir.path()).unwrap_err();
        assert!(none.contains("no zoo.cfg.dynamic."), "{none}");
        let line = |sid: u64| format!("server.{sid}=h:1:2:participant;h:3\n");
        let write = |name: &str, sids: &[u64]| {
            let text: String = sids.iter().map(|&s| line(s)).collect();
            std::fs::write(dir.path().join(name), text).unwrap();
        };
        write("zoo.cfg.dynamic.100000000", &[1, 2, 3]);
        write("zoo.cfg.dynamic.20000004f", &[1, 2]);
        // A proposal seen, not committed: never the config in force.
        write("zoo.cfg.dynamic.next", &[1, 2, 3, 4]);
        let c = newest_dynamic_config(dir.path()).unwrap();
        assert_eq!((c.version, c.voters), (0x20000004f, vec![1, 2]));
    }

    #[test]
    fn only_a_missing_quorum_or_a_reconfig_in_flight_is_worth_asking_again() {
        assert_eq!(refusal_of_code(-13), Refusal::NotNow);
        assert_eq!(refusal_of_code(-14), Refusal::NotNow);
        assert_eq!(refusal_of_code(-123), Refusal::Never);
    }
}
