//! Wire compatibility (issue 18): fle-node as server 3 of an ensemble with two real ZooKeeper
//! 3.8 servers (Debian's package, started as the ZooKeeper target starts them). The election
//! interoperates: ZooKeeper decodes fle-node's notifications and all three agree on one leader
//! (ZooKeeper's AdminServer and fle-node's `/status`). Zab does not (different framing), so
//! fle-node's following fails at once, again and again: it must back off (few log lines, little
//! CPU) instead of spinning. A reconfig ZooKeeper commits reaches fle-node in ZooKeeper's
//! notifications. Skipped when java or the zookeeper package is missing.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{free_ports, http_get_json, node_bin};
use fle_chaos::control::sut::zookeeper::launch::{jvm_args, JvmOptions, CLASSPATH};

/// Kills (SIGKILL) and reaps every process it holds, on every exit path.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    n(11) + n(12)
}

/// Who runs a server of a mixed ensemble.
#[derive(Clone, Copy, PartialEq)]
enum Impl {
    Fle,
    ZooKeeper,
}

/// A running mixed ensemble: server i+1 is `kinds[i]`, an observer when its sid is listed.
struct Ensemble {
    dir: tempfile::TempDir,
    procs: Procs,
    admin: Vec<u16>,
    /// ZooKeeper servers' client ports (None for fle-node's).
    client: Vec<Option<u16>>,
}

impl Ensemble {
    fn start(kinds: &[Impl], observers: &[usize]) -> Ensemble {
        Ensemble::start_with(kinds, observers, "")
    }

    /// `start`, with `zk_lines` added to every ZooKeeper server's zoo.cfg.
    fn start_with(kinds: &[Impl], observers: &[usize], zk_lines: &str) -> Ensemble {
        let n = kinds.len();
        let dir = tempfile::Builder::new()
            .prefix("flc-mixed-")
            .tempdir()
            .unwrap();
        let p = free_ports(3 * n);
        let (quorum, election, admin) = (&p[0..n], &p[n..2 * n], &p[2 * n..3 * n]);
        let servers: String = (0..n)
            .map(|i| {
                let kind = if observers.contains(&(i + 1)) {
                    ":observer"
                } else {
                    ""
                };
                format!(
                    "server.{}=127.0.0.1:{}:{}{kind}\n",
                    i + 1,
                    quorum[i],
                    election[i]
                )
            })
            .collect();
        let mut procs = Procs(Vec::new());
        let mut clients = Vec::new();
        for (i, &admin_port) in admin.iter().enumerate() {
            let sid = i + 1;
            let data = dir.path().join(format!("n{sid}"));
            std::fs::create_dir_all(&data).unwrap();
            std::fs::write(data.join("myid"), format!("{sid}\n")).unwrap();
            let mut cfg = format!(
                "tickTime=200\ninitLimit=10\nsyncLimit=5\ndataDir={}\n{servers}\
                 admin.serverAddress=127.0.0.1\nadmin.serverPort={}\n",
                data.display(),
                admin_port
            );
            if observers.contains(&sid) {
                cfg.push_str("peerType=observer\n");
            }
            let log = std::fs::File::create(dir.path().join(format!("n{sid}.log"))).unwrap();
            let zoo_cfg = data.join("zoo.cfg");
            let mut cmd = if kinds[i] == Impl::Fle {
                clients.push(None);
                std::fs::write(&zoo_cfg, cfg).unwrap();
                let mut c = Command::new(node_bin());
                c.arg("--config").arg(&zoo_cfg);
                c
            } else {
                let client = free_ports(1)[0];
                clients.push(Some(client));
                cfg.push_str(&format!(
                    "clientPort={client}\nclientPortAddress=127.0.0.1\nstandaloneEnabled=false\n\
                     admin.enableServer=true\n{zk_lines}"
                ));
                std::fs::write(&zoo_cfg, cfg).unwrap();
                let mut c = Command::new("java");
                c.args(jvm_args(
                    &JvmOptions::default(),
                    &CLASSPATH.join(":"),
                    &zoo_cfg,
                ));
                c
            };
            let child = cmd
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap();
            procs.0.push(child);
        }
        Ensemble {
            dir,
            procs,
            admin: admin.to_vec(),
            client: clients,
        }
    }

    fn log(&self, sid: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("n{sid}.log"))).unwrap_or_default()
    }

    /// The last lines of every server's log.
    fn describe(&self) -> String {
        (1..=self.admin.len())
            .map(|sid| {
                let t = self.log(sid);
                let lines: Vec<&str> = t.lines().rev().take(8).collect();
                let tail = lines.into_iter().rev().collect::<Vec<_>>().join("\n");
                format!("--- n{sid}\n{tail}\n")
            })
            .collect()
    }
}

