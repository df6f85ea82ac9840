//! Checks a synthetic 5-million-event history and prints events/s (wall), CPU time per event
//! (what neighbours on a shared machine do not change), the date and load, and peak memory
//! (VmHWM). Goal: >= 2 M events/s wall and <= 1 GiB for parse + check.
//!
//! The history is a valid 5-node run with a realistic mix, each line laid out as the controller
//! writes it (a status value's keys sorted, as `serde_json::Value` prints them): status reads
//! at 50 Hz per node (each with a `last_election` of 5 votes counted and 5 heard, as fle-node reports), a write
//! every 5th polling round, a leader kill and restart every 80 s of run time, then the final
//! heal and final logs.
//! For comparison it also times the general path (`Event` with a `serde_json::Value` per
//! event) on a 200 000-event prefix: the reason the checkers have a fast path.
//!
//! It then checks the same history compressed as a run stores it (`history.jsonl.zst`) and
//! prints its size and time against the plain one (goal: no more than 10% slower).
//!
//! First it times `linearizable` alone on two synthetic register histories (5 clients on 5
//! keys for 60 s at 50 ops/s; 100 000 operations on 10 keys): goal well under a second, and at
//! most 10 s, within the search's budget (about 32 MiB of cache a key, keys one at a time).
//!
//! `cargo bench --bench check` (EVENTS=N to change the size; BENCH_DIR=dir to keep the
//! generated run there and reuse it on later runs; LINEARIZABLE=only for those rows alone,
//! LINEARIZABLE=0 to skip them).
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

#[path = "support/register.rs"]
mod register;
mod support;
use support::{cpu_s, load_average};

use fle_chaos::checker::{check_history, check_loaded, load_run, CheckOptions, Validity};
use fle_chaos::history::store::read_history;
use fle_chaos::history::test_info::TestInfo;
use fle_chaos::store::RunDir;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

const NODES: u64 = 5;

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

struct Gen<W: Write> {
    out: W,
    index: u64,
    time_ns: u64,
}

impl<W: Write> Gen<W> {
    fn line(&mut self, process: &str, kind: &str, f: &str, node: Option<u64>, value: &str) {
        let node = node
            .map(|n| format!(",\"node\":\"n{n}\""))
            .unwrap_or_default();
        writeln!(
            self.out,
            "{{\"index\":{},\"time\":{},\"process\":\"{process}\",\"type\":\"{kind}\",\"f\":\"{f}\"{node},\"value\":{value}}}",
            self.index, self.time_ns
        )
        .unwrap();
        self.index += 1;
    }
}

struct Cluster {
    leader: u64,
    epoch: u64,
    counter: u64,
    round: u64,
    down: Option<u64>,
    /// Rounds left in the current election (LOOKING).
    electing: u32,
    election_json: String,
    acked: Vec<(u64, String)>,
}

impl Cluster {
    fn zxid(&self) -> u64 {
        (self.epoch << 32) | self.counter
    }

    fn decide(&mut self) {
        let z = self.zxid();
        let votes: Vec<String> = (1..=NODES)
            .map(|s| {
                format!(
                    "{{\"leader\":{},\"peer_epoch\":{},\"sid\":{s},\"zxid\":{z}}}",
                    self.leader,
                    self.epoch - 1
                )
            })
            .collect();
        // Every vote heard in the deciding round (fle-node's `received`), as LOOKING votes.
        let received: Vec<String> = (1..=NODES)
            .map(|s| {
                format!(
                    "{{\"leader\":{},\"peer_epoch\":{},\"round\":{},\"sid\":{s},\"state\":\"LOOKING\",\"zxid\":{z}}}",
                    self.leader,
                    self.epoch - 1,
                    self.round
                )
            })
            .collect();
        self.election_json = format!(
            "{{\"leader\":{},\"peer_epoch\":{},\"received\":[{}],\"round\":{},\"took_ms\":231,\"votes\":[{}],\"zxid\":{z}}}",
            self.leader,
            self.epoch - 1,
            received.join(","),
            self.round,
            votes.join(",")
        );
    }

