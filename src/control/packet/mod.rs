//! Packet faults on directed links: loss, delay with jitter, duplication, reordering and
//! bandwidth, applied on the sending node to packets for chosen peers.
//!
//! Mechanisms (this kernel has no netem, `CONFIG_NET_SCH_NETEM` is unset, but has the rest):
//! - loss: an iptables `statistic` rule (`-m statistic --mode random --probability P -j DROP`)
//!   on the *receiving* node's INPUT, by source, as partitions do: a drop in the sender's OUTPUT
//!   is reported to the sending socket (EPERM), which real loss never is;
//! - delay, duplicate, reorder: an NFQUEUE rule handing the packets to the controller's engine
//!   (`engine`), which holds, copies or releases them; `--queue-bypass` lets packets through
//!   if the engine is gone (a SIGKILLed controller never turns a delay into a partition);
//! - bandwidth: an htb root qdisc (handle `f1c:`) whose class per peer carries a `tbf`.
//!
//! Everything lives in the tool's own objects: the chain `flc-packet` hooked into INPUT (loss) or
//! OUTPUT (the rest),
//! NFQUEUE number `QUEUE` of the node's own namespace, and the qdisc with handle `f1c:` (qdiscs
//! have numbers, not names: `f1c` is "flc" in hex). Each is recorded in the registry before it
//! exists; `heal` removes exactly those and then checks that none is left (`leftovers`), and
//! teardown/`clean` remove them from the record (deleting the namespace takes them too).
//!
//! Delay, duplication, reordering and bandwidth act on the sending side: a duplicate is a second
//! copy *sent*, which only the sender's stack can do, and a qdisc shapes what leaves.

pub mod engine;

use super::iptables::{args, run_program};
use super::registry::Resource;
use super::Control;
use anyhow::{bail, Result};
use serde::Serialize;
use serde_json::{json, Value};
use std::net::IpAddr;

/// The chain packet faults put in a node's namespace (or on a host).
pub const CHAIN: &str = "flc-packet";
/// The NFQUEUE number of the engine, in each node's own namespace.
pub const QUEUE: u16 = 1001;
/// The mark the engine's own duplicates carry, so the NFQUEUE rule lets them pass.
pub const MARK: u32 = 0xf1c;
/// The handle of the tool's root qdisc ("flc" as a qdisc number).
pub const QDISC: &str = "f1c:";
/// The node's interface inside its namespace (see `netns`).
pub const NODE_DEV: &str = "eth0";

/// What a packet fault does to each link it affects.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum PacketMode {
    /// Drop `percent` of the packets, at random.
    Loss { percent: f64 },
    /// Hold every packet `delay_ms` +/- up to `jitter_ms` (uniform, per packet).
    Delay { delay_ms: u64, jitter_ms: u64 },
    /// Send `percent` of the packets twice.
    Duplicate { percent: f64 },
    /// Hold `percent` of the packets `delay_ms` while the others pass: those arrive late, after
    /// packets sent after them.
    Reorder { percent: f64, delay_ms: u64 },
    /// Let at most `rate_kbit` through; the rest queue (tbf) and, past its limit, are dropped.
    Bandwidth { rate_kbit: u64 },
}

impl PacketMode {
    pub fn name(&self) -> &'static str {
        match self {
            PacketMode::Loss { .. } => "loss",
            PacketMode::Delay { .. } => "delay",
            PacketMode::Duplicate { .. } => "duplicate",
            PacketMode::Reorder { .. } => "reorder",
            PacketMode::Bandwidth { .. } => "bandwidth",
        }
    }

    /// The history value's fields: `mode` plus `percent` / `delay_ms` / `jitter_ms` /
    /// `rate_kbit` as apply (CONTRACTS.md).
    pub fn fields(&self) -> Value {
        json!(self)
    }

    /// Whether the fault is put on the receiving node of a link (loss: dropped on arrival),
    /// rather than on the sending one.
    pub fn on_receiver(&self) -> bool {
        matches!(self, PacketMode::Loss { .. })
    }

    /// Whether the controller's engine must see the packets (NFQUEUE).
    pub fn needs_engine(&self) -> bool {
        matches!(
            self,
            PacketMode::Delay { .. } | PacketMode::Duplicate { .. } | PacketMode::Reorder { .. }
        )
    }
}

