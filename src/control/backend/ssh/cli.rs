//! The `--ssh` flags of `fle-chaos test`, and `--nodes`, which is a node count for a local
//! cluster and a host list with `--ssh` (`NodesArg` parses both, so the one flag stays one flag).

use super::session::SshOptions;
use crate::exit::bad_input;
use anyhow::Result;
use clap::{ArgAction, Args};
use std::path::PathBuf;
use std::time::Duration;

/// `--nodes`: a number of local nodes, or with `--ssh` the hosts, comma-separated.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum NodesArg {
    Count(usize),
    Hosts(Vec<String>),
}

impl NodesArg {
    /// The number of nodes either way.
    pub fn count(&self) -> usize {
        match self {
            NodesArg::Count(n) => *n,
            NodesArg::Hosts(h) => h.len(),
        }
    }
}

impl std::fmt::Display for NodesArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodesArg::Count(n) => write!(f, "{n}"),
            NodesArg::Hosts(h) => write!(f, "{}", h.join(",")),
        }
    }
}

impl std::str::FromStr for NodesArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if let Ok(n) = s.parse::<usize>() {
            return Ok(NodesArg::Count(n));
        }
        let hosts = parse_hosts(s.split(','), "--nodes")?;
        Ok(NodesArg::Hosts(hosts))
    }
}

/// Host names from a list (blank entries and `#` comments skipped); each must be one word.
fn parse_hosts<'a>(
    items: impl Iterator<Item = &'a str>,
    source: &str,
) -> Result<Vec<String>, String> {
    let mut hosts = Vec::new();
    for item in items {
        let h = item.split('#').next().unwrap_or("").trim();
        if h.is_empty() {
            continue;
        }
        if h.split_whitespace().count() != 1 || h.starts_with('-') {
            return Err(format!(
                "{source}: {h:?} is not a host name; give host names or addresses, comma-separated \
                 (e.g. --nodes vm1,vm2,vm3), or a number of local nodes"
            ));
        }
        if hosts.iter().any(|x| x == h) {
            return Err(format!(
                "{source}: host {h} is listed twice; one node per host"
            ));
        }
        hosts.push(h.to_string());
    }
    if hosts.is_empty() {
        return Err(format!("{source}: no hosts given"));
    }
    Ok(hosts)
}

/// The flags that run the nodes on remote hosts.
// Deserialize: a run's test.json keeps its arguments; `shrink` replays them.
#[derive(Args, Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SshArgs {
    /// Run the nodes on remote hosts (VMs) over SSH, one node per host. `--nodes` (or
    /// `--nodes-file`) then lists the hosts: `--ssh --nodes vm1,vm2,vm3`.
    #[arg(long, help_heading = "Remote hosts (SSH)")]
    pub ssh: bool,
    /// With --ssh: a file listing the hosts, one per line (`#` comments allowed), instead of
    /// --nodes.
    #[arg(
        long,
        value_name = "FILE",
        requires = "ssh",
        help_heading = "Remote hosts (SSH)"
    )]
    pub nodes_file: Option<PathBuf>,
    /// With --ssh: the user to log in as [default: from ~/.ssh/config, else your user name].
    /// Not root: it needs passwordless sudo on every host.
    #[arg(
        long,
        value_name = "USER",
        requires = "ssh",
        help_heading = "Remote hosts (SSH)"
    )]
    pub ssh_user: Option<String>,
    /// With --ssh: the private key to log in with (only this key is offered)
    /// [default: ~/.ssh/config, the agent, ~/.ssh/id_*].
    #[arg(
        long,
        value_name = "FILE",
        requires = "ssh",
        help_heading = "Remote hosts (SSH)"
    )]
    pub ssh_private_key: Option<PathBuf>,
    /// With --ssh: the SSH port [default: from ~/.ssh/config, else 22].
    #[arg(
        long,
        value_name = "PORT",
        requires = "ssh",
        help_heading = "Remote hosts (SSH)"
    )]
    pub ssh_port: Option<u16>,
    /// With --ssh: check host keys against known_hosts. `false` accepts any host key and
    /// records none: only for throwaway VMs.
    #[arg(
        long,
        value_name = "BOOL",
        default_value_t = true,
        action = ArgAction::Set,
        requires = "ssh",
        help_heading = "Remote hosts (SSH)"
    )]
    pub ssh_strict_host_key_checking: bool,
    /// With --ssh: an ssh_config file to use instead of ~/.ssh/config (`ssh -F`).
    #[arg(
        long,
        value_name = "FILE",
        requires = "ssh",
        help_heading = "Remote hosts (SSH)"
    )]
    pub ssh_config: Option<PathBuf>,
    /// With --ssh, THROWAWAY VMs ONLY: clock faults step each host's real system clock
    /// (clock_settime) instead of the node's libfaketime clock. It changes the hosts' clocks
    /// for every program on them; they are stepped back at the end and by `fle-chaos clean`.
    #[arg(long, requires = "ssh", help_heading = "Remote hosts (SSH)")]
    pub real_clock_skew: bool,
}

