//! The iptables commands of a partition. Each cut node gets one chain the tool owns, hooked into
//! INPUT, with a DROP rule per peer address whose traffic it must not receive. Healing unhooks and
//! deletes that chain only: the tool never flushes or edits a chain it did not create.
//!
//! `drop_from`, `heal` and `is_cut` are the `Net` of both backends that have one: the commands
//! run through the backend's `Control::exec` (in the node's namespace, or on its host).

use crate::control::backend::registry::Resource;
use crate::control::Control;
use anyhow::{bail, Result};
use std::net::IpAddr;

/// The chain a partition puts in a node's namespace (or on a host).
pub const CHAIN: &str = "flc-partition";

/// The quorum (Zab) port every target asks for (`node_port(node, 2888)`); nodes with their own
/// network stack, the only ones partitions run on, get it as asked.
pub const QUORUM_PORT: u16 = 2888;

/// `iptables` argument lists that make the node drop packets from `sources`.
pub fn cut_commands(sources: &[IpAddr]) -> Vec<Vec<String>> {
    chain_commands(sources.iter().map(|s| vec![format!("-s {s}")]).collect())
}

/// `iptables` argument lists that make the node drop only the Zab packets from `sources`: those
/// from a source's quorum port (it leads, the node follows) or to the node's own `my_port` (the
/// node leads). Election connections (and new ones of any kind) pass: a leader that dies
/// inside such a cut has its connections' FIN and RST hidden from its followers while it can
/// still be heard electing (a crashed host sends neither).
pub fn quorum_cut_commands(sources: &[(IpAddr, u16)], my_port: u16) -> Vec<Vec<String>> {
    chain_commands(
        sources
            .iter()
            .flat_map(|(s, port)| {
                [
                    vec![format!("-s {s} -p tcp --sport {port}")],
                    vec![format!("-s {s} -p tcp --dport {my_port}")],
                ]
            })
            .collect(),
    )
}

/// Creates the chain, a DROP rule per match (each match one string of iptables arguments),
/// then hooks the chain into INPUT.
fn chain_commands(matches: Vec<Vec<String>>) -> Vec<Vec<String>> {
    let mut cmds = vec![args(&["-w", "-N", CHAIN])];
    for m in matches {
        let mut cmd = args(&["-w", "-A", CHAIN]);
        cmd.extend(
            m.iter()
                .flat_map(|a| a.split_whitespace().map(str::to_string)),
        );
        cmd.extend(args(&["-j", "DROP"]));
        cmds.push(cmd);
    }
    cmds.push(args(&["-w", "-I", "INPUT", "1", "-j", CHAIN]));
    cmds
}

/// The hook rule, as recorded in the registry (arguments after `-A`/`-D`).
pub fn hook_spec() -> Vec<String> {
    args(&["INPUT", "-j", CHAIN])
}

/// `iptables` argument lists that remove the tool's chain: unhook, empty it, delete it.
/// Each may fail harmlessly when the chain is already gone.
pub fn heal_commands() -> Vec<Vec<String>> {
    vec![
        args(&["-w", "-D", "INPUT", "-j", CHAIN]),
        args(&["-w", "-F", CHAIN]),
        args(&["-w", "-X", CHAIN]),
    ]
}

/// `iptables -S` output mentions the tool's chain.
pub fn mentions_chain(listing: &str) -> bool {
    listing
        .lines()
        .any(|l| l.split_whitespace().any(|w| w == CHAIN))
}

/// What a partition's rules drop from a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Every packet (`cut_commands`).
    Every,
    /// Only the Zab connections' packets (`quorum_cut_commands`): the partition option
    /// `port = "quorum"`.
    Quorum,
}

impl Cut {
    /// A partition's `port` value (schedule files, history lines): "quorum" for the Zab
    /// connections only, none for every packet.
    pub fn port(self) -> Option<&'static str> {
        match self {
            Cut::Every => None,
            Cut::Quorum => Some("quorum"),
        }
    }

    /// The cut a `port` value names (None: a value that names none).
    pub fn of_port(port: Option<&str>) -> Option<Cut> {
        match port {
            None => Some(Cut::Every),
            Some("quorum") => Some(Cut::Quorum),
            Some(_) => None,
        }
    }
}