/// The built-in chain the tool's chain hangs from for `mode`.
fn hook_of(mode: &PacketMode) -> &'static str {
    if mode.on_receiver() {
        "INPUT"
    } else {
        "OUTPUT"
    }
}

/// The hook rule, as recorded in the registry (arguments after `-A`/`-D`).
pub fn hook_spec(mode: &PacketMode) -> Vec<String> {
    args(&[hook_of(mode), "-j", CHAIN])
}

/// `iptables` argument lists that apply `mode` to packets between this node and `peers`: from
/// them (loss, on the receiver) or to them (the rest); none for bandwidth.
pub fn iptables_commands(mode: &PacketMode, peers: &[IpAddr]) -> Vec<Vec<String>> {
    let mut cmds = vec![args(&["-w", "-N", CHAIN])];
    let dir = if mode.on_receiver() { "-s" } else { "-d" };
    for peer in peers {
        let mut rule = args(&["-w", "-A", CHAIN, dir, &peer.to_string()]);
        match mode {
            PacketMode::Loss { percent } => rule.extend(args(&[
                "-m",
                "statistic",
                "--mode",
                "random",
                "--probability",
                &format!("{:.4}", percent / 100.0),
                "-j",
                "DROP",
            ])),
            PacketMode::Bandwidth { .. } => return Vec::new(),
            _ => rule.extend(args(&[
                "-m",
                "mark",
                "!",
                "--mark",
                &format!("{MARK:#x}"),
                "-j",
                "NFQUEUE",
                "--queue-num",
                &QUEUE.to_string(),
                "--queue-bypass",
            ])),
        }
        cmds.push(rule);
    }
    cmds.push(args(&["-w", "-I", hook_of(mode), "1", "-j", CHAIN]));
    cmds
}

/// `tc` argument lists that limit packets for `peers` to `rate_kbit` each on `dev`: an htb root
/// whose default class is unlimited, one class per peer with a tbf under it, a u32 filter per
/// peer's address.
pub fn tc_commands(dev: &str, rate_kbit: u64, peers: &[IpAddr]) -> Vec<Vec<String>> {
    let mut cmds = vec![
        args(&[
            "qdisc", "add", "dev", dev, "root", "handle", QDISC, "htb", "default", "1",
        ]),
        args(&[
            "class", "add", "dev", dev, "parent", QDISC, "classid", "f1c:1", "htb", "rate",
            "10gbit",
        ]),
    ];
    // tbf's bucket must hold at least one full packet; a 10th of a second of traffic beyond.
    let burst = (rate_kbit * 1000 / 8 / 10).max(3000);
    for (i, peer) in peers.iter().enumerate() {
        let class = format!("f1c:{:x}", 16 + i);
        let leaf = format!("{:x}:", 0xf20 + i);
        cmds.push(args(&[
            "class", "add", "dev", dev, "parent", QDISC, "classid", &class, "htb", "rate", "10gbit",
        ]));
        cmds.push(args(&[
            "qdisc",
            "add",
            "dev",
            dev,
            "parent",
            &class,
            "handle",
            &leaf,
            "tbf",
            "rate",
            &format!("{rate_kbit}kbit"),
            "burst",
            &burst.to_string(),
            "latency",
            "500ms",
        ]));
        cmds.push(args(&[
            "filter",
            "add",
            "dev",
            dev,
            "parent",
            QDISC,
            "protocol",
            "ip",
            "prio",
            "1",
            "u32",
            "match",
            "ip",
            "dst",
            &format!("{peer}/32"),
            "flowid",
            &class,
        ]));
    }
    cmds
}