    fn status(&self, sid: u64, t_ms: u64) -> String {
        let (state, leader, phase) = if self.electing > 0 {
            ("LOOKING", "null".to_string(), "election")
        } else if sid == self.leader {
            ("LEADING", self.leader.to_string(), "broadcast")
        } else {
            ("FOLLOWING", self.leader.to_string(), "broadcast")
        };
        let epoch = if self.electing > 0 {
            self.epoch - 1
        } else {
            self.epoch
        };
        let z = self.zxid();
        format!(
            "{{\"accepted_epoch\":{epoch},\"election_epoch\":{},\"last_committed_zxid\":{z},\"last_election\":{},\"last_zxid\":{z},\"last_zxid_hex\":\"{z:#x}\",\"leader\":{leader},\"peer_epoch\":{epoch},\"sid\":{sid},\"state\":\"{state}\",\"uptime_ms\":{t_ms},\"wall_clock_ms\":{},\"zab_phase\":\"{phase}\"}}",
            self.round,
            self.election_json,
            1_796_000_000_000u64 + t_ms,
        )
    }
}

fn generate(dir: &Path, events: u64) {
    let info = serde_json::json!({
        "name": "bench", "target": "fle", "nodes": (1..=NODES).map(|i| format!("n{i}")).collect::<Vec<_>>(),
        "workload": "writes", "nemesis": ["kill"], "seed": 7, "time_limit_s": 20000.0,
        "tick_ms": 100, "init_limit": 10, "sync_limit": 5, "started_at": "2026-11-30T00:00:00Z",
        "replay_command": "fle-chaos test --seed 7", "version": "0.1.0", "settings": {}
    });
    std::fs::write(dir.join("test.json"), info.to_string()).unwrap();
    let file = std::fs::File::create(dir.join("history.jsonl")).unwrap();
    let mut g = Gen {
        out: std::io::BufWriter::with_capacity(1 << 20, file),
        index: 0,
        time_ns: 0,
    };
    let mut c = Cluster {
        leader: 1,
        epoch: 1,
        counter: 0,
        round: 1,
        down: None,
        electing: 0,
        election_json: String::new(),
        acked: Vec::new(),
    };
    c.decide();
    let mut rnd = 0u64;
    while g.index + 40 < events {
        rnd += 1;
        let t_ms = rnd * 20;
        for sid in 1..=NODES {
            g.time_ns = t_ms * 1_000_000 + sid * 3_000_000;
            let name = format!("n{sid}");
            if c.down == Some(sid) {
                g.line(
                    &name,
                    "info",
                    "status",
                    Some(sid),
                    "{\"error\":\"connection refused\"}",
                );
            } else {
                let v = c.status(sid, t_ms);
                g.line(&name, "ok", "status", Some(sid), &v);
            }
        }
        if c.electing > 0 {
            c.electing -= 1;
            if c.electing == 0 {
                c.decide();
            }
        } else if rnd % 5 == 0 {
            c.counter += 1;
            let v = format!("\"w{}\"", c.counter + (c.epoch << 20));
            g.line("0", "invoke", "write", None, &format!("{{\"value\":{v}}}"));
            g.line(
                "0",
                "ok",
                "write",
                None,
                &format!("{{\"value\":{v},\"zxid\":{}}}", c.zxid()),
            );
            c.acked.push((c.zxid(), v));
        }
        if rnd % 4000 == 0 {
            // Kill the leader; the next sid wins a new epoch after 10 rounds of looking.
            let old = c.leader;
            g.line(
                "nemesis",
                "invoke",
                "kill",
                None,
                &format!("{{\"nodes\":[\"n{old}\"]}}"),
            );
            g.line(
                "nemesis",
                "info",
                "kill",
                None,
                &format!("{{\"nodes\":[\"n{old}\"],\"pids\":[{}]}}", 1000 + rnd),
            );
            c.down = Some(old);
            c.leader = old % NODES + 1;
            c.epoch += 1;
            c.round += 1;
            c.counter = 0;
            c.electing = 10;
        }
        if rnd % 4000 == 2000 {
            if let Some(n) = c.down.take() {
                g.line(
                    "nemesis",
                    "invoke",
                    "start",
                    None,
                    &format!("{{\"nodes\":[\"n{n}\"]}}"),
                );
                g.line(
                    "nemesis",
                    "info",
                    "start",
                    None,
                    &format!("{{\"nodes\":[\"n{n}\"],\"pids\":[{}]}}", 2000 + rnd),
                );
            }
        }
    }
    g.line(
        "nemesis",
        "invoke",
        "heal",
        None,
        "{\"nodes\":[],\"final\":true}",
    );
    g.line(
        "nemesis",
        "info",
        "heal",
        None,
        "{\"nodes\":[],\"final\":true}",
    );
    for r in 1..=3 {
        for sid in 1..=NODES {
            g.time_ns += 20_000_000 * r;
            let v = c.status(sid, g.time_ns / 1_000_000);
            g.line(&format!("n{sid}"), "ok", "status", Some(sid), &v);
        }
    }
    let entries: Vec<String> = c
        .acked
        .iter()
        .map(|(z, v)| format!("{{\"zxid\":{z},\"value\":{v}}}"))
        .collect();
    let log = format!(
        "{{\"entries\":[{}],\"last_committed_zxid\":{}}}",
        entries.join(","),
        c.zxid()
    );
    for sid in 1..=NODES {
        g.line("final", "ok", "final-log", Some(sid), &log);
    }
    g.out.flush().unwrap();
}

