//! Packet faults on real namespaces: the mechanisms themselves (UDP probes between two nodes'
//! namespaces: loss, delay, duplication, reordering, bandwidth, each directed, each gone after
//! the heal), then on real clusters: 30% loss on every link still elects and commits, a delay
//! shows in the write latencies, and a SIGKILLed controller's qdisc and chain go with `clean`.

use crate::support::exclusive::{hold, Exclusive};
use crate::support::run::*;
use fle_chaos::control::backend::local::NetMode;
use fle_chaos::control::fault::packet::{self, engine::Engine, PacketMode};
use fle_chaos::control::Control;
use fle_chaos::history::{store::read_history, Event, EventType, F};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// A datagram as received: its sequence number, its size, and its one-way time.
struct Arrival {
    seq: u32,
    len: usize,
    latency: Duration,
    at: Duration,
}

/// Sends `count` datagrams of `size` bytes from `from` to `to` (node names), `gap` apart, and
/// returns what arrived until nothing came for 700 ms.
fn probe(
    c: &Cluster,
    from: &str,
    to: &str,
    count: u32,
    size: usize,
    gap: Duration,
) -> Vec<Arrival> {
    let net = c.netns().unwrap().clone();
    let (a, b) = (c.node_host(from).unwrap(), c.node_host(to).unwrap());
    let port = 9000 + rand::random::<u16>() % 1000;
    let rx = in_netns(&net.netns_of(to).unwrap(), move || {
        UdpSocket::bind(SocketAddr::new(b, port)).unwrap()
    });
    let tx = in_netns(&net.netns_of(from).unwrap(), move || {
        UdpSocket::bind(SocketAddr::new(a, 0)).unwrap()
    });
    rx.set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    let base = Instant::now();
    let receiver = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = rx.recv(&mut buf) {
            let now = base.elapsed();
            let seq = u32::from_le_bytes(buf[0..4].try_into().unwrap());
            let sent = Duration::from_nanos(u64::from_le_bytes(buf[4..12].try_into().unwrap()));
            got.push(Arrival {
                seq,
                len: n,
                latency: now.saturating_sub(sent),
                at: now,
            });
        }
        got
    });
    let mut msg = vec![0u8; size.max(12)];
    for seq in 0..count {
        msg[0..4].copy_from_slice(&seq.to_le_bytes());
        msg[4..12].copy_from_slice(&(base.elapsed().as_nanos() as u64).to_le_bytes());
        // A qdisc over its limit refuses a datagram (ENOBUFS): that one is simply not sent.
        let _ = tx.send_to(&msg, SocketAddr::new(b, port));
        std::thread::sleep(gap);
    }
    receiver.join().unwrap()
}

/// Puts `mode` on the link n1 -> n2 (on n2 for loss, else on n1 with its engine when it needs
/// one), runs `f`, heals, and checks that nothing of the tool's is left in that namespace.
fn with_fault<T>(c: &Cluster, mode: PacketMode, f: impl FnOnce() -> T) -> T {
    let (node, peer) = if mode.on_receiver() {
        ("n2", "n1")
    } else {
        ("n1", "n2")
    };
    let (slot, engine) = start_fault(c, node, peer, mode);
    assert!(
        !packet::leftovers(&c.0, node, true).unwrap().is_empty(),
        "the fault is in force"
    );
    let out = f();
    heal_fault(c, node, mode, slot);
    if let Some(e) = engine {
        let stats = e.stop();
        assert!(stats.seen > 0 && stats.errors.is_empty(), "{stats:?}");
    }
    assert_eq!(
        packet::leftovers(&c.0, node, true).unwrap(),
        Vec::<String>::new()
    );
    out
}

/// Puts `mode` on `node`'s link with `peer` in a slot (chain, queue) of its own.
fn start_fault(
    c: &Cluster,
    node: &str,
    peer: &str,
    mode: PacketMode,
) -> (packet::Slot, Option<Engine>) {
    let ns = c.net().unwrap().netns(node).expect("a namespace per node");
    let slot = packet::Slot::next();
    let engine = mode
        .needs_engine()
        .then(|| Engine::start(node, &ns, mode, 7, slot.queue()).unwrap());
    let rules = packet::install(&c.0, Some(ns), node, &mode, &[peer.to_string()], slot).unwrap();
    assert_eq!(rules.len(), 1, "{rules:?}");
    (slot, engine)
}