/// Whether java and Debian's zookeeper package are here (else the test is skipped, saying so).
fn zookeeper_missing() -> bool {
    let missing = CLASSPATH.iter().any(|j| !Path::new(j).exists())
        || Command::new("java").arg("-version").output().is_err();
    if missing {
        let why = format!(
            "needs java and the zookeeper package ({})",
            CLASSPATH.join(", ")
        );
        crate::support::skip::skip("mixed_zookeeper", &why);
    }
    missing
}

#[test]
fn fle_node_agrees_with_two_zookeepers_on_the_leader_and_backs_off_its_zab() {
    if zookeeper_missing() {
        return;
    }
    let e = Ensemble::start(&[Impl::ZooKeeper, Impl::ZooKeeper, Impl::Fle], &[]);
    let (dir, admin) = (&e.dir, &e.admin);
    let fle_log = dir.path().join("n3.log");
    let fle_pid = e.procs.0[2].id();
    let describe = || e.describe();
    // 1. One leader for all three: ZooKeeper's AdminServer and fle-node's /status agree.
    let end = Instant::now() + Duration::from_secs(90);
    let leader = loop {
        let zk: Vec<(i64, bool)> = admin[..2]
            .iter()
            .filter_map(|&port| {
                let l = http_get_json(port, "/commands/leader")?;
                Some((l["leader_id"].as_i64()?, l["is_leader"].as_bool()?))
            })
            .collect();
        let fle = http_get_json(admin[2], "/status");
        let fle_leader = fle
            .as_ref()
            .and_then(|s| s["last_election"]["leader"].as_i64());
        if zk.len() == 2
            && zk[0].0 == zk[1].0
            && zk[0].0 > 0
            && zk.iter().filter(|z| z.1).count() == 1
            && fle_leader == Some(zk[0].0)
        {
            break zk[0].0;
        }
        assert!(
            Instant::now() < end,
            "no agreed leader within 90 s\n{}",
            describe()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let zk_log = std::fs::read_to_string(dir.path().join("n1.log")).unwrap();
    assert!(
        zk_log.contains("n.sid:3"),
        "ZooKeeper never decoded a notification from fle-node\n{}",
        describe()
    );
    eprintln!("all three agree: leader {leader}");

    // 2. fle-node's Zab cannot follow ZooKeeper's: it must back off, not spin.
    let lines = |p: &Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let (l0, c0, t0) = (lines(&fle_log), cpu_ticks(fle_pid), Instant::now());
    std::thread::sleep(Duration::from_secs(15));
    let (l1, c1) = (lines(&fle_log), cpu_ticks(fle_pid));
    let secs = t0.elapsed().as_secs_f64();
    // Clock ticks are 1/100 s on Linux.
    let cpu = (c1 - c0) as f64 / 100.0 / secs;
    eprintln!(
        "fle-node over {secs:.0} s: {} log lines, {:.1}% CPU",
        l1 - l0,
        cpu * 100.0
    );
    assert!(
        l1 - l0 < 60,
        "{} log lines in 15 s\n{}",
        l1 - l0,
        describe()
    );
    assert!(cpu < 0.05, "fle-node used {:.1}% CPU", cpu * 100.0);
    let log = std::fs::read_to_string(&fle_log).unwrap();
    if leader != 3 {
        assert!(log.contains("backing off"), "{}", describe());
    }
}

/// Observers across implementations: voters fle-node n1 and ZooKeeper n2, n3; observers
/// ZooKeeper n4 and fle-node n5. Each observer learns the voters' leader from the other
/// implementation's notices: ZooKeeper decodes fle-node's observer notification (its empty
/// vote) and answers it, fle-node's voter answers ZooKeeper's observer, and neither observer is
/// ever counted.
#[test]
fn observers_of_both_implementations_learn_the_leader_across_the_wire() {
    if zookeeper_missing() {
        return;
    }
    let e = Ensemble::start(
        &[
            Impl::Fle,
            Impl::ZooKeeper,
            Impl::ZooKeeper,
            Impl::ZooKeeper,
            Impl::Fle,
        ],
        &[4, 5],
    );
    let end = Instant::now() + Duration::from_secs(90);
    loop {
        // ZooKeeper n3 leads (equal logs: the largest voter sid), n2 follows, n4 observes it
        // through Zab; fle-node's observer n5 decided OBSERVING for n3 (its Zab cannot follow).
        let zk = |port: u16| {
            let l = http_get_json(port, "/commands/leader")?;
            Some((l["leader_id"].as_i64()?, l["is_leader"].as_bool()?))
        };
        let fle_observer = http_get_json(e.admin[4], "/status");
        let decided = fle_observer.as_ref().map(|s| {
            (
                s["last_election"]["leader"].as_i64(),
                s["peer_type"].clone(),
            )
        });
        let observed = e.log(5).contains("state=\"OBSERVING\"");
        if zk(e.admin[2]) == Some((3, true))
            && zk(e.admin[1]) == Some((3, false))
            && zk(e.admin[3]) == Some((3, false))
            && decided == Some((Some(3), serde_json::json!("observer")))
            && observed
        {
            break;
        }
        assert!(
            Instant::now() < end,
            "no agreement within 90 s\n{}",
            e.describe()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Its decision counted n3's own LEADING answer: ZooKeeper decoded the observer's notice
    // (it logs only the notices it counts, so its log cannot show it).
    let s = http_get_json(e.admin[4], "/status").unwrap_or_default();
    let votes = s["last_election"]["votes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        votes
            .iter()
            .any(|v| v["sid"] == 3 && v["state"] == "LEADING"),
        "fle-node's observer decided without ZooKeeper's answer: {s}\n{}",
        e.describe()
    );
    assert!(
        e.log(4).contains("n.sid:1"),
        "ZooKeeper's observer never heard fle-node's voter\n{}",
        e.describe()
    );
    // fle-node's voter decided, on voters' votes only.
    let s = http_get_json(e.admin[0], "/status").unwrap_or_default();
    let counted: Vec<u64> = (s["last_election"]["votes"].as_array().into_iter().flatten())
        .filter_map(|v| v["sid"].as_u64())
        .collect();
    assert!(
        !counted.is_empty() && counted.iter().all(|&v| v < 4),
        "n1 counted {counted:?}: {s}"
    );
}

/// Reconfig across the wire: ZooKeeper n1 and n2 remove fle-node n3 with ZooKeeper's own
/// `reconfig` (its CLI), and fle-node, LOOKING beside them, learns the new config from their
/// notifications: its `/status` shows the version ZooKeeper wrote its dynamic file under, and
/// the voters without itself.
#[test]
fn fle_node_learns_a_zookeeper_reconfig_from_its_notifications() {
    if zookeeper_missing() {
        return;
    }
    let e = Ensemble::start_with(
        &[Impl::ZooKeeper, Impl::ZooKeeper, Impl::Fle],
        &[],
        "reconfigEnabled=true\nskipACL=yes\n",
    );
    // ZooKeeper's two servers serve (a quorum of three: fle-node's Zab cannot follow).
    let serving = |port: u16| {
        http_get_json(port, "/commands/leader").is_some_and(|l| l["leader_id"].as_i64() > Some(0))
    };
    let end = Instant::now() + Duration::from_secs(90);
    while !(serving(e.admin[0]) && serving(e.admin[1])) {
        assert!(
            Instant::now() < end,
            "ZooKeeper never served\n{}",
            e.describe()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let client = e.client[0].expect("n1 is ZooKeeper's");
    let server = format!("127.0.0.1:{client}");
    let cli = Command::new("java")
        .args([
            "-cp",
            &CLASSPATH.join(":"),
            "org.apache.zookeeper.ZooKeeperMain",
        ])
        .args(["-server", &server, "reconfig", "-remove", "3"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&cli.stdout).into_owned();
    // ZooKeeper wrote the committed config under its version: zoo.cfg.dynamic.<hex>.
    let end = Instant::now() + Duration::from_secs(30);
    let version = loop {
        let newest = std::fs::read_dir(e.dir.path().join("n1"))
            .unwrap()
            .filter_map(|f| {
                let name = f.ok()?.file_name().into_string().ok()?;
                u64::from_str_radix(name.strip_prefix("zoo.cfg.dynamic.")?, 16).ok()
            })
            .max();
        if let Some(newest) = newest {
            let file = e.dir.path().join(format!("n1/zoo.cfg.dynamic.{newest:x}"));
            let config = std::fs::read_to_string(file).unwrap_or_default();
            if !config.contains("server.3=") {
                break newest;
            }
        }
        assert!(
            Instant::now() < end,
            "ZooKeeper did not commit the removal: {said}\n{}",
            e.describe()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let s = http_get_json(e.admin[2], "/status").unwrap_or_default();
        let config = &s["config"];
        if config["version"].as_u64() == Some(version) {
            assert_eq!(config["voters"], serde_json::json!([1, 2]), "{s}");
            assert_eq!(s["state"], "LOOKING", "a removed server stays LOOKING: {s}");
            break;
        }
        assert!(
            Instant::now() < end,
            "fle-node never took ZooKeeper's config {version:#x}: {s}\n{}",
            e.describe()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
