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
//! Everything lives in the tool's own objects, one set per fault ([`Slot`]): the chain
//! `flc-packet-N` hooked into INPUT (loss) or OUTPUT (the rest), NFQUEUE number `QUEUE + N` of the
//! node's own namespace, and the qdisc with handle `f1c:` (qdiscs have numbers, not names: `f1c`
//! is "flc" in hex; one root per interface, so one bandwidth fault per node at a time). So two
//! packet faults composed or overlapping on one node never share a chain or a queue, and healing
//! one leaves the other in force. Each is recorded in the registry before it exists; `heal`
//! removes exactly one fault's, the final heal every `flc-packet*` chain, and then checks that
//! none is left (`leftovers`); teardown/`clean` remove them from the record (deleting the
//! namespace takes them too).
//!
//! Delay, duplication, reordering and bandwidth act on the sending side: a duplicate is a second
//! copy *sent*, which only the sender's stack can do, and a qdisc shapes what leaves.

pub mod engine;

use crate::control::backend::registry::Resource;
use crate::control::fault::iptables::{args, run_program};
use crate::control::Control;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// The prefix of the chains packet faults put in a node's namespace (or on a host).
pub const CHAIN: &str = "flc-packet";
/// The first NFQUEUE number of the engines, in each node's own namespace.
pub const QUEUE: u16 = 1001;
/// Faults numbered alike (mod this) would share a queue: far more than can overlap in a run.
const SLOTS: u32 = 1000;
/// The mark the engine's own duplicates carry, so the NFQUEUE rule lets them pass.
pub const MARK: u32 = 0xf1c;
/// The handle of the tool's root qdisc ("flc" as a qdisc number).
pub const QDISC: &str = "f1c:";
/// The node's interface inside its namespace (see `netns`).
pub const NODE_DEV: &str = "eth0";

/// One packet fault's own objects on every node it touches: chain `flc-packet-N`, queue
/// `QUEUE + N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(pub u32);

impl Slot {
    /// The next fault's slot (numbered from 1 in the controller's lifetime).
    pub fn next() -> Slot {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        Slot(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % SLOTS + 1)
    }

    pub fn chain(&self) -> String {
        format!("{CHAIN}-{}", self.0)
    }

    pub fn queue(&self) -> u16 {
        QUEUE + (self.0 % SLOTS) as u16
    }
}

/// What a packet fault does to each link it affects.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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

/// What a packet fault's start records of what it does, beside the rest of its value: the mode
/// with its parameters (`mode`, `percent`, `delay_ms`, ...) and the directed links. Written by
/// the nemesis and read back by replays (`nemesis::timed`), so both use this one type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacketRecord {
    #[serde(flatten)]
    pub mode: PacketMode,
    /// Each degraded link as `[from, to]`.
    pub links: Vec<[String; 2]>,
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

    /// Whether the fault is put on the receiving node of a link (loss: dropped on arrival),
    /// rather than on the sending one.
    pub fn on_receiver(&self) -> bool {
        matches!(self, PacketMode::Loss { .. })
    }

    /// Whether it needs the node's namespace on this machine: the engine (NFQUEUE) or a qdisc.
    /// Only loss is an iptables rule, which runs on a remote host too (over SSH).
    pub fn needs_local_netns(&self) -> bool {
        !matches!(self, PacketMode::Loss { .. })
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
pub fn hook_spec(mode: &PacketMode, slot: Slot) -> Vec<String> {
    args(&[hook_of(mode), "-j", &slot.chain()])
}

/// `iptables` argument lists that apply `mode` to packets between this node and `peers`: from
/// them (loss, on the receiver) or to them (the rest); none for bandwidth.
pub fn iptables_commands(mode: &PacketMode, peers: &[IpAddr], slot: Slot) -> Vec<Vec<String>> {
    let chain = slot.chain();
    let mut cmds = vec![args(&["-w", "-N", &chain])];
    let dir = if mode.on_receiver() { "-s" } else { "-d" };
    for peer in peers {
        let mut rule = args(&["-w", "-A", &chain, dir, &peer.to_string()]);
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
                &slot.queue().to_string(),
                "--queue-bypass",
            ])),
        }
        cmds.push(rule);
    }
    cmds.push(args(&["-w", "-I", hook_of(mode), "1", "-j", &chain]));
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
/// `mode.on_receiver()`) in `slot`'s own chain, recording every object
/// (in namespace `netns`; None: on the node's host) before it exists. Returns what was
/// installed, as text. The engine, when the mode needs one, is the caller's (`engine`).
/// A bandwidth fault where one is already in force is refused before anything is done.
pub fn install(
    control: &dyn Control,
    netns: Option<String>,
    node: &str,
    mode: &PacketMode,
    peers: &[String],
    slot: Slot,
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
        if has_qdisc(control, node)? {
            bail!("{node} already has a bandwidth fault in force (one root qdisc {QDISC} per interface); do not overlap bandwidth faults on one node");
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
        spec: hook_spec(mode, slot),
    })?;
    control.registry().record(Resource::Chain {
        netns,
        table: "filter".into(),
        chain: slot.chain(),
    })?;
    let cmds = iptables_commands(mode, &addrs, slot);
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