/// Heals one fault: its own chain (and the qdisc for bandwidth), nothing else.
fn heal_fault(c: &Cluster, node: &str, mode: PacketMode, slot: packet::Slot) {
    let what = packet::Heal::One {
        chain: &slot.chain(),
        qdisc: matches!(mode, PacketMode::Bandwidth { .. }),
    };
    packet::heal(&c.0, node, true, what).unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[test]
fn each_packet_mode_does_what_it_says_on_its_link_only_and_heals() {
    if !root_or_skip("each_packet_mode_does_what_it_says_on_its_link_only_and_heals") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(NetMode::Netns, 2, dir.path());
    let gap = Duration::from_micros(500);

    // Loss: about 30% of n1 -> n2 is gone; n2 -> n1 loses nothing.
    let (there, back) = with_fault(&c, PacketMode::Loss { percent: 30.0 }, || {
        (
            probe(&c, "n1", "n2", 600, 64, gap),
            probe(&c, "n2", "n1", 200, 64, gap),
        )
    });
    let kept = there.len() as f64 / 600.0;
    assert!((0.55..=0.85).contains(&kept), "kept {kept} of n1 -> n2");
    assert_eq!(back.len(), 200, "the other direction is untouched");

    // Delay 100 ms +/- 20 ms: every datagram is late by at least 80 ms, the median by ~100.
    let (there, back) = with_fault(
        &c,
        PacketMode::Delay {
            delay_ms: 100,
            jitter_ms: 20,
        },
        || {
            (
                probe(&c, "n1", "n2", 100, 64, gap),
                probe(&c, "n2", "n1", 50, 64, gap),
            )
        },
    );
    assert_eq!(there.len(), 100, "a delay loses nothing");
    let lat: Vec<Duration> = there.iter().map(|a| a.latency).collect();
    assert!(
        lat.iter().all(|l| *l >= Duration::from_millis(78)),
        "{lat:?}"
    );
    let m = median(lat);
    assert!(
        (Duration::from_millis(90)..Duration::from_millis(400)).contains(&m),
        "median {m:?}"
    );
    assert!(median(back.iter().map(|a| a.latency).collect()) < Duration::from_millis(50));

    // Duplicate 50%: about half the datagrams arrive twice, none three times.
    let there = with_fault(&c, PacketMode::Duplicate { percent: 50.0 }, || {
        probe(&c, "n1", "n2", 300, 64, gap)
    });
    let mut per_seq = std::collections::BTreeMap::new();
    for a in &there {
        *per_seq.entry(a.seq).or_insert(0) += 1;
    }
    let twice = per_seq.values().filter(|&&n| n == 2).count();
    assert_eq!(per_seq.len(), 300, "every datagram arrives");
    assert!(per_seq.values().all(|&n| n <= 2));
    assert!((90..=210).contains(&twice), "{twice} of 300 duplicated");

    // Reorder 40% by 30 ms: all arrive, and later datagrams overtake held ones.
    let there = with_fault(
        &c,
        PacketMode::Reorder {
            percent: 40.0,
            delay_ms: 30,
        },
        || probe(&c, "n1", "n2", 300, 64, Duration::from_millis(1)),
    );
    assert_eq!(there.len(), 300);
    let overtaken = there.windows(2).filter(|w| w[1].seq < w[0].seq).count();
    assert!(overtaken >= 20, "only {overtaken} arrived out of order");

    // Bandwidth 256 kbit/s: 96 KB sent at once come through at about that rate, not faster;
    // without the fault the same burst takes a few milliseconds.
    let there = with_fault(&c, PacketMode::Bandwidth { rate_kbit: 256 }, || {
        probe(&c, "n1", "n2", 96, 1000, Duration::ZERO)
    });
    assert!(there.len() >= 10, "{} arrived", there.len());
    let bytes: usize = there.iter().map(|a| a.len).sum();
    let span = there.last().unwrap().at.saturating_sub(there[0].at);
    let kbit = bytes as f64 * 8.0 / 1000.0 / span.as_secs_f64().max(1e-3);
    assert!(kbit < 400.0, "{bytes} bytes in {span:?}: {kbit:.0} kbit/s");
    let free = probe(&c, "n1", "n2", 96, 1000, Duration::ZERO);
    let span = free.last().unwrap().at.saturating_sub(free[0].at);
    assert!(
        span < Duration::from_millis(300),
        "unthrottled burst took {span:?}"
    );

    // Two faults at once on n1 (composed or overlapping): loss of what n2 sends it and a delay
    // of what it sends n2, each in its own chain (the delay with its own queue and engine). Both
    // act; healing the delay leaves the loss in force, alone; healing the loss leaves nothing.
    let delay = PacketMode::Delay {
        delay_ms: 100,
        jitter_ms: 0,
    };
    let loss = PacketMode::Loss { percent: 50.0 };
    let (slot_d, engine_d) = start_fault(&c, "n1", "n2", delay);
    let (slot_l, _) = start_fault(&c, "n1", "n2", loss);
    assert_ne!(slot_d.chain(), slot_l.chain());
    assert_eq!(packet::leftovers(&c.0, "n1", true).unwrap().len(), 2);
    let there = probe(&c, "n1", "n2", 50, 64, gap);
    assert_eq!(there.len(), 50, "the delay loses nothing");
    assert!(there.iter().all(|a| a.latency >= Duration::from_millis(78)));
    let back = probe(&c, "n2", "n1", 200, 64, gap);
    assert!(
        (40..=160).contains(&back.len()),
        "{} of 200 kept",
        back.len()
    );
    heal_fault(&c, "n1", delay, slot_d);
    assert!(engine_d.unwrap().stop().seen >= 50);
    assert_eq!(
        packet::leftovers(&c.0, "n1", true).unwrap(),
        [format!("the {} chain", slot_l.chain())]
    );
    let there = probe(&c, "n1", "n2", 50, 64, gap);
    assert!(median(there.iter().map(|a| a.latency).collect()) < Duration::from_millis(50));
    let back = probe(&c, "n2", "n1", 200, 64, gap);
    assert!(
        back.len() <= 160,
        "the loss is still there: {} of 200",
        back.len()
    );
    heal_fault(&c, "n1", loss, slot_l);
    assert_eq!(
        packet::leftovers(&c.0, "n1", true).unwrap(),
        Vec::<String>::new()
    );
}

/// Writes `schedule` to a file and runs a 3-node netns cluster with the writes workload under it;
/// returns the folder (removed when dropped), the exit code, the run dir and its history.
fn run(
    schedule: &str,
    time_limit: &str,
) -> (tempfile::TempDir, i32, std::path::PathBuf, Vec<Event>) {
    let _cores = hold(Exclusive::HeavyCluster);
    let tmp = tempfile::Builder::new()
        .prefix("flc-faults-packet")
        .tempdir()
        .unwrap();
    let file = tmp.path().join("schedule.toml");
    std::fs::write(&file, schedule).unwrap();
    let out = &tmp.path().join("reports");
    let mut child = spawn_test(
        &[
            "--nodes",
            "3",
            "--workload",
            "writes",
            "--time-limit",
            time_limit,
            "--nemesis-file",
            file.to_str().unwrap(),
        ],
        out,
        &fle_node(),
    );
    let code = wait_exit(&mut child, Duration::from_secs(240));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
    let dir = run_dir(out).unwrap_or_else(|| panic!("no run folder: {stderr}"));
    let history = read_history(&fle_chaos::history::file::in_run(&dir)).unwrap();
    (tmp, code.unwrap_or(-1), dir, history)
}

/// The (start, end) of the first packet fault, and its start's value.
fn packet_window(history: &[Event]) -> (u64, u64, serde_json::Value) {
    let start = nemesis_done(history, F::Packet)
        .first()
        .copied()
        .cloned()
        .expect("a packet fault was applied");
    let end = history
        .iter()
        .find(|e| {
            e.f == F::Heal
                && e.kind == EventType::Info
                && e.value["undoes"] == "packet"
                && e.time > start.time
        })
        .expect("and healed");
    (start.time, end.time, start.value)
}

/// The final heal's verification: no problem left (no chain, no qdisc, every node up).
fn assert_verified_clean(history: &[Event]) {
    let verify = history
        .iter()
        .rev()
        .find(|e| e.f == F::Heal && e.value["verify"] == true && e.kind != EventType::Invoke)
        .expect("the final heal's verification");
    assert_eq!(verify.kind, EventType::Info, "{}", verify.value);
    assert_eq!(verify.value["problems"], serde_json::json!([]));
}

/// Write latencies (invoke -> ok) with the time each was invoked.
fn write_latencies(history: &[Event]) -> Vec<(u64, u64)> {
    let mut open = std::collections::HashMap::new();
    let mut out = Vec::new();
    for e in history.iter().filter(|e| e.f == F::Write) {
        match e.kind {
            EventType::Invoke => {
                open.insert(e.process.clone(), e.time);
            }
            EventType::Ok => {
                if let Some(t) = open.remove(&e.process) {
                    out.push((t, e.time - t));
                }
            }
            _ => {
                open.remove(&e.process);
            }
        }
    }
    out
}

#[test]
fn thirty_percent_loss_on_every_link_still_elects_and_commits() {
    if !root_or_skip("thirty_percent_loss_on_every_link_still_elects_and_commits") {
        return;
    }
    // Loss on every link from the first instant, and the leader killed 3 s into it: the
    // two left elect a leader under loss, whenever the loss came into force (on a loaded
    // machine its rules took 0.9 s, after the very first election had ended).
    let (_tmp, code, _dir, history) = run(
        "interval = \"0s\"\nduration = \"10s\"\n\
         [[fault]]\nkind = \"packet\"\nmode = \"loss\"\npercent = 30\ntarget = \"all\"\n\
         compose = \"loss+kill\"\n\
         [[fault.with]]\nkind = \"kill\"\ntarget = \"leader\"\nafter = \"3s\"\n",
        "14",
    );
    assert_eq!(code, 0, "the correct node stays valid under loss");
    let (start, end, value) = packet_window(&history);
    assert_eq!(value["mode"], "loss");
    assert_eq!(value["percent"], 30.0);
    assert_eq!(
        value["links"].as_array().unwrap().len(),
        6,
        "every directed link"
    );
    let kill = nemesis_done(&history, F::Kill)
        .first()
        .copied()
        .cloned()
        .expect("the leader was killed");
    assert!(kill.time > start && kill.time < end, "killed under loss");
    let killed = kill.value["nodes"][0].as_str().unwrap().to_string();
    let next_leader = history
        .iter()
        .find(|e| {
            e.f == F::Status
                && e.kind == EventType::Ok
                && e.time > kill.time
                && e.value["state"] == "LEADING"
                && e.node.as_deref() != Some(killed.as_str())
        })
        .expect("a leader was elected after the kill");
    assert!(
        next_leader.time < end,
        "the next leader ({} ns) was elected under loss ({start}..{end})",
        next_leader.time
    );
    let committed = write_latencies(&history)
        .iter()
        .filter(|(t, _)| *t > start && *t < end)
        .count();
    assert!(
        committed >= 5,
        "only {committed} writes committed under loss"
    );
    assert_verified_clean(&history);
}

#[test]
fn delay_shows_in_the_write_latencies() {
    if !root_or_skip("delay_shows_in_the_write_latencies") {
        return;
    }
    let (_tmp, code, _dir, history) = run(
        "interval = \"4s\"\nduration = \"5s\"\n[[fault]]\nkind = \"packet\"\nmode = \"delay\"\ndelay = \"150ms\"\njitter = \"20ms\"\ntarget = \"all\"\n",
        "13",
    );
    assert_eq!(code, 0, "a delay loses nothing");
    let (start, end, value) = packet_window(&history);
    assert_eq!(
        (value["mode"].as_str(), value["delay_ms"].as_u64()),
        (Some("delay"), Some(150))
    );
    let lat = write_latencies(&history);
    let inside: Vec<Duration> = lat
        .iter()
        .filter(|(t, _)| *t > start + 300_000_000 && *t < end)
        .map(|(_, l)| Duration::from_nanos(*l))
        .collect();
    let outside: Vec<Duration> = lat
        .iter()
        .filter(|(t, _)| *t < start || *t > end + 1_000_000_000)
        .map(|(_, l)| Duration::from_nanos(*l))
        .collect();
    assert!(
        inside.len() >= 3 && outside.len() >= 3,
        "{} / {}",
        inside.len(),
        outside.len()
    );
    let (mi, mo) = (median(inside), median(outside));
    // A write crosses at least the leader -> follower and back (two delayed links).
    assert!(
        mi >= mo + Duration::from_millis(200),
        "median write latency {mi:?} under a 150 ms delay vs {mo:?} without"
    );
    let heal = history
        .iter()
        .find(|e| e.f == F::Heal && e.kind == EventType::Info && e.value["undoes"] == "packet")
        .unwrap();
    assert!(
        heal.value["engines"]["n1"]["held"].as_u64().unwrap_or(0) > 0,
        "the engine held packets: {}",
        heal.value
    );
    assert_verified_clean(&history);
}

#[test]
fn sigkilled_controller_leaves_qdisc_and_chain_that_clean_removes() {
    if !root_or_skip("sigkilled_controller_leaves_qdisc_and_chain_that_clean_removes") {
        return;
    }
    let _cores = hold(Exclusive::HeavyCluster);
    // Its SIGKILLed controller leaves the nodes to PID 1 until `clean`.
    let _dead_runs = hold(Exclusive::DeadRuns);
    // `clean` cleans every dead run of its registry: this test's registry is its own.
    let registry = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flc-registry-packet");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("schedule.toml");
    std::fs::write(
        &file,
        "interval = \"0s\"\nduration = \"200s\"\n[[fault]]\nkind = \"packet\"\nmode = \"bandwidth\"\nrate = \"512kbit\"\ntarget = \"n1\"\n",
    )
    .unwrap();
    let out = tmp.path().join("reports");
    let mut child = test_command(
        &[
            "--nodes",
            "3",
            "--time-limit",
            "300",
            "--nemesis-file",
            file.to_str().unwrap(),
        ],
        &out,
        &fle_node(),
    )
    .env("FLE_CHAOS_REGISTRY", &registry)
    .spawn()
    .unwrap();
    let mut dir = None;
    let applied = wait_for(Duration::from_secs(60), || {
        dir = run_dir(&out);
        dir.as_ref().is_some_and(|d| {
            fle_chaos::history::file::read_text(&fle_chaos::history::file::in_run(d))
                .is_ok_and(|h| h.contains("\"qdisc\":\"f1c:\""))
        })
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let dir = dir.expect("no run folder");
    assert!(
        applied,
        "the bandwidth fault never applied: {}",
        std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default()
    );
    let recorded = resources(&dir);
    let qdiscs: Vec<_> = recorded
        .iter()
        .filter_map(|r| match r {
            fle_chaos::control::backend::registry::Resource::Qdisc { netns, .. } => netns.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(
        qdiscs.len(),
        3,
        "n1 -> n2, n1 -> n3 and n2, n3 -> n1: {recorded:?}"
    );
    // Really there after the SIGKILL, in the namespace the record names.
    let shown = std::process::Command::new("ip")
        .args([
            "netns", "exec", &qdiscs[0], "tc", "qdisc", "show", "dev", "eth0",
        ])
        .output()
        .unwrap();
    assert!(
        packet::mentions_qdisc(&String::from_utf8_lossy(&shown.stdout)),
        "{}",
        String::from_utf8_lossy(&shown.stdout)
    );
    let clean = fle_chaos()
        .arg("clean")
        .env("FLE_CHAOS_REGISTRY", &registry)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&clean.stdout);
    assert_eq!(clean.status.code(), Some(0), "{said}");
    assert_eq!(said.matches("removed qdisc f1c:").count(), 3, "{said}");
    assert_eq!(leftovers(&recorded), Vec::<String>::new(), "{said}");
}
