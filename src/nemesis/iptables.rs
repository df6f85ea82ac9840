//! The iptables commands of a partition. Each cut node gets one chain the tool owns, hooked into
//! INPUT, with a DROP rule per peer address whose traffic it must not receive. Healing unhooks and
//! deletes that chain only: the tool never flushes or edits a chain it did not create.

use std::net::IpAddr;

/// The chain a partition puts in a node's namespace (or on a host).
pub const CHAIN: &str = "flc-partition";

/// `iptables` argument lists that make the node drop packets from `sources`.
pub fn cut_commands(sources: &[IpAddr]) -> Vec<Vec<String>> {
    let mut cmds = vec![args(&["-w", "-N", CHAIN])];
    for src in sources {
        cmds.push(args(&[
            "-w",
            "-A",
            CHAIN,
            "-s",
            &src.to_string(),
            "-j",
            "DROP",
        ]));
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

fn args(a: &[&str]) -> Vec<String> {
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
