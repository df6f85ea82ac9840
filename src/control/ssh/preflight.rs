//! Preflight: before anything is created anywhere, every host is reached and asked what the run
//! needs from it (login, root or passwordless sudo, the tools the daemon launcher uses, the CPU
//! architecture the uploaded binary was built for, a package manager when tools are missing).
//! All hosts are asked at once and every problem is reported together, as bad input (exit 254).

use super::session::HostSession;
use crate::control::faketime::LIBFAKETIME;
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
    pub missing_tools: Vec<String>,
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
for m in apt-get dnf yum apk zypper; do command -v $m >/dev/null 2>&1 && {{ echo pm=$m; break; }}; done
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
        missing_tools,
    })
}

/// Probes every host at once; any problem on any host is an error naming all of them.
pub async fn preflight(hosts: &[Arc<HostSession>]) -> Result<Vec<HostFacts>> {
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
    if !problems.is_empty() {
        return Err(bad_input(format!(
            "SSH preflight failed, nothing was started:\n  {}",
            problems.join("\n  ")
        )));
    }
    Ok(facts)
}
