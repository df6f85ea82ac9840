//! `zoo.cfg` and `myid` for a ZooKeeper 3.8 ensemble, in ZooKeeper's own terms.
//!
//! Kept a pure function of the layout so the file can be checked without starting a JVM.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::Path;

/// The ports one server listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// Client connections (and the four-letter words).
    pub client: u16,
    /// Followers connect to the leader here (Zab).
    pub quorum: u16,
    /// Fast Leader Election connections.
    pub election: u16,
    /// The AdminServer (Jetty): `/commands/leader`, `/commands/zabstate`.
    pub admin: u16,
}

/// One server of the ensemble as the config names it.
#[derive(Debug, Clone)]
pub struct Server {
    pub sid: u64,
    pub host: IpAddr,
    pub ports: Ports,
    /// A non-voting server (`:observer`, and `peerType=observer` in its own zoo.cfg).
    pub observer: bool,
}

/// The timing every server shares, the same knobs fle-node takes.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub tick_ms: u64,
    pub init_limit: u32,
    pub sync_limit: u32,
}

/// One `--zookeeper-config KEY=VALUE`: a zoo.cfg line the user adds. ZooKeeper turns a key it
/// does not know into the system property `zookeeper.KEY` (QuorumPeerConfig), so this also sets
/// properties such as `snapshotSizeFactor` or `fastleader.maxNotificationInterval`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub key: String,
    pub value: String,
}

/// Keys the controller writes itself (its flags or the run's layout decide them).
const OWN_KEYS: &[(&str, &str)] = &[
    ("tickTime", "use --tick-ms"),
    ("initLimit", "use --init-limit"),
    ("syncLimit", "use --sync-limit"),
    ("dataDir", "the run lays out each server's data folder"),
    ("dataLogDir", "the run lays out each server's data folder"),
    ("clientPort", "the run chooses the ports"),
    ("clientPortAddress", "the run chooses the addresses"),
    (
        "standaloneEnabled",
        "an ensemble never falls back to standalone",
    ),
    (
        "4lw.commands.whitelist",
        "the controller needs its four-letter words",
    ),
];

impl std::str::FromStr for Setting {
    type Err = String;