/// Applies `mode` on `node` to its packets for `peers` (node names; from them when
/// `mode.on_receiver()`), recording every object
/// (in namespace `netns`; None: on the node's host) before it exists. Returns what was
/// installed, as text. The engine, when the mode needs one, is the caller's (`engine`).
pub fn install(
    control: &dyn Control,
    netns: Option<String>,
    node: &str,
    mode: &PacketMode,
    peers: &[String],
) -> Result<Vec<String>> {
    let addrs = peers
        .iter()
        .map(|p| control.node_host(p))
        .collect::<Result<Vec<_>>>()?;
    let mut done = Vec::new();
    if let PacketMode::Bandwidth { rate_kbit } = mode {
        if netns.is_none() {
            bail!("bandwidth faults need the node in a namespace of the tool's (--net netns): on a host, the root qdisc of its interface is not the tool's to replace");
        }
        control.registry().record(Resource::Qdisc {
            netns,
            dev: NODE_DEV.into(),
            handle: QDISC.into(),
        })?;
        for cmd in tc_commands(NODE_DEV, *rate_kbit, &addrs) {
            run_program(control, node, "tc", &cmd)?;
        }
        done.extend(addrs.iter().map(|a| format!("tbf {rate_kbit}kbit to {a}")));
        return Ok(done);
    }
    control.registry().record(Resource::Rule {
        netns: netns.clone(),
        table: "filter".into(),
        spec: hook_spec(mode),
    })?;
    control.registry().record(Resource::Chain {
        netns,
        table: "filter".into(),
        chain: CHAIN.into(),
    })?;
    let cmds = iptables_commands(mode, &addrs);
    for cmd in &cmds {
        run_program(control, node, "iptables", cmd)?;
    }
    // The rules as `iptables -S` would print them, without the chain name.
    done.extend(
        cmds.iter()
            .filter(|c| c.get(1).map(String::as_str) == Some("-A"))
            .map(|c| c[3..].join(" ")),
    );
    Ok(done)
}

/// Removes the tool's chain and qdisc from `node` (nothing there is fine), then checks that
/// none is left.
pub fn heal(control: &dyn Control, node: &str, in_netns: bool) -> Result<()> {
    for cmd in [
        args(&["-w", "-D", "INPUT", "-j", CHAIN]),
        args(&["-w", "-D", "OUTPUT", "-j", CHAIN]),
        args(&["-w", "-F", CHAIN]),
        args(&["-w", "-X", CHAIN]),
    ] {
        // Any of them fails harmlessly when the chain is not there; verified below.
        let _ = run_program(control, node, "iptables", &cmd);
    }
    if in_netns && has_qdisc(control, node)? {
        run_program(
            control,
            node,
            "tc",
            &args(&["qdisc", "del", "dev", NODE_DEV, "root", "handle", QDISC]),
        )?;
    }
    let left = leftovers(control, node, in_netns)?;
    if !left.is_empty() {
        bail!("still there after healing: {}", left.join(", "));
    }
    Ok(())
}

/// What of the tool's packet faults is in force on `node`: its chain, its qdisc.
pub fn leftovers(control: &dyn Control, node: &str, in_netns: bool) -> Result<Vec<String>> {
    let mut left = Vec::new();
    let out = control.exec(node, "iptables", &["-w", "-S"])?;
    if !out.status.success() {
        bail!(
            "iptables -S failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    if mentions_chain(&String::from_utf8_lossy(&out.stdout)) {
        left.push(format!("the {CHAIN} chain"));
    }
    if in_netns && has_qdisc(control, node)? {
        left.push(format!("the {QDISC} qdisc on {NODE_DEV}"));
    }
    Ok(left)
}

/// `iptables -S` output mentions the tool's packet chain.
pub fn mentions_chain(listing: &str) -> bool {
    listing
        .lines()
        .any(|l| l.split_whitespace().any(|w| w == CHAIN))
}

/// `tc qdisc show` output has the tool's root qdisc.
pub fn mentions_qdisc(listing: &str) -> bool {
    listing.lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.len() >= 3 && w[0] == "qdisc" && w[2] == QDISC
    })
}