/// What a heal removes from a node.
#[derive(Debug, Clone, Copy)]
pub enum Heal<'a> {
    /// One fault's chain, and the qdisc when it was a bandwidth fault.
    One { chain: &'a str, qdisc: bool },
    /// Every `flc-packet*` chain and the qdisc (the final heal).
    All,
}

/// Removes the tool's chain(s) and qdisc from `node` as `what` says (nothing there is fine),
/// then checks that none of them is left.
pub fn heal(control: &dyn Control, node: &str, in_netns: bool, what: Heal) -> Result<()> {
    let (chains, qdisc) = match what {
        Heal::One { chain, qdisc } => (vec![chain.to_string()], qdisc),
        Heal::All => (listed_chains(control, node)?, true),
    };
    for chain in &chains {
        for cmd in [
            args(&["-w", "-D", "INPUT", "-j", chain]),
            args(&["-w", "-D", "OUTPUT", "-j", chain]),
            args(&["-w", "-F", chain]),
            args(&["-w", "-X", chain]),
        ] {
            // Any of them fails harmlessly when the chain is not there; verified below.
            let _ = run_program(control, node, "iptables", &cmd);
        }
    }
    if qdisc && in_netns && has_qdisc(control, node)? {
        run_program(
            control,
            node,
            "tc",
            &args(&["qdisc", "del", "dev", NODE_DEV, "root", "handle", QDISC]),
        )?;
    }
    let left: Vec<String> = leftovers(control, node, in_netns)?
        .into_iter()
        .filter(|l| match what {
            Heal::One { chain, qdisc } => {
                *l == format!("the {chain} chain") || (qdisc && l.contains(QDISC))
            }
            Heal::All => true,
        })
        .collect();
    if !left.is_empty() {
        bail!("still there after healing: {}", left.join(", "));
    }
    Ok(())
}

/// What of the tool's packet faults is in force on `node`: its chains, its qdisc.
pub fn leftovers(control: &dyn Control, node: &str, in_netns: bool) -> Result<Vec<String>> {
    let mut left: Vec<String> = listed_chains(control, node)?
        .into_iter()
        .map(|c| format!("the {c} chain"))
        .collect();
    if in_netns && has_qdisc(control, node)? {
        left.push(format!("the {QDISC} qdisc on {NODE_DEV}"));
    }
    Ok(left)
}

