//! Starts real `fle-node` clusters on loopback for tests and the benchmark.
//!
//! Ports come from `free_ports` (never one handed out before in this process), data dirs live in
//! a temp dir, and Drop SIGKILLs every process this cluster started, so nothing is left behind
//! when a test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod blackhole;
/// Skipped tests, said and listed as the controller's tests do (one module for both).
#[path = "../../../../tests/it/support/skip.rs"]
pub mod skip;

pub const NODE_BIN: &str = env!("CARGO_BIN_EXE_fle-node");

/// The fle-node binary to run: `FLC_NODE_BIN` (e.g. an older build, for before/after figures)
/// or the one cargo built.
pub fn node_bin() -> String {
    std::env::var("FLC_NODE_BIN").unwrap_or_else(|_| NODE_BIN.to_string())
}

#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub sid: u64,
    /// Where its server ports listen and its outgoing peer connections come from.
    pub host: String,
    pub quorum_port: u16,
    pub election_port: u16,
    pub admin_port: u16,
    pub data_dir: PathBuf,
    pub config: PathBuf,
    pub log: PathBuf,
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub nodes: BTreeMap<u64, NodeSpec>,
    procs: BTreeMap<u64, Child>,
    pub extra_args: Vec<String>,
    /// Environment for the processes started from now on (e.g. libfaketime's).
    pub extra_env: Vec<(String, String)>,
    /// tickTime in ms (100 unless `set_tick` changed it).
    pub tick_ms: u64,
    /// Servers written as `:observer` (none unless `set_observers` named some).
    pub observers: BTreeSet<u64>,
}

/// Ports that are free now (all held until every one is chosen), never one this process handed
/// out before: every test of the binary runs beside every other, and a port released by one
/// test's `free_ports` is free again until its node binds it. They are drawn below the
/// kernel's ephemeral range (32768+): a port the kernel hands out is also what other tests'
/// outgoing connections and `bind(0)`s get, so one could be taken between here and the node's
/// own bind; a random port below that range is only ever taken by another explicit choice.
pub fn free_ports(n: usize) -> Vec<u16> {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let mut held: Vec<TcpListener> = Vec::new();
    while held.len() < n {
        let port = 20_000 + (rand::random::<u16>() % 12_000);
        if handed_out.contains(&port) {
            continue;
        }
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
            handed_out.insert(port);
            held.push(l);
        }
    }
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

impl Cluster {
    /// Writes configs for `n` servers (tickTime 100 ms, initLimit 10, syncLimit 5).
    pub fn new(n: u64) -> Cluster {
        Cluster::with_hosts(n, |_| "127.0.0.1".to_string())
    }