/// Installs the chain on `node`, dropping packets from `sources` (all of them, or only their
/// Zab connections' as `cut` says); the hook rule and the chain are recorded in the registry
/// (in namespace `netns`, None: on the node's host) before they exist. Returns the DROP rules
/// as text.
pub fn drop_from(
    control: &dyn Control,
    netns: Option<String>,
    node: &str,
    sources: &[String],
    cut: Cut,
) -> Result<Vec<String>> {
    let cmds = match cut {
        Cut::Every => {
            let addrs = sources
                .iter()
                .map(|s| control.node_host(s))
                .collect::<Result<Vec<_>>>()?;
            cut_commands(&addrs)
        }
        Cut::Quorum => {
            let peers = sources
                .iter()
                .map(|s| Ok((control.node_host(s)?, control.node_port(s, QUORUM_PORT)?)))
                .collect::<Result<Vec<_>>>()?;
            quorum_cut_commands(&peers, control.node_port(node, QUORUM_PORT)?)
        }
    };
    control.registry().record(Resource::Rule {
        netns: netns.clone(),
        table: "filter".into(),
        spec: hook_spec(),
    })?;
    control.registry().record(Resource::Chain {
        netns,
        table: "filter".into(),
        chain: CHAIN.into(),
    })?;
    for cmd in &cmds {
        run(control, node, cmd)?;
    }
    Ok(cmds
        .iter()
        .filter(|c| c.last().is_some_and(|a| a == "DROP"))
        .map(|c| c[3..].join(" "))
        .collect())
}

/// Removes the tool's chain from `node`, then checks that it is gone.
pub fn heal(control: &dyn Control, node: &str) -> Result<()> {
    for cmd in heal_commands() {
        // Unhooking a chain that is not there fails harmlessly; verify below instead.
        let _ = run(control, node, &cmd);
    }
    if is_cut(control, node)? {
        bail!("the chain is still there after healing");
    }
    Ok(())
}

/// Whether the tool's chain exists on `node`.
pub fn is_cut(control: &dyn Control, node: &str) -> Result<bool> {
    let out = control.exec(node, "iptables", &["-w", "-S"])?;
    if !out.status.success() {
        bail!(
            "iptables -S failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(mentions_chain(&String::from_utf8_lossy(&out.stdout)))
}

fn run(control: &dyn Control, node: &str, args: &[String]) -> Result<()> {
    run_program(control, node, "iptables", args)
}

/// Runs `program ARGS` on `node`; a failure says the command and its stderr (also used by
/// `packet` for iptables and tc).
pub(super) fn run_program(
    control: &dyn Control,
    node: &str,
    program: &str,
    args: &[String],
) -> Result<()> {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = control.exec(node, program, &argv)?;
    if !out.status.success() {
        bail!(
            "{program} {} on {node}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Owned arguments from literals.
pub(super) fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_creates_hooks_and_drops_each_source() {
        let cmds = cut_commands(&["10.1.2.11".parse().unwrap(), "10.1.2.12".parse().unwrap()]);
        assert_eq!(cmds.first().unwrap(), &args(&["-w", "-N", CHAIN]));
        assert_eq!(
            cmds.iter()
                .filter(|c| c.contains(&"DROP".to_string()))
                .count(),
            2
        );
        assert_eq!(
            cmds.last().unwrap(),
            &args(&["-w", "-I", "INPUT", "1", "-j", CHAIN])
        );
    }

    #[test]
    fn a_quorum_port_cut_drops_only_zab_packets() {
        let cmds = quorum_cut_commands(&[("10.1.2.15".parse().unwrap(), 2888)], 2888);
        let drops: Vec<String> = cmds
            .iter()
            .filter(|c| c.last().is_some_and(|a| a == "DROP"))
            .map(|c| c.join(" "))
            .collect();
        assert_eq!(
            drops,
            [
                format!("-w -A {CHAIN} -s 10.1.2.15 -p tcp --sport 2888 -j DROP"),
                format!("-w -A {CHAIN} -s 10.1.2.15 -p tcp --dport 2888 -j DROP"),
            ]
        );
        assert_eq!(cmds.first().unwrap(), &args(&["-w", "-N", CHAIN]));
        assert_eq!(
            cmds.last().unwrap(),
            &args(&["-w", "-I", "INPUT", "1", "-j", CHAIN])
        );
    }

    #[test]
    fn heal_touches_only_the_tool_chain() {
        for cmd in heal_commands() {
            assert!(
                cmd.contains(&CHAIN.to_string()),
                "{cmd:?} must name the tool's chain"
            );
        }
        assert!(mentions_chain(
            "-P INPUT ACCEPT\n-N flc-partition\n-A INPUT -j flc-partition"
        ));
        assert!(!mentions_chain("-P INPUT ACCEPT\n-N flc-partitions-other"));
    }
}
