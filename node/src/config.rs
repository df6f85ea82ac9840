//! The node's configuration in ZooKeeper's own terms: a zoo.cfg-style file plus `myid`.
//!
//! Every error names the file, the line and what to write instead, so an operator can fix it
//! without reading code. Unknown keys are kept as warnings (a real zoo.cfg carries many
//! settings fle-node has no use for, such as clientPort).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::api::PeerType;
use crate::membership::{self, Membership};

/// ZooKeeper's jute.maxbuffer default: 1 MiB.
pub const DEFAULT_MAX_BUFFER: usize = 1 << 20;

/// One `server.N=host:quorumPort:electionPort` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddr {
    pub host: String,
    pub quorum_port: u16,
    pub election_port: u16,
    /// `;host:port` after the ports (ZooKeeper's clientAddr): that server's HTTP API, where a
    /// follower forwards client writes. Without it a follower answers 503 naming the leader.
    pub client: Option<String>,
    /// `:observer` after the ports: a non-voting server (`:participant` or nothing: a voter).
    pub peer_type: PeerType,
}

impl ServerAddr {
    pub fn election(&self) -> String {
        format!("{}:{}", self.host, self.election_port)
    }
    pub fn quorum(&self) -> String {
        format!("{}:{}", self.host, self.quorum_port)
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub sid: u64,
    pub tick_time_ms: u64,
    pub init_limit: u64,
    pub sync_limit: u64,
    pub data_dir: PathBuf,
    /// Every server, voters and observers, by sid: zoo.cfg's (or its dynamicConfigFile's)
    /// until a reconfig, then the newest dynamic config in the dataDir (`membership`).
    pub servers: BTreeMap<u64, ServerAddr>,
    /// The config version of `servers` (0: the static config; else a reconfig's zxid).
    pub version: u64,
    /// `peerType=` when given: checked against this server's own `server.N` line.
    pub peer_type: Option<PeerType>,
    pub admin_address: String,
    pub admin_port: u16,
    /// `jute.maxbuffer`: the largest `POST /write` body, in bytes (ZooKeeper's default 1 MiB).
    pub max_buffer: usize,
    /// Keys we accepted but do not use, for a start-up warning.
    pub ignored_keys: Vec<String>,
    /// zoo.cfg's `dynamicConfigFile=` (relative to zoo.cfg's folder), read by `load`.
    pub dynamic_file: Option<PathBuf>,
    /// This server's line in zoo.cfg (set by `load`): its ports if a reconfig removed it.
    pub own: Option<ServerAddr>,
}

impl Config {
    /// This server's addresses: its line in the config in force, or, once a reconfig removed
    /// it, its line in zoo.cfg (`load` refuses a zoo.cfg without one).
    pub fn me(&self) -> &ServerAddr {
        match self.servers.get(&self.sid) {
            Some(a) => a,
            None => self
                .own
                .as_ref()
                .expect("load checks this server's own line"),
        }
    }

    /// The membership in force: the servers and their version.
    pub fn membership(&self) -> Membership {
        Membership {
            version: self.version,
            servers: self.servers.clone(),
        }
    }

    /// This config under another membership (a reconfig activated).
    pub fn with_membership(&self, m: &Membership) -> Config {
        Config {
            servers: m.servers.clone(),
            version: m.version,
            ..self.clone()
        }
    }

    /// The servers that vote and count toward quorums.
    pub fn voters(&self) -> BTreeSet<u64> {
        self.of_type(PeerType::Participant)
    }

    /// The servers marked `:observer`.
    pub fn observers(&self) -> BTreeSet<u64> {
        self.of_type(PeerType::Observer)
    }