/// The first status read must be byte for byte what the controller writes for it (a
/// `NodeStatus` made a `Value` in an `Event`), so the bench times the layout of real runs.
fn assert_written_as_the_controller_would(history: &Path) {
    use std::io::BufRead;
    let file = std::io::BufReader::new(std::fs::File::open(history).unwrap());
    let line = file.lines().next().unwrap().unwrap();
    let mut e: fle_chaos::history::Event = serde_json::from_str(&line).unwrap();
    let s: fle_chaos::api::NodeStatus = serde_json::from_value(e.value).unwrap();
    e.value = serde_json::to_value(&s).unwrap();
    assert_eq!(serde_json::to_string(&e).unwrap(), line);
}

/// The `linearizable` rows: the checker alone on synthetic register histories.
fn linearizable_rows() {
    use fle_chaos::checker::{linearizable, model, Measurements};
    let info: TestInfo = serde_json::from_value(serde_json::json!({
        "name": "bench", "target": "fle", "nodes": ["n1", "n2", "n3"], "workload": "register",
        "nemesis": [], "seed": 1, "time_limit_s": 60.0, "tick_ms": 100, "init_limit": 5,
        "sync_limit": 2, "started_at": "2026-01-01T00:00:00Z", "replay_command": "x",
        "version": "0"
    }))
    .unwrap();
    println!(
        "{} UTC, load average {}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M"),
        load_average()
    );
    let shapes = [
        ("60 s, 5 clients, 5 keys, 50 ops/s", (5, 5, 3_000, 50)),
        ("100000 ops, 10 clients, 10 keys", (10, 10, 100_000, 500)),
    ];
    for (what, (clients, keys, ops, rate)) in shapes {
        let shape = register::Shape {
            clients,
            keys,
            ops,
            rate,
        };
        let lines = register::history(&shape);
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let d = model::digest_lines(&refs, &info.nodes).unwrap();
        let (t, cpu0) = (Instant::now(), cpu_s());
        let f = linearizable::check(&d, &info, &CheckOptions::default());
        let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_s() - cpu0);
        assert_eq!(f.valid, Validity::True, "{}", f.explanation);
        let Measurements::Linearizable(m) = &f.measurements else {
            panic!("linearizable measures")
        };
        println!(
            "linearizable ({what}): {} ops judged on {} keys, wall {:.3} s, CPU {cpu:.3} s, {} states kept; peak memory (VmHWM) {} MiB",
            m.linearized_ops,
            m.keys,
            wall,
            m.states_explored,
            vm_hwm_kib() / 1024
        );
    }
}

