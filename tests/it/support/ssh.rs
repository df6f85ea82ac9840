//! Fake VMs for the SSH tests: each "VM" is a network namespace (`flcs<suffix><i>`) on a private
//! 172.x.y.0/24 that no other address on this machine uses, joined by a bridge, running its own
//! sshd (Debian's openssh-server) on its own address with a host key, and accepting a client key,
//! both made for the test in a temp dir. Everything is removed on drop, also when a test panics:
//! sshd killed by pid, namespaces, bridge, the subnet claim, the temp dir.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct FakeVms {
    pub dir: tempfile::TempDir,
    pub subnet: (u8, u8),
    pub vms: Vec<Vm>,
    pub bridge: Option<String>,
    pub suffix: String,
    claim: Option<PathBuf>,
    /// A key the hosts accept, one they do not, and an ssh_config that uses the first with a
    /// known_hosts file holding the hosts' real keys (strict checking works with it).
    pub client_key: PathBuf,
    pub wrong_key: PathBuf,
    pub ssh_config: PathBuf,
}

pub struct Vm {
    pub netns: String,
    pub addr: Ipv4Addr,
    sshd: Option<Child>,
}

impl Vm {
    pub fn sshd_pid(&self) -> Option<u32> {
        self.sshd.as_ref().map(|c| c.id())
    }
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "`{program} {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn output(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// True when we may build fake VMs; otherwise prints why the test is skipped.
pub fn can_run(test: &str) -> bool {
    if !fle_chaos::control::is_root() {
        super::skip::skip(test, "needs root (network namespaces, sshd, iptables)");
        return false;
    }
    ensure_sshd();
    true
}

/// Installs Debian's openssh-server when sshd is missing (services are not started by it here:
/// the test starts its own sshd per namespace).
fn ensure_sshd() {
    if Path::new("/usr/sbin/sshd").exists() {
        return;
    }
    eprintln!("installing openssh-server for the SSH tests (apt-get)");
    let install = |update: bool| {
        if update {
            let _ = Command::new("apt-get").args(["update", "-qq"]).status();
        }
        Command::new("apt-get")
            .args([
                "install",
                "-y",
                "-qq",
                "--no-install-recommends",
                "openssh-server",
            ])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !install(false) {
        install(true);
    }
    assert!(
        Path::new("/usr/sbin/sshd").exists(),
        "openssh-server could not be installed; run `apt-get install -y openssh-server`"
    );
}

impl FakeVms {
    /// `n` fake VMs with sshd listening on port 22 of their own address.
    pub fn create(n: usize) -> FakeVms {
        let dir = tempfile::Builder::new()
            .prefix("flc-ssh-")
            .tempdir()
            .unwrap();
        let suffix = format!("{:05x}", rand::random::<u32>() & 0xfffff);
        let client_key = dir.path().join("client_key");
        let wrong_key = dir.path().join("wrong_key");
        let ssh_config = dir.path().join("ssh_config");
        let mut vms = FakeVms {
            dir,
            subnet: (0, 0),
            vms: Vec::new(),
            bridge: None,
            suffix,
            claim: None,
            client_key,
            wrong_key,
            ssh_config,
        };
        // From here on, whatever exists is in `vms`, so a panic's drop removes it.
        let (subnet, claim) = super::fixture::claim_subnet();
        vms.subnet = subnet;
        vms.claim = Some(claim);
        super::fixture::keygen(&vms.client_key);
        super::fixture::keygen(&vms.wrong_key);
        let authorized = vms.dir.path().join("authorized_keys");
        std::fs::copy(vms.client_key.with_extension("pub"), &authorized).unwrap();
        let bridge = format!("flcsb{}", vms.suffix);
        vms.bridge = Some(bridge.clone());
        run("ip", &["link", "add", &bridge, "type", "bridge"]);
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}/24", vms.gateway()),
                "dev",
                &bridge,
            ],
        );
        run("ip", &["link", "set", &bridge, "up"]);
        // sshd insists on its privilege separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let mut known_hosts = String::new();
        for i in 0..n {
            let ns = format!("flcs{}{}", vms.suffix, i + 1);
            let addr = vms.addr(i);
            vms.vms.push(Vm {
                netns: ns.clone(),
                addr,
                sshd: None,
            });
            run("ip", &["netns", "add", &ns]);
            let veth = format!("flcsv{}{}", vms.suffix, i + 1);
            run(
                "ip",
                &[
                    "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
                ],
            );
            run("ip", &["link", "set", &veth, "master", &bridge, "up"]);
            run("ip", &["-n", &ns, "link", "set", "lo", "up"]);
            run(
                "ip",
                &[
                    "-n",
                    &ns,
                    "addr",
                    "add",
                    &format!("{addr}/24"),
                    "dev",
                    "eth0",
                ],
            );
            run("ip", &["-n", &ns, "link", "set", "eth0", "up"]);
            run(
                "ip",
                &[
                    "-n",
                    &ns,
                    "route",
                    "add",
                    "default",
                    "via",
                    &vms.gateway().to_string(),
                ],
            );
            let host_key = vms.dir.path().join(format!("host_key_{}", i + 1));
            super::fixture::keygen(&host_key);
            let pubkey = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
            let mut words = pubkey.split_whitespace();
            known_hosts.push_str(&format!(
                "{addr} {} {}\n",
                words.next().unwrap(),
                words.next().unwrap()
            ));
            let config = vms.dir.path().join(format!("sshd_config_{}", i + 1));
            std::fs::write(
                &config,
                format!(
                    "ListenAddress {addr}\nPort 22\nHostKey {}\nPidFile none\n\
                     AuthorizedKeysFile {}\nStrictModes no\nUsePAM no\n\
                     PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                     PubkeyAuthentication yes\nPermitRootLogin prohibit-password\n\
                     MaxSessions 64\nMaxStartups 64\nLogLevel ERROR\n",
                    host_key.display(),
                    authorized.display()
                ),
            )
            .unwrap();
            let log =
                std::fs::File::create(vms.dir.path().join(format!("sshd_{}.log", i + 1))).unwrap();
            let child = Command::new("ip")
                .args(["netns", "exec", &ns, "/usr/sbin/sshd", "-D", "-e", "-f"])
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("cannot start sshd");
            vms.vms[i].sshd = Some(child);
        }
        super::fixture::write_ssh_config(
            &vms.ssh_config,
            vms.dir.path(),
            &vms.client_key,
            &known_hosts,
        );
        for i in 0..n {
            vms.wait_for_sshd(i);
        }
        vms
    }

    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(172, self.subnet.0, self.subnet.1, 1)
    }

    pub fn addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(172, self.subnet.0, self.subnet.1, 11 + i as u8)
    }

    /// An address in the subnet where nothing listens.
    pub fn unused_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(172, self.subnet.0, self.subnet.1, 99)
    }

    pub fn hosts(&self) -> Vec<String> {
        self.vms.iter().map(|v| v.addr.to_string()).collect()
    }

    fn wait_for_sshd(&mut self, i: usize) {
        let addr = SocketAddr::from((self.vms[i].addr, 22));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
                return;
            }
            if let Some(child) = self.vms[i].sshd.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    let log = std::fs::read_to_string(
                        self.dir.path().join(format!("sshd_{}.log", i + 1)),
                    )
                    .unwrap_or_default();
                    panic!("sshd of vm {} exited ({status}): {log}", i + 1);
                }
            }
            assert!(Instant::now() < deadline, "sshd on {addr} never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `iptables -S` inside a VM, read directly (not through the code under test).
    pub fn iptables_rules(&self, i: usize) -> String {
        output(
            "ip",
            &["netns", "exec", &self.vms[i].netns, "iptables", "-w", "-S"],
        )
    }
}

impl Drop for FakeVms {
    fn drop(&mut self) {
        for vm in &mut self.vms {
            if let Some(mut child) = vm.sshd.take() {
                // By pid: the Child owns exactly the sshd we started.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        for (i, vm) in self.vms.iter().enumerate() {
            let _ = Command::new("ip")
                .args(["netns", "delete", &vm.netns])
                .status();
            // A namespace lives on while the kernel still holds sockets of it (a connection
            // cut mid-close), and its veth with it: delete our end, which takes the pair.
            let veth = format!("flcsv{}{}", self.suffix, i + 1);
            if Path::new("/sys/class/net").join(&veth).exists() {
                let _ = Command::new("ip").args(["link", "delete", &veth]).status();
            }
        }
        if let Some(bridge) = &self.bridge {
            let _ = Command::new("ip").args(["link", "delete", bridge]).status();
        }
        if let Some(claim) = &self.claim {
            let _ = std::fs::remove_file(claim);
        }
    }
}

/// Polls `check` until it returns Some or `timeout` passes.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True when `pid` is a live process (not a zombie) on this machine, where the fake VMs run.
pub fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// The state letter of a process (R, S, T for stopped, ...).
pub fn process_state(pid: u32) -> Option<char> {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next())
        })
}