    /// As `new`, with server ports on `host(sid)` (the HTTP API stays on 127.0.0.1).
    pub fn with_hosts(n: u64, host: impl Fn(u64) -> String) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("flc-node-test-")
            .tempdir()
            .unwrap();
        let ports = free_ports(3 * n as usize);
        let mut nodes = BTreeMap::new();
        for sid in 1..=n {
            let i = 3 * (sid - 1) as usize;
            let data_dir = dir.path().join(format!("n{sid}"));
            std::fs::create_dir_all(&data_dir).unwrap();
            std::fs::write(data_dir.join("myid"), format!("{sid}\n")).unwrap();
            nodes.insert(
                sid,
                NodeSpec {
                    sid,
                    host: host(sid),
                    quorum_port: ports[i],
                    election_port: ports[i + 1],
                    admin_port: ports[i + 2],
                    config: dir.path().join(format!("zoo{sid}.cfg")),
                    log: dir.path().join(format!("n{sid}.log")),
                    data_dir,
                },
            );
        }
        let c = Cluster {
            dir,
            nodes,
            procs: BTreeMap::new(),
            extra_args: Vec::new(),
            extra_env: Vec::new(),
            tick_ms: 100,
            observers: BTreeSet::new(),
        };
        c.write_configs();
        c
    }

    /// Points server `sid`'s election port elsewhere (e.g. at a blackhole) in every config.
    pub fn set_election_port(&mut self, sid: u64, port: u16) {
        self.nodes.get_mut(&sid).unwrap().election_port = port;
        self.write_configs();
    }

    /// Makes these servers observers in every config (before they start).
    pub fn set_observers(&mut self, observers: &[u64]) {
        self.observers = observers.iter().copied().collect();
        self.write_configs();
    }

    /// Sets tickTime for every server (before they start).
    pub fn set_tick(&mut self, ms: u64) {
        self.tick_ms = ms;
        self.write_configs();
    }

    /// Server `sid`'s `server.N=host:quorumPort:electionPort[:observer];127.0.0.1:adminPort`
    /// line (`;host:port` is the HTTP API: followers forward writes there).
    pub fn server_line(&self, sid: u64) -> String {
        let s = &self.nodes[&sid];
        let kind = if self.observers.contains(&sid) {
            ":observer"
        } else {
            ""
        };
        format!(
            "server.{}={}:{}:{}{kind};127.0.0.1:{}",
            s.sid, s.host, s.quorum_port, s.election_port, s.admin_port
        )
    }

    fn write_configs(&self) {
        let all: Vec<u64> = self.nodes.keys().copied().collect();
        for &sid in &all {
            self.write_config_listing(sid, &all);
        }
    }

    /// Writes server `sid`'s zoo.cfg listing only the servers `members` (a reconfig test's
    /// first ensemble, or a joiner that knows the ensemble and itself).
    pub fn write_config_listing(&self, sid: u64, members: &[u64]) {
        let servers: String = members
            .iter()
            .map(|&m| format!("{}\n", self.server_line(m)))
            .collect();
        let s = &self.nodes[&sid];
        let mut cfg = format!(
            "tickTime={}\ninitLimit=10\nsyncLimit=5\ndataDir={}\n{servers}\
             admin.serverAddress=127.0.0.1\nadmin.serverPort={}\n",
            self.tick_ms,
            s.data_dir.display(),
            s.admin_port
        );
        if self.observers.contains(&s.sid) {
            cfg.push_str("peerType=observer\n");
        }
        std::fs::write(&s.config, cfg).unwrap();
    }

    /// Writes a durable history into server `sid`'s dataDir before it starts: txns with the
    /// given zxids (values "z<zxid>"), committed up to `committed`, epochs as the last zxid's.
    pub fn seed_log(&self, sid: u64, zxids: &[u64], committed: u64) {
        use fle_node::txnlog::Txn;
        use fle_node::zab::Store;
        let (mut s, _) = Store::open(&self.nodes[&sid].data_dir).unwrap();
        let epoch = zxids.last().map(|z| z >> 32).unwrap_or(0);
        s.set_accepted_epoch(epoch).unwrap();
        s.set_current_epoch(epoch).unwrap();
        let txns: Vec<Txn> = zxids
            .iter()
            .map(|&zxid| Txn {
                zxid,
                value: serde_json::json!(format!("z{zxid:#x}")),
            })
            .collect();
        s.log_mut().append(&txns).unwrap();
        s.log_mut().commit(committed).unwrap();
        s.log().sync().unwrap();
    }

    /// `POST /write {"value": v}` to server `sid`: (HTTP status, body); None when unreachable.
    pub fn write(&self, sid: u64, value: Value) -> Option<(u16, Value)> {
        let body = serde_json::json!({ "value": value }).to_string();
        http_request(self.nodes[&sid].admin_port, "POST", "/write", &body)
    }

    /// Server `sid`'s committed log: [(zxid, value)].
    pub fn log_entries(&self, sid: u64) -> Option<Vec<(u64, Value)>> {
        let l = self.get(sid, "/log?from=0")?;
        l["entries"]
            .as_array()?
            .iter()
            .map(|e| Some((e["zxid"].as_u64()?, e["value"].clone())))
            .collect()
    }

    pub fn start(&mut self, sid: u64) {
        assert!(!self.procs.contains_key(&sid), "n{sid} already running");
        let spec = &self.nodes[&sid];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)
            .unwrap();
        let child = Command::new(node_bin())
            .arg("--config")
            .arg(&spec.config)
            .args(&self.extra_args)
            .envs(self.extra_env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start fle-node");
        self.procs.insert(sid, child);
    }

    /// Hands a running process over to the caller (who must reap it).
    pub fn take_process(&mut self, sid: u64) -> Option<Child> {
        self.procs.remove(&sid)
    }

    pub fn pid(&self, sid: u64) -> Option<u32> {
        self.procs.get(&sid).map(|c| c.id())
    }

    /// SIGKILL, then reap (and remove the /dev/shm pair libfaketime leaves when a process it
    /// is preloaded into is killed).
    pub fn kill(&mut self, sid: u64) {
        if let Some(mut c) = self.procs.remove(&sid) {
            let start = fle_chaos::control::backend::registry::process_start_time(c.id());
            let _ = c.kill();
            let _ = c.wait();
            if let Some(start) = start {
                fle_chaos::control::fault::faketime_shm::remove_pair_of(c.id(), start);
            }
        }
    }

    /// True while the process has not exited.
    pub fn alive(&mut self, sid: u64) -> bool {
        match self.procs.get_mut(&sid) {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    pub fn status(&self, sid: u64) -> Option<Value> {
        http_get_json(self.nodes[&sid].admin_port, "/status")
    }

    pub fn get(&self, sid: u64, path: &str) -> Option<Value> {
        http_get_json(self.nodes[&sid].admin_port, path)
    }

    /// (state, leader) as a node reports it.
    pub fn role(&self, sid: u64) -> Option<(String, Option<u64>)> {
        let s = self.status(sid)?;
        Some((s["state"].as_str()?.to_string(), s["leader"].as_u64()))
    }

    /// The leader that a quorum of the whole cluster (reading only `among`) agrees on, with
    /// the leader itself LEADING among them.
    pub fn quorum_leader(&self, among: &[u64]) -> Option<u64> {
        let statuses: Vec<fle_node::api::NodeStatus> = among
            .iter()
            .filter_map(|&s| serde_json::from_value(self.status(s)?).ok())
            .collect();
        let voters = self.nodes.len() - self.observers.len();
        fle_chaos::history::view::quorum_leader_of(&statuses, voters).map(|l| l.0)
    }

    /// Polls `cond` until it holds or `limit` passes; on timeout panics with every node's
    /// status and log tail.
    pub fn wait_for<T>(
        &self,
        limit: Duration,
        what: &str,
        mut cond: impl FnMut(&Cluster) -> Option<T>,
    ) -> T {
        let end = Instant::now() + limit;
        loop {
            if let Some(v) = cond(self) {
                return v;
            }
            if Instant::now() >= end {
                panic!(
                    "timed out after {limit:?} waiting for {what}\n{}",
                    self.describe()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn describe(&self) -> String {
        let mut out = String::new();
        for sid in self.nodes.keys() {
            out.push_str(&format!("--- n{sid} status: {:?}\n", self.status(*sid)));
            let log = std::fs::read_to_string(&self.nodes[sid].log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            for l in tail.iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    pub fn log_of(&self, sid: u64) -> String {
        std::fs::read_to_string(&self.nodes[&sid].log).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let sids: Vec<u64> = self.procs.keys().copied().collect();
        for sid in sids {
            self.kill(sid);
        }
        // For post-mortems: FLC_KEEP_NODE_LOGS=1 keeps configs, data dirs and logs.
        if std::env::var_os("FLC_KEEP_NODE_LOGS").is_some() {
            self.dir.disable_cleanup(true);
            eprintln!("kept node files in {}", self.dir.path().display());
        }
    }
}

/// A minimal HTTP/1.0 GET (no client runtime needed in tests); None on any failure.
pub fn http_get_json(port: u16, path: &str) -> Option<Value> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let (head, body) = buf.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    serde_json::from_str(body).ok()
}

/// One HTTP/1.0 request: (status code, JSON body); None when unreachable or unreadable.
pub fn http_request(port: u16, method: &str, path: &str, body: &str) -> Option<(u16, Value)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let (head, body) = buf.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, serde_json::from_str(body).ok()?))
}

/// Resident memory of a process, from /proc.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status =
        std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A private network namespace for the calling thread (and the nodes it starts), where
/// partitions are routing rules: traffic between two cut addresses is routed into a veth whose
/// peer is down, so it vanishes silently like a firewall's DROP (this host has no iptables).
/// Everything lives and dies with the namespace: nothing is left on the host.
pub struct PrivateNet {
    /// The addresses handed out, by sid.
    pub hosts: BTreeMap<u64, String>,
    cuts: Vec<(u64, u64)>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl PrivateNet {
    /// Moves THIS thread into a new network namespace with `10.77.0.<sid>` for sids 1..=n on
    /// its loopback. Err (with why) when namespaces are not available (not root).
    pub fn enter(n: u64) -> Result<PrivateNet, String> {
        // SAFETY: unshare only changes this thread's namespace; no memory is involved.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(format!(
                "unshare(CLONE_NEWNET): {}",
                std::io::Error::last_os_error()
            ));
        }
        ip(&["link", "set", "lo", "up"])?;
        ip(&[
            "link", "add", "flcdrop", "type", "veth", "peer", "name", "flcdrop1",
        ])?;
        ip(&["link", "set", "flcdrop", "up"])?;
        // Cut rules must come before the local table, which otherwise answers first.
        ip(&["rule", "add", "pref", "100", "lookup", "local"])?;
        ip(&["rule", "del", "pref", "0"])?;
        let mut hosts = BTreeMap::new();
        for sid in 1..=n {
            let host = format!("10.77.0.{sid}");
            ip(&["addr", "add", &format!("{host}/32"), "dev", "lo"])?;
            let table = (1000 + sid).to_string();
            ip(&[
                "route",
                "add",
                &format!("{host}/32"),
                "dev",
                "flcdrop",
                "table",
                &table,
            ])?;
            hosts.insert(sid, host);
        }
        Ok(PrivateNet {
            hosts,
            cuts: Vec::new(),
        })
    }

    /// Drops everything from `a` to `b` (one way); a cut already in place stays as it is.
    pub fn cut(&mut self, a: u64, b: u64) {
        if self.cuts.contains(&(a, b)) {
            return;
        }
        self.rule("add", a, b);
        self.cuts.push((a, b));
    }

    /// Adds or deletes the rule that routes `a`'s traffic to `b` into `b`'s dead table.
    fn rule(&self, verb: &str, a: u64, b: u64) {
        let table = (1000 + b).to_string();
        ip(&[
            "rule",
            verb,
            "pref",
            "10",
            "from",
            &self.hosts[&a],
            "to",
            &self.hosts[&b],
            "lookup",
            &table,
        ])
        .unwrap();
    }

    /// Cuts `sid` off from every other server, both ways.
    pub fn isolate(&mut self, sid: u64) {
        let others: Vec<u64> = self.hosts.keys().copied().filter(|&s| s != sid).collect();
        for o in others {
            self.cut(sid, o);
            self.cut(o, sid);
        }
    }

    /// Removes every cut.
    pub fn heal(&mut self) {
        for (a, b) in std::mem::take(&mut self.cuts) {
            self.rule("del", a, b);
        }
    }
}