    fn from_str(s: &str) -> Result<Setting, String> {
        let Some((key, value)) = s.split_once('=') else {
            return Err(format!(
                "{s:?}: write KEY=VALUE, e.g. snapshotSizeFactor=-1"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        let key_ok = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !key_ok {
            return Err(format!(
                "{key:?}: a zoo.cfg key is letters, digits, '.', '_' and '-'"
            ));
        }
        if value.contains(['\n', '\r']) {
            return Err(format!("{key}: the value must be one line"));
        }
        if let Some((_, why)) = OWN_KEYS.iter().find(|(k, _)| *k == key) {
            return Err(format!("{key} is written by fle-chaos itself: {why}"));
        }
        if key.starts_with("server.") || key.starts_with("admin.") || key == "peerType" {
            return Err(format!(
                "{key} is written by fle-chaos itself: the run lays out the ensemble"
            ));
        }
        Ok(Setting {
            key: key.to_string(),
            value: value.to_string(),
        })
    }
}

/// What every ZooKeeper run is given unless its schedule or `--zookeeper-config` says
/// otherwise: (key, value, why).
pub const RUN_DEFAULTS: &[(&str, &str, &str)] = &[(
    "snapshot.trust.empty",
    "true",
    "ZooKeeper does not fsync the snapshot it takes at its first start, so a power cut in an \
     ensemble's first snapshot interval leaves no server able to restart (a known finding) and \
     the run would test nothing after it; nemesis/zookeeper-start-power-loss turns this off to \
     find that bug",
)];

/// The settings a run gives ZooKeeper: [`RUN_DEFAULTS`], replaced key by key by the schedule's
/// (`zookeeper_config` in its file), then by the command line's; and for each default kept,
/// a line saying so.
pub fn with_defaults(schedule: &[Setting], given: &[Setting]) -> (Vec<Setting>, Vec<String>) {
    let mut settings: Vec<Setting> = Vec::new();
    let mut notes = Vec::new();
    for (key, value, why) in RUN_DEFAULTS {
        let chosen = given.iter().chain(schedule).any(|s| s.key == *key);
        if !chosen {
            settings.push(Setting {
                key: key.to_string(),
                value: value.to_string(),
            });
            notes.push(format!("{key}={value} by default: {why}"));
        }
    }
    for s in schedule {
        if !given.iter().any(|g| g.key == s.key) {
            settings.push(s.clone());
        }
    }
    settings.extend(given.iter().cloned());
    (settings, notes)
}

/// In test.json (`settings.args`) as the flag's own `KEY=VALUE`.
impl serde::Serialize for Setting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Setting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Setting, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

/// The four-letter words the servers answer; `srvr`/`stat`/`mntr` are enough to look at a
/// server by hand (`echo srvr | nc HOST PORT`), the controller itself uses the AdminServer.
pub const FOUR_LETTER_WORDS: &str = "srvr,stat,mntr,ruok";

/// The `zoo.cfg` of server `me` in `servers`, with its data under `data_dir` and the user's
/// `extra` lines last; `reconfig`: for a run that changes the membership (see `membership`).
pub fn zoo_cfg(
    me: &Server,
    servers: &[Server],
    timing: Timing,
    data_dir: &Path,
    extra: &[Setting],
    reconfig: bool,
) -> String {
    let mut cfg = String::new();
    // Writing to a String cannot fail.
    let mut line = |s: String| {
        let _ = writeln!(cfg, "{s}");
    };
    line("# Written by fle-chaos for one run; every server of the run has its own copy.".into());
    line(format!("tickTime={}", timing.tick_ms));
    line(format!("initLimit={}", timing.init_limit));
    line(format!("syncLimit={}", timing.sync_limit));
    line(format!("dataDir={}", data_dir.display()));
    line(format!("clientPort={}", me.ports.client));
    line(format!("clientPortAddress={}", me.host));
    for s in servers {
        line(super::membership::server_line(s, reconfig));
    }
    if me.observer {
        line("peerType=observer".into());
    }
    // A normal ensemble: a lone server must not fall back to standalone mode, which would
    // make it a leader of nobody.
    line("standaloneEnabled=false".into());
    line("admin.enableServer=true".into());
    line(format!("admin.serverAddress={}", me.host));
    line(format!("admin.serverPort={}", me.ports.admin));
    if reconfig {
        let word = super::membership::CONF_WORD;
        line(format!("4lw.commands.whitelist={FOUR_LETTER_WORDS},{word}"));
        super::membership::ZOO_CFG_LINES
            .iter()
            .for_each(|l| line(l.to_string()));
    } else {
        line(format!("4lw.commands.whitelist={FOUR_LETTER_WORDS}"));
    }
    // The default preallocates 64 MB per transaction log; runs are short, folders should be too.
    line("preAllocSize=1024".into());
    // Many sessions come and go across kills; the default of 60 per client address is the
    // controller's only limit.
    line("maxClientCnxns=0".into());
    if !extra.is_empty() {
        line("# --zookeeper-config".into());
        for e in extra {
            line(e.to_string());
        }
    }
    cfg
}

/// The `myid` file's contents (ZooKeeper reads the sid from it, in dataDir).
pub fn myid(sid: u64) -> String {
    format!("{sid}\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn defaults_give_way_to_the_schedule_and_the_command_line() {
        let set = |s: &str| s.parse::<Setting>().unwrap();
        let (all, notes) = with_defaults(&[], &[set("snapshotSizeFactor=-1")]);
        let shown: Vec<String> = all.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            shown,
            ["snapshot.trust.empty=true", "snapshotSizeFactor=-1"]
        );
        assert!(
            notes[0].starts_with("snapshot.trust.empty=true by default"),
            "{notes:?}"
        );
        // The schedule aimed at the start-up snapshot bug turns the default off...
        let off = [set("snapshot.trust.empty=false")];
        let (all, notes) = with_defaults(&off, &[]);
        assert_eq!(all, off.to_vec());
        assert!(notes.is_empty());
        // ... and the command line has the last word.
        let (all, _) = with_defaults(&off, &[set("snapshot.trust.empty=true")]);
        assert_eq!(all, vec![set("snapshot.trust.empty=true")]);
    }

    use super::*;
    use std::net::Ipv4Addr;

    fn server(sid: u64, last: u8, base: u16) -> Server {
        Server {
            sid,
            host: IpAddr::V4(Ipv4Addr::new(10, 1, 2, last)),
            ports: Ports {
                client: base,
                quorum: base + 1,
                election: base + 2,
                admin: base + 3,
            },
            observer: false,
        }
    }

    #[test]
    fn ensemble_lines_name_every_server_with_its_own_ports() {
        let servers = vec![
            server(1, 11, 2181),
            server(2, 12, 3181),
            server(3, 13, 4181),
        ];
        let timing = Timing {
            tick_ms: 200,
            init_limit: 10,
            sync_limit: 5,
        };
        let extra: Vec<Setting> = vec!["snapshotSizeFactor=-1".parse().unwrap()];
        let cfg = zoo_cfg(
            &servers[1],
            &servers,
            timing,
            Path::new("/r/nodes/n2/data"),
            &extra,
            false,
        );
        let lines: Vec<&str> = cfg.lines().collect();
        for want in [
            "tickTime=200",
            "initLimit=10",
            "syncLimit=5",
            "dataDir=/r/nodes/n2/data",
            "clientPort=3181",
            "clientPortAddress=10.1.2.12",
            "server.1=10.1.2.11:2182:2183",
            "server.2=10.1.2.12:3182:3183",
            "server.3=10.1.2.13:4182:4183",
            "standaloneEnabled=false",
            "admin.serverAddress=10.1.2.12",
            "admin.serverPort=3184",
            "4lw.commands.whitelist=srvr,stat,mntr,ruok",
        ] {
            assert!(lines.contains(&want), "missing `{want}` in:\n{cfg}");
        }
        assert_eq!(lines.iter().filter(|l| l.starts_with("server.")).count(), 3);
        assert_eq!(lines.last(), Some(&"snapshotSizeFactor=-1"));
        assert!(!cfg.contains("reconfigEnabled"), "{cfg}");
        // A run that reconfigures: dynamic server lines, reconfig on, and `conf` answered.
        let cfg = zoo_cfg(&servers[1], &servers, timing, Path::new("/d"), &[], true);
        let lines: Vec<&str> = cfg.lines().collect();
        for want in [
            "server.1=10.1.2.11:2182:2183:participant;10.1.2.11:2181",
            "reconfigEnabled=true",
            "skipACL=yes",
            "4lw.commands.whitelist=srvr,stat,mntr,ruok,conf",
        ] {
            assert!(lines.contains(&want), "missing `{want}` in:\n{cfg}");
        }
    }

    #[test]
    fn a_user_setting_is_one_line_and_never_one_the_run_writes() {
        let s: Setting = " fastleader.maxNotificationInterval = 5000 "
            .parse()
            .unwrap();
        assert_eq!(s.to_string(), "fastleader.maxNotificationInterval=5000");
        for (bad, says) in [
            ("snapshotSizeFactor", "KEY=VALUE"),
            ("=1", "a zoo.cfg key"),
            ("a b=1", "a zoo.cfg key"),
            ("x=1\ny=2", "one line"),
            ("tickTime=100", "--tick-ms"),
            ("dataDir=/tmp", "data folder"),
            ("server.9=h:1:2", "ensemble"),
            ("admin.serverPort=1", "ensemble"),
        ] {
            let e = bad.parse::<Setting>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn myid_is_the_sid_on_one_line() {
        assert_eq!(myid(7), "7\n");
    }
}