fn main() {
    let only = std::env::var("LINEARIZABLE").ok();
    if only.as_deref() != Some("0") {
        linearizable_rows();
    }
    if only.as_deref() == Some("only") {
        return;
    }
    let events: u64 = std::env::var("EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000_000);
    // BENCH_DIR=path keeps the generated run there and reuses it on the next run (repeated
    // measurements on a shared machine, profiling); by default it is a temporary folder.
    let tmp = tempfile::Builder::new()
        .prefix("flc-bench-check")
        .tempdir()
        .unwrap();
    let kept = std::env::var_os("BENCH_DIR").map(std::path::PathBuf::from);
    let dir = kept.as_deref().unwrap_or(tmp.path());
    let t = Instant::now();
    if kept.is_none() || !dir.join("history.jsonl").exists() {
        std::fs::create_dir_all(dir).unwrap();
        generate(dir, events);
    }
    let bytes = std::fs::metadata(dir.join("history.jsonl")).unwrap().len();
    assert_written_as_the_controller_would(&dir.join("history.jsonl"));
    println!(
        "generated {events} events ({:.0} MiB) in {:.1} s",
        bytes as f64 / (1 << 20) as f64,
        t.elapsed().as_secs_f64()
    );
    let base = vm_hwm_kib();

    let opts = CheckOptions::default();
    let t = Instant::now();
    let cpu0 = cpu_s();
    let run = load_run::<()>(&RunDir::open(dir).unwrap()).unwrap().0;
    let parsed = t.elapsed().as_secs_f64();
    let parse_cpu = cpu_s() - cpu0;
    let results = check_loaded(&run, &opts);
    let total = t.elapsed().as_secs_f64();
    let cpu = cpu_s() - cpu0;
    let n = run.digest.events;
    for c in &results.checkers {
        println!("  {:<16} {:?}", c.name, c.valid);
    }
    assert_eq!(
        results.valid,
        Validity::True,
        "the synthetic run must check valid"
    );
    println!(
        "{} UTC, load average {}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M"),
        load_average()
    );
    println!(
        "fast path: {n} events, wall: parse {parsed:.2} s + check {:.2} s = {total:.2} s = {:.2} M events/s ({:.0} MiB/s)",
        total - parsed,
        n as f64 / total / 1e6,
        bytes as f64 / total / (1 << 20) as f64,
    );
    // CPU time per event does not depend on the neighbours: the figure to compare under load.
    println!(
        "fast path: CPU time {cpu:.2} s (parse {parse_cpu:.2} s + check {:.2} s) = {:.0} ns CPU per event ({:.2} M events per CPU second); peak memory (VmHWM) {} MiB (before check: {} MiB)",
        cpu - parse_cpu,
        cpu * 1e9 / n as f64,
        n as f64 / cpu / 1e6,
        vm_hwm_kib() / 1024,
        base / 1024
    );
    drop(run);

    // The same history as a run stores it (zstd frames of about a second of a 5-node run).
    let zdir = dir.join("compressed");
    std::fs::create_dir_all(&zdir).unwrap();
    std::fs::copy(dir.join("test.json"), zdir.join("test.json")).unwrap();
    let zpath = zdir.join(fle_chaos::history::file::WRITTEN);
    if !zpath.exists() {
        let text = std::fs::read(dir.join("history.jsonl")).unwrap();
        let frames = fle_chaos::history::store::compress_lines(&text, 256 << 10).unwrap();
        std::fs::write(&zpath, frames).unwrap();
    }
    let zbytes = std::fs::metadata(&zpath).unwrap().len();
    let (t, cpu0) = (Instant::now(), cpu_s());
    let zrun = load_run::<()>(&RunDir::open(&zdir).unwrap()).unwrap().0;
    let zresults = check_loaded(&zrun, &opts);
    let (ztotal, zcpu) = (t.elapsed().as_secs_f64(), cpu_s() - cpu0);
    assert_eq!(
        zrun.digest.events, n,
        "the compressed copy holds every event"
    );
    assert_eq!(
        serde_json::to_string(&zresults).unwrap(),
        serde_json::to_string(&results).unwrap(),
        "the compressed copy checks exactly as the plain one"
    );
    println!(
        "compressed ({:.1} MiB, {:.0}x smaller): wall {ztotal:.2} s = {:.2} M events/s; CPU {zcpu:.2} s = {:.0} ns per event ({:+.0}% against plain)",
        zbytes as f64 / (1 << 20) as f64,
        bytes as f64 / zbytes as f64,
        n as f64 / ztotal / 1e6,
        zcpu * 1e9 / n as f64,
        (zcpu / cpu - 1.0) * 100.0
    );
    drop(zrun);

    // The general path on a prefix, for comparison (GENERAL=0 skips it, e.g. for profiling).
    if std::env::var("GENERAL").as_deref() == Ok("0") {
        return;
    }
    let prefix = 200_000usize;
    let text = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let cut: String = text
        .lines()
        .take(prefix)
        .map(|l| format!("{l}\n"))
        .collect();
    drop(text);
    let small = dir.join("prefix.jsonl");
    std::fs::write(&small, cut).unwrap();
    let info = TestInfo::read(&dir.join("test.json")).unwrap();
    let cpu0 = cpu_s();
    let evs = read_history(&small).unwrap();
    let _ = check_history(&evs, &info, &opts);
    let s = cpu_s() - cpu0;
    println!(
        "general path (Event + serde_json::Value): {prefix} events, CPU time {s:.2} s = {:.2} M events/s per core",
        prefix as f64 / s / 1e6
    );
}
