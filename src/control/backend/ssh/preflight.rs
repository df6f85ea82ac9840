//! Preflight: before anything is created anywhere, every host is reached and asked what the run
//! needs from it (login, root or passwordless sudo, the tools the daemon launcher uses, the CPU
//! architecture the uploaded binary was built for, a package manager when tools are missing).
//! All hosts are asked at once and every problem is reported together, as bad input (exit 254).

use super::session::HostSession;
use crate::control::fault::faketime::LIBFAKETIME;
use crate::exit::bad_input;
use anyhow::Result;
use std::net::IpAddr;
use std::sync::Arc;

/// What a host told us about itself.
#[derive(Debug, Clone)]
pub struct HostFacts {
    pub user: String,
    pub root: bool,
    /// Passwordless sudo works (only asked of non-root users).
    pub sudo: bool,
    /// The host's address on the connection the controller made: where its node listens and
    /// where the controller (and, on a flat network, the peers) reach it.
    pub address: IpAddr,
    /// The controller's address as the host sees it.
    pub controller: IpAddr,
    pub arch: String,
    pub package_manager: Option<String>,
    pub has_iptables: bool,
    pub has_faketime: bool,
    /// `/dev/fuse` is there (power-loss faults mount lazyfs under each node's dataDir).
    pub has_fuse: bool,
    pub missing_tools: Vec<String>,
    /// The host kernel's boot id: two hosts with the same one are one kernel, one clock.
    pub boot_id: String,
    /// Running daemons that would steer a stepped clock back (chronyd, ntpd, ...).
    pub time_daemons: Vec<String>,
}

impl HostFacts {
    /// A warning for `--real-clock-skew` when a time daemon runs on the host.
    pub fn time_daemon_warning(&self, host: &str) -> Option<String> {
        (!self.time_daemons.is_empty()).then(|| {
            format!(
                "{host}: {} runs and may steer the stepped clock back; stop it on throwaway VMs \
                 for clean clock faults",
                self.time_daemons.join(", ")
            )
        })
    }
}

/// This machine's boot id (see `HostFacts::boot_id`).
pub fn local_boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn probe_script() -> String {
    format!(
        r#"echo "uid=$(id -u)"
echo "user=$(id -un)"
echo "conn=$SSH_CONNECTION"
echo "arch=$(uname -m)"
if [ "$(id -u)" != 0 ]; then
  if sudo -n true 2>/dev/null; then echo sudo=yes; else echo sudo=no; fi
fi
for t in setsid nohup tar tac sh; do command -v $t >/dev/null 2>&1 || echo "missing=$t"; done
for p in /usr/sbin/iptables /sbin/iptables /usr/bin/iptables; do [ -x $p ] && {{ echo have=iptables; break; }}; done
[ -e {LIBFAKETIME} ] && echo have=libfaketime
[ -c /dev/fuse ] && echo have=fuse
for m in apt-get dnf yum apk zypper; do command -v $m >/dev/null 2>&1 && {{ echo pm=$m; break; }}; done
echo "boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
for c in /proc/[0-9]*/comm; do {{ read -r n < $c; }} 2>/dev/null || continue; case $n in chronyd|ntpd|openntpd|systemd-timesyn|timesyncd|ntpdate) echo "timed=$n";; esac; done
true"#
    )
}

/// Asks one host; the error names the host and the fix.
pub async fn probe(host: &HostSession) -> Result<HostFacts> {
    host.connect().await?;
    let out = host.run_ok("preflight", &probe_script(), None).await?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .map(str::to_string)
    };
    let who = host.options().describe(host.host());
    let root = field("uid").as_deref() == Some("0");
    let user = field("user").unwrap_or_default();
    let sudo = field("sudo").as_deref() == Some("yes");
    if !root && !sudo {
        return Err(bad_input(format!(
            "{who}: user {user} is not root and has no passwordless sudo (`sudo -n true` failed); \
             log in as root (--ssh-user root) or give {user} NOPASSWD sudo on that host"
        )));
    }
    let conn = field("conn").unwrap_or_default();
    let words: Vec<&str> = conn.split_whitespace().collect();
    let (controller, address) = match words.as_slice() {
        [client, _, server, _] => match (client.parse(), server.parse()) {
            (Ok(c), Ok(s)) => (c, s),
            _ => anyhow::bail!("{who}: cannot read the addresses in SSH_CONNECTION={conn:?}"),
        },
        _ => anyhow::bail!(
            "{who}: the host's sshd did not set SSH_CONNECTION ({conn:?}); cannot tell its address"
        ),
    };
    let arch = field("arch").unwrap_or_default();
    let missing_tools: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("missing="))
        .map(str::to_string)
        .collect();
    let have = |t: &str| text.lines().any(|l| l == format!("have={t}"));
    Ok(HostFacts {
        user,
        root,
        sudo,
        address,
        controller,
        arch,
        package_manager: field("pm"),
        has_iptables: have("iptables"),
        has_faketime: have("libfaketime"),
        has_fuse: have("fuse"),
        missing_tools,
        boot_id: field("boot").unwrap_or_default(),
        time_daemons: {
            let mut d: Vec<String> = text
                .lines()
                .filter_map(|l| l.strip_prefix("timed="))
                .map(str::to_string)
                .collect();
            d.sort();
            d.dedup();
            d
        },
    })
}