fn has_qdisc(control: &dyn Control, node: &str) -> Result<bool> {
    let out = control.exec(node, "tc", &["qdisc", "show", "dev", NODE_DEV])?;
    if !out.status.success() {
        bail!(
            "tc qdisc show failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(mentions_qdisc(&String::from_utf8_lossy(&out.stdout)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers() -> Vec<IpAddr> {
        vec!["10.1.2.12".parse().unwrap(), "10.1.2.13".parse().unwrap()]
    }

    #[test]
    fn loss_is_a_statistic_drop_per_peer_in_the_tool_chain() {
        let cmds = iptables_commands(&PacketMode::Loss { percent: 30.0 }, &peers());
        assert_eq!(cmds[0], args(&["-w", "-N", CHAIN]));
        let drops: Vec<_> = cmds.iter().filter(|c| c.contains(&"DROP".into())).collect();
        assert_eq!(drops.len(), 2);
        assert!(drops[0]
            .windows(2)
            .any(|w| w == ["--probability", "0.3000"]));
        assert!(drops[1].windows(2).any(|w| w == ["-s", "10.1.2.13"]));
        assert_eq!(
            cmds.last().unwrap(),
            &args(&["-w", "-I", "INPUT", "1", "-j", CHAIN])
        );
        for c in &cmds {
            assert!(
                c.contains(&CHAIN.to_string()),
                "{c:?} must name the tool's chain"
            );
        }
    }

    #[test]
    fn engine_modes_queue_all_but_the_engines_own_copies() {
        let cmds = iptables_commands(
            &PacketMode::Delay {
                delay_ms: 50,
                jitter_ms: 10,
            },
            &peers(),
        );
        let queued: Vec<_> = cmds
            .iter()
            .filter(|c| c.contains(&"NFQUEUE".into()))
            .collect();
        assert_eq!(queued.len(), 2);
        assert_eq!(
            cmds.last().unwrap(),
            &args(&["-w", "-I", "OUTPUT", "1", "-j", CHAIN])
        );
        for q in queued {
            assert!(q
                .windows(2)
                .any(|w| w == ["-d", "10.1.2.12"] || w == ["-d", "10.1.2.13"]));
            assert!(q.contains(&"--queue-bypass".into()), "{q:?}");
            assert!(q.windows(3).any(|w| w == ["!", "--mark", "0xf1c"]), "{q:?}");
        }
    }

    #[test]
    fn bandwidth_is_a_tbf_per_peer_under_the_tools_root() {
        let cmds = tc_commands("eth0", 256, &peers());
        assert!(cmds[0].windows(2).any(|w| w == ["handle", QDISC]));
        assert_eq!(cmds.iter().filter(|c| c.contains(&"tbf".into())).count(), 2);
        assert_eq!(cmds.iter().filter(|c| c.contains(&"u32".into())).count(), 2);
        assert!(iptables_commands(&PacketMode::Bandwidth { rate_kbit: 256 }, &peers()).is_empty());
    }

    #[test]
    fn listings_are_read_exactly() {
        assert!(mentions_chain("-N flc-packet\n-A OUTPUT -j flc-packet"));
        assert!(!mentions_chain("-N flc-partition\n-N flc-packets"));
        assert!(mentions_qdisc(
            "qdisc htb f1c: root refcnt 2 r2q 10 default 0x1\nqdisc tbf f20: parent f1c:10"
        ));
        assert!(!mentions_qdisc("qdisc noqueue 0: root refcnt 2"));
    }

    #[test]
    fn the_history_value_names_the_mode_and_its_settings() {
        let v = PacketMode::Delay {
            delay_ms: 80,
            jitter_ms: 20,
        }
        .fields();
        assert_eq!(v, json!({"mode": "delay", "delay_ms": 80, "jitter_ms": 20}));
        let v = PacketMode::Bandwidth { rate_kbit: 64 }.fields();
        assert_eq!(v, json!({"mode": "bandwidth", "rate_kbit": 64}));
    }
}