    fn of_type(&self, t: PeerType) -> BTreeSet<u64> {
        membership::sids_of_type(&self.servers, t)
    }
}

/// A configuration error, already worded for the operator.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Reads the zoo.cfg at `path` and the `myid` file in its dataDir.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError(format!(
            "{}: cannot read the config file: {e} (pass an existing zoo.cfg with --config)",
            path.display()
        ))
    })?;
    let mut cfg = parse(&path.display().to_string(), &text)?;
    if let Some(file) = cfg.dynamic_file.take() {
        let file = path.parent().unwrap_or(Path::new(".")).join(file);
        let m = read_dynamic(&file)?;
        (cfg.servers, cfg.version) = (m.servers, m.version);
    }
    cfg.sid = read_myid(&cfg.data_dir)?;
    if !cfg.servers.contains_key(&cfg.sid) {
        return Err(ConfigError(format!(
            "{}: myid is {} but {} has no server.{} line (add one or fix myid)",
            cfg.data_dir.join("myid").display(),
            cfg.sid,
            path.display(),
            cfg.sid
        )));
    }
    let listed = cfg.me().peer_type;
    if cfg.peer_type.is_some_and(|t| t != listed) {
        let word = |t: PeerType| match t {
            PeerType::Observer => "observer",
            PeerType::Participant => "participant",
        };
        return Err(ConfigError(format!(
            "{}: peerType={} but server.{} is a {} (make them agree: end the server.{} line with :observer for an observer, or drop peerType)",
            path.display(),
            word(cfg.peer_type.unwrap_or(listed)),
            cfg.sid,
            word(listed),
            cfg.sid
        )));
    }
    cfg.own = cfg.servers.get(&cfg.sid).cloned();
    // A reconfig this server activated before it stopped is in force again, even one that
    // removed it: it then starts outside the ensemble, on its own ports, and stays LOOKING.
    let newest = membership::load_newest(&cfg.data_dir).map_err(ConfigError)?;
    if let Some(m) = newest.filter(|m| m.version > cfg.version) {
        (cfg.servers, cfg.version) = (m.servers, m.version);
    }
    Ok(cfg)
}

/// zoo.cfg's `dynamicConfigFile=`: the server lines and version live there (ZooKeeper 3.5+).
fn read_dynamic(path: &Path) -> Result<Membership, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError(format!(
            "{}: cannot read the dynamicConfigFile: {e} (fix the path in zoo.cfg or put the server.N lines in zoo.cfg)",
            path.display()
        ))
    })?;
    let mut m = Membership::parse(&path.display().to_string(), &text).map_err(ConfigError)?;
    // ZooKeeper names the file `zoo.cfg.dynamic.<hex version>`: the version is in the name.
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if let Some(version) = membership::version_in_name(name) {
        m.version = version;
    }
    Ok(m)
}

fn read_myid(data_dir: &Path) -> Result<u64, ConfigError> {
    let path = data_dir.join("myid");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        ConfigError(format!(
            "{}: cannot read myid: {e} (write this server's id, e.g. `echo 1 > {}`)",
            path.display(),
            path.display()
        ))
    })?;
    text.trim().parse::<u64>().map_err(|_| {
        ConfigError(format!(
            "{}: myid {:?} is not a server id (write a whole number such as 1)",
            path.display(),
            text.trim()
        ))
    })
}

/// Parses zoo.cfg text; `name` is used in errors. The sid is filled in by `load`.
pub fn parse(name: &str, text: &str) -> Result<Config, ConfigError> {
    let mut tick = None;
    let mut init = None;
    let mut sync = None;
    let mut data_dir = None;
    let mut servers = BTreeMap::new();
    let mut admin_address = "0.0.0.0".to_string();
    let mut admin_port = 8080u16;
    let mut max_buffer = DEFAULT_MAX_BUFFER;
    let mut peer_type = None;
    let mut dynamic_file = None;
    let mut ignored = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let err = |what: String| ConfigError(format!("{name} line {line_no}: {what}"));
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(err(format!("{line:?} is not `key=value`")));
        };
        let (key, value) = (key.trim(), value.trim());
        let number = |min: u64| -> Result<u64, ConfigError> {
            match value.parse::<u64>() {
                Ok(n) if n >= min => Ok(n),
                _ => Err(err(format!(
                    "{key}={value:?} must be a whole number >= {min}"
                ))),
            }
        };
        match key {
            "tickTime" => tick = Some(number(1)?),
            "initLimit" => init = Some(number(1)?),
            "syncLimit" => sync = Some(number(1)?),
            "dataDir" => {
                if value.is_empty() {
                    return Err(err("dataDir is empty (give a directory path)".into()));
                }
                data_dir = Some(PathBuf::from(value));
            }
            "admin.serverAddress" => admin_address = value.to_string(),
            "peerType" => {
                peer_type = Some(match value {
                    "observer" => PeerType::Observer,
                    "participant" => PeerType::Participant,
                    _ => {
                        return Err(err(format!(
                            "peerType={value:?} must be observer or participant"
                        )))
                    }
                })
            }
            "dynamicConfigFile" => dynamic_file = Some(PathBuf::from(value)),
            "jute.maxbuffer" => max_buffer = number(1024)? as usize,
            "admin.serverPort" => {
                admin_port = value.parse().map_err(|_| {
                    err(format!(
                        "admin.serverPort={value:?} must be a port 0..=65535"
                    ))
                })?
            }
            k if k.starts_with("server.") => {
                let (sid, addr) = server_line(k, value).map_err(err)?;
                if servers.insert(sid, addr).is_some() {
                    return Err(err(format!("server.{sid} is given twice")));
                }
            }
            other => ignored.push(other.to_string()),
        }
    }
    let missing =
        |key: &str| ConfigError(format!("{name}: {key} is not set (add a `{key}=` line)"));
    if dynamic_file.is_none() {
        check_servers(name, &servers)?;
    }
    Ok(Config {
        sid: 0,
        version: 0,
        dynamic_file,
        own: None,
        tick_time_ms: tick.ok_or_else(|| missing("tickTime"))?,
        init_limit: init.ok_or_else(|| missing("initLimit"))?,
        sync_limit: sync.ok_or_else(|| missing("syncLimit"))?,
        data_dir: data_dir.ok_or_else(|| missing("dataDir"))?,
        servers,
        peer_type,
        admin_address,
        admin_port,
        max_buffer,
        ignored_keys: ignored,
    })
}