impl SshArgs {
    /// The hosts to run on, or None for a local cluster. Checks that --nodes means what the
    /// other flags say it means.
    pub fn hosts(&self, nodes: Option<&NodesArg>) -> Result<Option<Vec<String>>> {
        if !self.ssh {
            if let Some(NodesArg::Hosts(h)) = nodes {
                return Err(bad_input(format!(
                    "--nodes {}: host names need --ssh; without it --nodes is a number of local \
                     nodes (e.g. --nodes 5)",
                    h.join(",")
                )));
            }
            return Ok(None);
        }
        let hosts = match (nodes, &self.nodes_file) {
            (Some(NodesArg::Hosts(_)), Some(_)) => {
                return Err(bad_input(
                    "give the hosts either with --nodes or with --nodes-file, not both",
                ))
            }
            (Some(NodesArg::Hosts(h)), None) => h.clone(),
            (Some(NodesArg::Count(n)), _) => {
                return Err(bad_input(format!(
                    "--ssh --nodes {n}: with --ssh, --nodes lists the hosts \
                     (e.g. --nodes vm1,vm2,vm3) or use --nodes-file FILE"
                )))
            }
            (None, Some(file)) => {
                let text = std::fs::read_to_string(file).map_err(|e| {
                    bad_input(format!(
                        "--nodes-file {}: {e}; give a file with one host per line",
                        file.display()
                    ))
                })?;
                parse_hosts(text.lines(), &format!("--nodes-file {}", file.display()))
                    .map_err(bad_input)?
            }
            (None, None) => {
                return Err(bad_input(
                    "--ssh needs the hosts: --nodes vm1,vm2,vm3 or --nodes-file FILE",
                ))
            }
        };
        for (flag, path) in [
            ("--ssh-private-key", &self.ssh_private_key),
            ("--ssh-config", &self.ssh_config),
        ] {
            if let Some(p) = path {
                if !p.is_file() {
                    return Err(bad_input(format!(
                        "{flag} {}: no such file; give the path of an existing file",
                        p.display()
                    )));
                }
            }
        }
        Ok(Some(hosts))
    }

    /// The connection settings these flags describe.
    pub fn options(&self) -> SshOptions {
        SshOptions {
            user: self.ssh_user.clone(),
            port: self.ssh_port,
            private_key: self.ssh_private_key.clone(),
            strict_host_key_checking: self.ssh_strict_host_key_checking,
            config_file: self.ssh_config.clone(),
            connect_timeout: Duration::from_secs(10),
            retries: 3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[arg(long)]
        nodes: Option<NodesArg>,
        #[command(flatten)]
        ssh: SshArgs,
    }

    fn parse(args: &[&str]) -> Result<Option<Vec<String>>> {
        // main.rs turns clap's own errors into exit 254 too.
        let cli = Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .map_err(|e| bad_input(e.to_string()))?;
        cli.ssh.hosts(cli.nodes.as_ref())
    }

    #[test]
    fn nodes_is_a_count_locally_and_hosts_with_ssh() {
        assert_eq!(parse(&["--nodes", "5"]).unwrap(), None);
        assert_eq!(
            parse(&["--ssh", "--nodes", "vm1,10.0.0.2, vm3"]).unwrap(),
            Some(vec!["vm1".into(), "10.0.0.2".into(), "vm3".into()])
        );
    }

    #[test]
    fn mixed_up_nodes_flags_are_bad_input() {
        for args in [
            &["--nodes", "vm1,vm2"][..],
            &["--ssh", "--nodes", "3"][..],
            &["--ssh"][..],
            &["--ssh", "--nodes", "vm1,vm1"][..],
            &[
                "--ssh",
                "--nodes",
                "vm1",
                "--ssh-private-key",
                "/nonexistent/key",
            ][..],
        ] {
            let err = parse(args).unwrap_err();
            assert_eq!(
                crate::exit::code_for(&err),
                crate::exit::BAD_ARGS,
                "{args:?}: {err:#}"
            );
        }
        // SSH flags without --ssh are refused by clap itself.
        assert!(Cli::try_parse_from(["t", "--ssh-user", "root"]).is_err());
        assert!(Cli::try_parse_from(["t", "--real-clock-skew"]).is_err());
    }

    #[test]
    fn nodes_file_lists_hosts_with_comments() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("hosts");
        std::fs::write(&f, "# lab\nvm1\n\nvm2 # second\nvm3\n").unwrap();
        assert_eq!(
            parse(&["--ssh", "--nodes-file", f.to_str().unwrap()]).unwrap(),
            Some(vec!["vm1".into(), "vm2".into(), "vm3".into()])
        );
        // Through `fle-chaos test`'s own flags, whose --nodes has no default to collide with.
        let words = ["--ssh", "--nodes-file", f.to_str().unwrap()].map(String::from);
        let args = crate::commands::run::plan::TestArgs::from_words(&words).unwrap();
        assert_eq!(
            args.ssh.hosts(args.nodes.as_ref()).unwrap(),
            Some(vec!["vm1".into(), "vm2".into(), "vm3".into()])
        );
    }
}
