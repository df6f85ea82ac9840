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
}

/// The timing every server shares, the same knobs fle-node takes.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub tick_ms: u64,
    pub init_limit: u32,
    pub sync_limit: u32,
}

/// The four-letter words the servers answer; `srvr`/`stat`/`mntr` are enough to look at a
/// server by hand (`echo srvr | nc HOST PORT`), the controller itself uses the AdminServer.
pub const FOUR_LETTER_WORDS: &str = "srvr,stat,mntr,ruok";

/// The `zoo.cfg` of server `me` in `servers`, with its data under `data_dir`.
pub fn zoo_cfg(me: &Server, servers: &[Server], timing: Timing, data_dir: &Path) -> String {
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
        line(format!(
            "server.{}={}:{}:{}",
            s.sid, s.host, s.ports.quorum, s.ports.election
        ));
    }
    // A normal ensemble: a lone server must not fall back to standalone mode, which would
    // make it a leader of nobody.
    line("standaloneEnabled=false".into());
    line("admin.enableServer=true".into());
    line(format!("admin.serverAddress={}", me.host));
    line(format!("admin.serverPort={}", me.ports.admin));
    line(format!("4lw.commands.whitelist={FOUR_LETTER_WORDS}"));
    // The default preallocates 64 MB per transaction log; runs are short, folders should be too.
    line("preAllocSize=1024".into());
    // Many sessions come and go across kills; the default of 60 per client address is the
    // controller's only limit.
    line("maxClientCnxns=0".into());
    cfg
}

/// The `myid` file's contents (ZooKeeper reads the sid from it, in dataDir).
pub fn myid(sid: u64) -> String {
    format!("{sid}\n")
}

#[cfg(test)]
mod tests {
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
        let cfg = zoo_cfg(&servers[1], &servers, timing, Path::new("/r/nodes/n2/data"));
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
    }

    #[test]
    fn myid_is_the_sid_on_one_line() {
        assert_eq!(myid(7), "7\n");
    }
}