/// A `server.N=...` line (`key`, `value`): the sid and its addresses, or what is wrong.
pub(crate) fn server_line(key: &str, value: &str) -> Result<(u64, ServerAddr), String> {
    let sid = key["server.".len()..]
        .parse::<u64>()
        .map_err(|_| format!("{key:?}: the part after `server.` must be the server id"))?;
    let addr = parse_server(value).map_err(|why| {
        format!(
            "{key}={value:?}: {why} (expected server.N=host:quorumPort:electionPort[:observer])"
        )
    })?;
    Ok((sid, addr))
}

/// The ensemble has servers, and at least one of them votes.
fn check_servers(name: &str, servers: &BTreeMap<u64, ServerAddr>) -> Result<(), ConfigError> {
    if servers.is_empty() {
        return Err(ConfigError(format!(
            "{name}: no server.N lines (add server.N=host:quorumPort:electionPort for every server)"
        )));
    }
    if servers.values().all(|a| a.peer_type.is_observer()) {
        return Err(ConfigError(format!(
            "{name}: every server.N line ends in :observer, so no server can vote or lead (leave at least one voter without :observer)"
        )));
    }
    Ok(())
}

/// `host:quorumPort:electionPort[:participant|:observer][;clientAddr]`.
fn parse_server(value: &str) -> Result<ServerAddr, String> {
    let (value, client) = match value.split_once(';') {
        Some((v, c)) => (v, Some(parse_client(c.trim())?)),
        None => (value, None),
    };
    let parts: Vec<&str> = value.split(':').collect();
    match parts.as_slice() {
        [host, q, e] | [host, q, e, "participant" | "observer"] => {
            if host.is_empty() {
                return Err("the host is empty".into());
            }
            let port = |p: &str| -> Result<u16, String> {
                match p.parse::<u16>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(format!("port {p:?} is not a port number 1..=65535")),
                }
            };
            Ok(ServerAddr {
                host: host.to_string(),
                quorum_port: port(q)?,
                election_port: port(e)?,
                client,
                peer_type: match parts.get(3) {
                    Some(&"observer") => PeerType::Observer,
                    _ => PeerType::Participant,
                },
            })
        }
        [_, _, _, other] => Err(format!(
            "the fourth part {other:?} must be participant or observer"
        )),
        _ => Err("wrong number of `:`-separated parts".into()),
    }
}