/// The packet chains `iptables -S` lists on `node`.
fn listed_chains(control: &dyn Control, node: &str) -> Result<Vec<String>> {
    let out = control.exec(node, "iptables", &["-w", "-S"])?;
    if !out.status.success() {
        bail!(
            "iptables -S failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(packet_chains(&String::from_utf8_lossy(&out.stdout)))
}

/// The tool's packet chains (`flc-packet`, `flc-packet-N`) an `iptables -S` listing mentions.
pub fn packet_chains(listing: &str) -> Vec<String> {
    let mut chains: Vec<String> = listing
        .lines()
        .flat_map(str::split_whitespace)
        .filter(|w| {
            w.strip_prefix(CHAIN).is_some_and(|rest| {
                rest.is_empty()
                    || rest
                        .strip_prefix('-')
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .map(str::to_string)
        .collect();
    chains.sort();
    chains.dedup();
    chains
}

/// `tc qdisc show` output has the tool's root qdisc.
pub fn mentions_qdisc(listing: &str) -> bool {
    listing.lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.len() >= 3 && w[0] == "qdisc" && w[2] == QDISC
    })
}

/// The node's interface has the tool's root qdisc (a bandwidth fault in force).
pub fn has_qdisc(control: &dyn Control, node: &str) -> Result<bool> {
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
    use serde_json::json;

    fn peers() -> Vec<IpAddr> {
        vec!["10.1.2.12".parse().unwrap(), "10.1.2.13".parse().unwrap()]
    }

    #[test]
    fn loss_is_a_statistic_drop_per_peer_in_the_tool_chain() {
        let slot = Slot(3);
        let cmds = iptables_commands(&PacketMode::Loss { percent: 30.0 }, &peers(), slot);
        assert_eq!(cmds[0], args(&["-w", "-N", "flc-packet-3"]));
        let drops: Vec<_> = cmds.iter().filter(|c| c.contains(&"DROP".into())).collect();
        assert_eq!(drops.len(), 2);
        assert!(drops[0]
            .windows(2)
            .any(|w| w == ["--probability", "0.3000"]));
        assert!(drops[1].windows(2).any(|w| w == ["-s", "10.1.2.13"]));
        assert_eq!(
            cmds.last().unwrap(),
            &args(&["-w", "-I", "INPUT", "1", "-j", "flc-packet-3"])
        );
        for c in &cmds {
            assert!(
                c.contains(&slot.chain()),
                "{c:?} must name the fault's own chain"
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
            Slot(2),
        );
        let queued: Vec<_> = cmds
            .iter()
            .filter(|c| c.contains(&"NFQUEUE".into()))
            .collect();
        assert_eq!(queued.len(), 2);
        assert_eq!(
            cmds.last().unwrap(),
            &args(&["-w", "-I", "OUTPUT", "1", "-j", "flc-packet-2"])
        );
        for q in queued {
            assert!(q.windows(2).any(|w| w == ["--queue-num", "1003"]), "{q:?}");
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
        assert!(
            iptables_commands(&PacketMode::Bandwidth { rate_kbit: 256 }, &peers(), Slot(1))
                .is_empty()
        );
    }

    #[test]
    fn each_fault_has_its_own_chain_and_queue() {
        let (a, b) = (Slot::next(), Slot::next());
        assert_ne!(a.chain(), b.chain());
        assert_ne!(a.queue(), b.queue());
        assert!(a.chain().starts_with("flc-packet-") && a.chain().len() <= 28);
        assert!(Slot(999).queue() > QUEUE && Slot(1000).queue() == QUEUE);
    }

    #[test]
    fn listings_are_read_exactly() {
        assert_eq!(
            packet_chains("-N flc-packet-1\n-N flc-packet-12\n-A OUTPUT -j flc-packet-12"),
            ["flc-packet-1", "flc-packet-12"]
        );
        assert_eq!(
            packet_chains("-N flc-packet\n-A INPUT -j flc-packet"),
            ["flc-packet"]
        );
        assert!(packet_chains(
            "-N flc-partition\n-N flc-packets\n-N flc-packet-\n-N flc-packet-x1"
        )
        .is_empty());
        assert!(mentions_qdisc(
            "qdisc htb f1c: root refcnt 2 r2q 10 default 0x1\nqdisc tbf f20: parent f1c:10"
        ));
        assert!(!mentions_qdisc("qdisc noqueue 0: root refcnt 2"));
    }

    #[test]
    fn the_history_value_names_the_mode_its_settings_and_links_and_reads_back() {
        let record = PacketRecord {
            mode: PacketMode::Delay {
                delay_ms: 80,
                jitter_ms: 20,
            },
            links: vec![["n1".into(), "n2".into()]],
        };
        let v = json!(record);
        assert_eq!(
            v,
            json!({"mode": "delay", "delay_ms": 80, "jitter_ms": 20, "links": [["n1", "n2"]]})
        );
        assert_eq!(serde_json::from_value::<PacketRecord>(v).unwrap(), record);
        let v = json!(PacketMode::Bandwidth { rate_kbit: 64 });
        assert_eq!(v, json!({"mode": "bandwidth", "rate_kbit": 64}));
        // The rest of a start's value (chain, rules, nodes...) does not get in the way.
        let start = json!({"mode": "loss", "percent": 30.0, "links": [], "chain": "flc-packet-1"});
        assert_eq!(
            serde_json::from_value::<PacketRecord>(start).unwrap().mode,
            PacketMode::Loss { percent: 30.0 }
        );
    }
}