/// Probes every host at once; any problem on any host is an error naming all of them. With
/// `real_clock` (`--real-clock-skew`) every host must also be a kernel of its own; with
/// `power_loss` (power-loss faults) every host must have FUSE.
pub async fn preflight(
    hosts: &[Arc<HostSession>],
    real_clock: bool,
    power_loss: bool,
) -> Result<Vec<HostFacts>> {
    let tasks: Vec<_> = hosts
        .iter()
        .map(|h| {
            let h = h.clone();
            tokio::spawn(async move { probe(&h).await })
        })
        .collect();
    let mut facts = Vec::new();
    let mut problems = Vec::new();
    let local_arch = std::env::consts::ARCH;
    for (task, host) in tasks.into_iter().zip(hosts) {
        match task.await {
            Ok(Ok(f)) => {
                if f.arch != local_arch {
                    problems.push(format!(
                        "{}: the host is {} but fle-node was built for {local_arch}; use hosts of \
                         the controller's architecture",
                        host.host(),
                        f.arch
                    ));
                }
                if !f.missing_tools.is_empty() {
                    problems.push(format!(
                        "{}: missing {} (needed to start and collect the node); install them \
                         (coreutils, util-linux, tar)",
                        host.host(),
                        f.missing_tools.join(", ")
                    ));
                }
                if power_loss {
                    problems.extend(no_fuse(host.host(), &f));
                }
                facts.push(f);
            }
            Ok(Err(e)) => problems.push(format!("{e:#}")),
            Err(e) => problems.push(format!("{}: preflight crashed: {e}", host.host())),
        }
    }
    let mut seen: Vec<IpAddr> = Vec::new();
    for (f, h) in facts.iter().zip(hosts) {
        if seen.contains(&f.address) {
            problems.push(format!(
                "{} is the same machine ({}) as another host in --nodes; give one host per node",
                h.host(),
                f.address
            ));
        }
        seen.push(f.address);
    }
    if real_clock {
        let names: Vec<&str> = hosts.iter().map(|h| h.host()).collect();
        problems.extend(shared_clocks(&names, &facts, &local_boot_id()));
    }
    if !problems.is_empty() {
        return Err(bad_input(format!(
            "SSH preflight failed, nothing was started:\n  {}",
            problems.join("\n  ")
        )));
    }
    Ok(facts)
}

/// Power-loss faults need FUSE on the host: the problem line when it has none.
fn no_fuse(host: &str, f: &HostFacts) -> Option<String> {
    (!f.has_fuse).then(|| {
        format!(
            "{host}: no /dev/fuse, and power-loss faults put each node's dataDir on a FUSE \
             filesystem (lazyfs); load the fuse module there (modprobe fuse) or drop the \
             power-loss faults"
        )
    })
}

/// `--real-clock-skew` steps a host's system clock: refused for a host that shares its kernel
/// (so its clock) with the controller or with another host, e.g. containers or namespaces.
fn shared_clocks(hosts: &[&str], facts: &[HostFacts], controller_boot_id: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, (host, f)) in hosts.iter().zip(facts).enumerate() {
        if f.boot_id.is_empty() {
            problems.push(format!(
                "{host}: cannot read /proc/sys/kernel/random/boot_id, so cannot tell whether \
                 --real-clock-skew would change another machine's clock too; drop --real-clock-skew"
            ));
        } else if f.boot_id == controller_boot_id {
            problems.push(format!(
                "{host} runs on the controller's own kernel (same boot id): --real-clock-skew \
                 would step THIS machine's clock; use real VMs, or drop --real-clock-skew to \
                 skew with libfaketime"
            ));
        } else if let Some(other) = facts[..i].iter().position(|o| o.boot_id == f.boot_id) {
            problems.push(format!(
                "{host} shares its kernel, so its clock, with {} (same boot id): \
                 --real-clock-skew needs one machine per host; drop it to skew with libfaketime",
                hosts[other]
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(boot_id: &str) -> HostFacts {
        HostFacts {
            user: "root".into(),
            root: true,
            sudo: false,
            address: "192.0.2.1".parse().unwrap(),
            controller: "192.0.2.254".parse().unwrap(),
            arch: "x86_64".into(),
            package_manager: None,
            has_iptables: true,
            has_faketime: true,
            has_fuse: true,
            missing_tools: Vec::new(),
            boot_id: boot_id.into(),
            time_daemons: Vec::new(),
        }
    }

    #[test]
    fn a_host_without_fuse_is_named_with_the_fix() {
        assert_eq!(no_fuse("vm1", &facts("a")), None);
        let f = HostFacts {
            has_fuse: false,
            ..facts("a")
        };
        let line = no_fuse("vm1", &f).unwrap();
        assert!(line.starts_with("vm1: no /dev/fuse") && line.contains("modprobe fuse"));
        assert!(!line.contains('\n'), "one line: {line}");
    }

    #[test]
    fn real_clock_skew_needs_a_kernel_per_host_other_than_the_controllers() {
        let hosts = ["vm1", "vm2", "vm3"];
        let own = [facts("a"), facts("b"), facts("c")];
        assert!(shared_clocks(&hosts, &own, "me").is_empty());
        let problems = shared_clocks(&hosts, &[facts("a"), facts("me"), facts("a")], "me");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("vm2 runs on the controller's own kernel"));
        assert!(problems[1].starts_with("vm3 shares its kernel, so its clock, with vm1"));
        assert!(shared_clocks(&hosts[..1], &[facts("")], "me")[0].contains("boot_id"));
        for p in &problems {
            assert!(!p.contains("  "), "a broken line continuation: {p}");
        }
    }

    #[test]
    fn a_running_time_daemon_is_named_in_a_warning() {
        let mut f = facts("a");
        assert_eq!(f.time_daemon_warning("vm1"), None);
        f.time_daemons = vec!["chronyd".into()];
        let warning = f.time_daemon_warning("vm1").unwrap();
        assert!(warning.contains("vm1: chronyd runs"), "{warning}");
        assert!(!warning.contains("  "), "{warning}");
    }
}