/// The clientAddr part: `host:port` (a bare port means 0.0.0.0, as in ZooKeeper).
fn parse_client(c: &str) -> Result<String, String> {
    let (host, port) = c.rsplit_once(':').unwrap_or(("0.0.0.0", c));
    match port.parse::<u16>() {
        Ok(p) if p > 0 && !host.is_empty() => Ok(format!("{host}:{p}")),
        _ => Err(format!(
            "client address {c:?} after `;` must be host:port (the server's admin.serverPort)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "# comment\ntickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir=/tmp/x\n\
        clientPort=2181\nserver.1=127.0.0.1:2001:3001\nserver.2=127.0.0.1:2002:3002:participant\n\
        admin.serverAddress=127.0.0.1\nadmin.serverPort=8081\n";

    #[test]
    fn parses_a_zoo_cfg() {
        let c = parse("zoo.cfg", GOOD).unwrap();
        assert_eq!((c.tick_time_ms, c.init_limit, c.sync_limit), (100, 10, 5));
        assert_eq!(c.servers.len(), 2);
        assert_eq!(c.servers[&2].election(), "127.0.0.1:3002");
        assert_eq!(c.servers[&1].quorum(), "127.0.0.1:2001");
        assert_eq!(
            (c.admin_address.as_str(), c.admin_port),
            ("127.0.0.1", 8081)
        );
        assert_eq!(c.ignored_keys, vec!["clientPort".to_string()]);
        assert_eq!(c.servers[&1].client, None);
    }

    #[test]
    fn client_address_after_a_semicolon_is_the_http_api() {
        let base = "tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir=/tmp/x\n";
        let c = parse(
            "zoo.cfg",
            &format!("{base}server.1=127.0.0.1:2001:3001;127.0.0.1:8081\n"),
        )
        .unwrap();
        assert_eq!(c.servers[&1].client.as_deref(), Some("127.0.0.1:8081"));
        let e = error_of(&format!(
            "{base}server.1=127.0.0.1:2001:3001;127.0.0.1:http\n"
        ));
        assert!(
            e.contains("client address") && e.contains("host:port"),
            "{e}"
        );
    }

    #[test]
    fn jute_maxbuffer_bounds_write_bodies_and_defaults_to_1_mib() {
        assert_eq!(parse("zoo.cfg", GOOD).unwrap().max_buffer, 1 << 20);
        let c = parse("zoo.cfg", &format!("{GOOD}jute.maxbuffer=4096\n")).unwrap();
        assert_eq!(c.max_buffer, 4096);
        assert!(c.ignored_keys.iter().all(|k| k != "jute.maxbuffer"));
        let e = error_of(&format!("{GOOD}jute.maxbuffer=12\n"));
        assert!(e.contains("jute.maxbuffer") && e.contains(">= 1024"), "{e}");
    }

    fn error_of(text: &str) -> String {
        parse("zoo.cfg", text).unwrap_err().0
    }

    #[test]
    fn errors_name_the_line_and_the_fix() {
        let e = error_of("tickTime=100\nserver.1=127.0.0.1:abc:3001\n");
        assert!(e.contains("line 2") && e.contains("\"abc\""), "{e}");
        let e = error_of("tickTime=-3\n");
        assert!(e.contains("line 1") && e.contains("whole number"), "{e}");
        let e = error_of("tickTime 100\n");
        assert!(e.contains("line 1") && e.contains("key=value"), "{e}");
        let e = error_of("server.x=h:1:2\n");
        assert!(e.contains("server id"), "{e}");
        let e = error_of("initLimit=1\nsyncLimit=1\ndataDir=/d\nserver.1=h:1:2\n");
        assert!(e.contains("tickTime is not set"), "{e}");
        let e = error_of("server.1=h:1:2\nserver.1=h:3:4\n");
        assert!(e.contains("line 2") && e.contains("twice"), "{e}");
        let e = error_of("server.1=h:1:2:watcher\n");
        assert!(e.contains("\"watcher\"") && e.contains("observer"), "{e}");
        let e = error_of("peerType=spectator\n");
        assert!(
            e.contains("line 1") && e.contains("observer or participant"),
            "{e}"
        );
    }

    #[test]
    fn observers_are_read_in_zookeepers_syntax() {
        let c = parse(
            "zoo.cfg",
            &format!(
                "{GOOD}server.3=127.0.0.1:2003:3003:observer;127.0.0.1:8083\npeerType=observer\n"
            ),
        )
        .unwrap();
        assert_eq!(c.voters(), [1, 2].into());
        assert_eq!(c.observers(), [3].into());
        assert_eq!(c.servers[&3].client.as_deref(), Some("127.0.0.1:8083"));
        assert_eq!(c.peer_type, Some(PeerType::Observer));
        assert!(c.ignored_keys.iter().all(|k| k != "peerType"));
    }

    #[test]
    fn an_ensemble_of_observers_only_is_refused() {
        let e = error_of(
            "tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir=/d\nserver.1=h:1:2:observer\n",
        );
        assert!(
            e.starts_with("zoo.cfg:") && e.contains("at least one voter"),
            "{e}"
        );
    }

    #[test]
    fn peer_type_must_agree_with_the_servers_own_line() {
        let dir = std::env::temp_dir().join(format!("flc-cfg-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("myid"), "2\n").unwrap();
        let cfg = dir.join("zoo.cfg");
        let base = format!(
            "tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir={}\nserver.1=h:1:2\n",
            dir.display()
        );
        std::fs::write(&cfg, format!("{base}server.2=h:3:4\npeerType=observer\n")).unwrap();
        let e = load(&cfg).unwrap_err().0;
        std::fs::write(
            &cfg,
            format!("{base}server.2=h:3:4:observer\npeerType=observer\n"),
        )
        .unwrap();
        let ok = load(&cfg).map(|c| c.observers());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            e.contains("peerType=observer") && e.contains(":observer"),
            "{e}"
        );
        assert_eq!(ok.unwrap(), [2].into());
    }
}
