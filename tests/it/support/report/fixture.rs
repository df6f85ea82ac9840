//! Test support, not production code: synthetic run folders for the report's tests and its
//! benchmark (`benches/report.rs` includes this file by path), written exactly as the controller
//! writes a run: test.json, history.jsonl with full `api::NodeStatus` reads at 50 Hz per node,
//! client writes, nemesis actions, final logs, results.json and nodes/<n>/ logs.
//!
//! This is a history WRITER, not a protocol simulator: who leads is scripted by one fixed rule
//! (a leader that loses its quorum is noticed 400 ms later, as syncLimit would, and replaced
//! 600 ms after that by the highest reachable sid), no votes are exchanged and nothing here says whether FLE or Zab is right. The one simulator of
//! FLE + Zab lives with the node (fle-node's election and zab tests). What this file gets right
//! is what rendering cares about: the shape, density and line sizes of a real history, with
//! one fault of each kind (leader kill, isolate-leader partition, pause, clock bump) in turn.

use anyhow::Result;
use fle_chaos::api::{self, CountedVote, ElectionSummary, NodeStatus, ServerState, ZabPhase};
use fle_chaos::checker::{self, CheckResult, Results, Validity};
use fle_chaos::history::test_info::TestInfo;
use fle_chaos::history::{node_name, Event, EventType, FaultKind, F, NEMESIS};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::collections::BinaryHeap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What to write.
#[derive(Debug, Clone)]
pub struct FixtureSpec {
    pub name: String,
    pub nodes: usize,
    pub duration_s: f64,
    pub poll_ms: u64,
    pub write_every_ms: u64,
    /// A fault starts every this many seconds (kill, partition, pause, clock in turn).
    pub fault_every_s: f64,
    pub fault_len_s: f64,
    pub seed: u64,
    /// Make the durability checker invalid in results.json.
    pub invalid: bool,
    /// Write results.json at all.
    pub results: bool,
    /// A leader cut off by a partition acknowledges the writes sent to it until it notices
    /// (a seeded bug): those writes are in no final log.
    pub lose_writes: bool,
    /// results.json from the real checkers (`checker::check_run`) instead of made-up results.
    pub real_checkers: bool,
}

impl FixtureSpec {
    /// A 30-second 5-node run: one fault of each kind.
    pub fn small(name: &str) -> Self {
        Self {
            name: name.to_string(),
            nodes: 5,
            duration_s: 30.0,
            poll_ms: 20,
            write_every_ms: 40,
            fault_every_s: 5.0,
            fault_len_s: 3.0,
            seed: 42,
            invalid: false,
            results: true,
            lose_writes: false,
            real_checkers: false,
        }
    }
}

/// What was written, for tests to compare the report against.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub run_dir: PathBuf,
    pub events: u64,
    /// Nemesis actions completed (rows of the fault schedule).
    pub nemesis_actions: usize,
    /// Faults that took effect.
    pub faults: usize,
    pub checkers: Vec<(String, Validity)>,
}

const MS: u64 = 1_000_000;
const ELECTION_NS: u64 = 600 * MS;
/// How long the nodes take to notice a lost leader (ZooKeeper: syncLimit ticks): until then the
/// old leader goes on LEADING and its followers FOLLOWING it, cut off or not, as in real runs.
const NOTICE_NS: u64 = 400 * MS;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    Kill,
    Partition,
    Pause,
    Clock,
}

struct Script {
    spec: FixtureSpec,
    rng: ChaCha8Rng,
    alive: Vec<bool>,
    paused: Vec<bool>,
    isolated: Option<usize>,
    clock_offset_ms: Vec<i64>,
    leader: Option<usize>,
    /// A leader that lost its quorum, and since when, while the nodes have not noticed yet.
    lost: Option<(usize, u64)>,
    epoch: u64,
    counter: u64,
    leaderless_since: u64,
    /// When each node last (re)started: it looks for a while before joining.
    started_ns: Vec<u64>,
    leaders: Vec<(u64, u64)>,
    started_at_ms: i64,
    out: std::io::BufWriter<std::fs::File>,
    index: u64,
    /// Events due later (a write's completion), by time.
    later: BinaryHeap<std::cmp::Reverse<(u64, u64, String)>>,
    seq: u64,
    /// The latest time written: a recorder stamps at append, so times never go back.
    latest: u64,
    nemesis_actions: usize,
    faults: usize,
    /// Each fault that took effect: kind, the time and index of its `info`, its node.
    fault_starts: Vec<(FaultKind, u64, u64, String)>,
    committed: Vec<(u64, u64)>,
}

/// Writes a run folder `<root>/<name>/<timestamp>/` and returns what it holds.
pub fn write_run(root: &Path, spec: &FixtureSpec) -> Result<Fixture> {
    let started_at = chrono::DateTime::parse_from_rfc3339("2026-11-30T04:00:00Z")?
        .with_timezone(&chrono::Utc)
        + chrono::Duration::seconds(spec.seed as i64 % 3600);
    let run_dir = root
        .join(&spec.name)
        .join(started_at.format("%Y%m%dT%H%M%S").to_string());
    std::fs::create_dir_all(&run_dir)?;
    // As `fle-chaos test` does: `latest` marks `root` as the reports root.
    let latest = root.join("latest");
    let _ = std::fs::remove_file(&latest);
    std::os::unix::fs::symlink(run_dir.strip_prefix(root)?, &latest)?;
    let nodes: Vec<String> = (1..=spec.nodes as u64).map(node_name).collect();
    let info = TestInfo {
        name: spec.name.clone(),
        target: "fle".into(),
        nodes: nodes.clone(),
        observers: Vec::new(),
        workload: "writes".into(),
        nemesis: vec![
            "kill".into(),
            "partition".into(),
            "pause".into(),
            "clock".into(),
        ],
        seed: spec.seed,
        time_limit_s: spec.duration_s,
        tick_ms: 200,
        init_limit: 10,
        sync_limit: 5,
        started_at,
        replay_command: format!(
            "fle-chaos test --nodes {} --workload writes --nemesis kill,partition,pause,clock \
             --time-limit {} --seed {}",
            spec.nodes, spec.duration_s, spec.seed
        ),
        version: env!("CARGO_PKG_VERSION").into(),
        history_format: fle_chaos::history::FORMAT_VERSION,
        settings: serde_json::from_value(
            json!({"observe_hz": 1000 / spec.poll_ms, "nemesis_interval_s": spec.fault_every_s}),
        )
        .expect("a settings object"),
    };
    info.write(&run_dir.join("test.json"))?;
    for n in &nodes {
        let dir = run_dir.join("nodes").join(n);
        std::fs::create_dir_all(dir.join("data"))?;
        std::fs::write(dir.join("node.log"), format!("{n}: started\n"))?;
    }
    std::fs::write(
        run_dir.join("controller.log"),
        "controller: synthetic run\n",
    )?;

    let mut script = Script {
        spec: spec.clone(),
        rng: ChaCha8Rng::seed_from_u64(spec.seed),
        alive: vec![true; spec.nodes],
        paused: vec![false; spec.nodes],
        isolated: None,
        clock_offset_ms: vec![0; spec.nodes],
        leader: None,
        lost: None,
        epoch: 0,
        counter: 0,
        leaderless_since: 0,
        started_ns: vec![0; spec.nodes],
        leaders: Vec::new(),
        started_at_ms: started_at.timestamp_millis(),
        out: std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(run_dir.join("history.jsonl"))?,
        ),
        index: 0,
        later: BinaryHeap::new(),
        seq: 0,
        latest: 0,
        nemesis_actions: 0,
        faults: 0,
        fault_starts: Vec::new(),
        committed: Vec::new(),
    };
    script.run()?;
    let checkers = if spec.real_checkers {
        let results = checker::check_run(&run_dir, &checker::CheckOptions::default())?;
        results
            .checkers
            .iter()
            .map(|c| (c.name.clone(), c.valid))
            .collect()
    } else {
        write_results(&run_dir, spec, &script)?
    };
    Ok(Fixture {
        run_dir,
        events: script.index,
        nemesis_actions: script.nemesis_actions,
        faults: script.faults,
        checkers,
    })
}

impl Script {
    fn quorum(&self) -> usize {
        fle_chaos::api::quorum(self.spec.nodes)
    }

    fn reachable(&self, i: usize) -> bool {
        self.alive[i] && !self.paused[i]
    }

    fn connected(&self, a: usize, b: usize) -> bool {
        self.reachable(a)
            && self.reachable(b)
            && (a == b || (self.isolated != Some(a) && self.isolated != Some(b)))
    }

    fn run(&mut self) -> Result<()> {
        let poll = self.spec.poll_ms * MS;
        let end = (self.spec.duration_s * 1e9) as u64;
        let fault_every = (self.spec.fault_every_s * 1e9) as u64;
        let fault_len = (self.spec.fault_len_s * 1e9) as u64;
        let write_every = self.spec.write_every_ms * MS;
        let mut next_write = 0u64;
        let mut fault_no = 0usize;
        let mut undo: Option<(u64, Fault, usize)> = None;
        let mut t = 0u64;
        while t < end {
            self.flush_until(t)?;
            if let Some((at, fault, node)) = undo {
                if t >= at {
                    self.undo(t, fault, node)?;
                    undo = None;
                }
            }
            // Faults stop 5 s before the end: the final phase heals and lets the cluster recover.
            if undo.is_none()
                && t >= fault_every * (fault_no as u64 + 1)
                && t + fault_len + 5_000 * MS < end
            {
                let fault =
                    [Fault::Kill, Fault::Partition, Fault::Pause, Fault::Clock][fault_no % 4];
                let node = self.inject(t, fault)?;
                undo = Some((t + fault_len, fault, node));
                fault_no += 1;
            }
            self.elect(t);
            for i in 0..self.spec.nodes {
                self.status(t + i as u64 * MS / 4, i)?;
            }
            while next_write <= t {
                self.write(next_write + MS / 2)?;
                next_write += write_every;
            }
            t += poll;
        }
        if let Some((_, fault, node)) = undo {
            self.undo(t, fault, node)?;
        }
        self.nemesis(t, F::Heal, json!({"final": true, "nodes": []}))?;
        self.flush_until(u64::MAX)?;
        self.final_logs(t + 10 * MS)?;
        self.out.flush()?;
        Ok(())
    }

    fn elect(&mut self, t: u64) {
        if let Some(l) = self.leader {
            let backers = (0..self.spec.nodes)
                .filter(|&j| self.connected(l, j))
                .count();
            if backers < self.quorum() {
                self.leader = None;
                self.lost = Some((l, t));
                self.leaderless_since = t + NOTICE_NS;
            }
        }
        if self.lost.is_some_and(|(_, since)| t >= since + NOTICE_NS) {
            self.lost = None;
        }
        if self.leader.is_none() && t >= self.leaderless_since + ELECTION_NS {
            let candidates: Vec<usize> = (0..self.spec.nodes)
                .filter(|&i| self.reachable(i) && self.isolated != Some(i))
                .collect();
            if candidates.len() >= self.quorum() {
                let l = *candidates.last().expect("a quorum is not empty");
                self.leader = Some(l);
                self.epoch += 1;
                self.counter = 0;
                self.leaders.push((l as u64 + 1, self.epoch));
            }
        }
    }

    fn state_of(&self, i: usize, t: u64) -> (ServerState, Option<u64>) {
        if let Some((old, _)) = self.lost {
            return match i == old {
                true => (ServerState::Leading, Some(old as u64 + 1)),
                false if t >= self.started_ns[i] + ELECTION_NS => {
                    (ServerState::Following, Some(old as u64 + 1))
                }
                false => (ServerState::Looking, None),
            };
        }
        match self.leader {
            Some(l) if l == i => (ServerState::Leading, Some(l as u64 + 1)),
            Some(l) if self.connected(i, l) && t >= self.started_ns[i] + ELECTION_NS => {
                (ServerState::Following, Some(l as u64 + 1))
            }
            _ => (ServerState::Looking, None),
        }
    }

    fn status(&mut self, t: u64, i: usize) -> Result<()> {
        let name = node_name(i as u64 + 1);
        if !self.reachable(i) {
            let kind = if self.alive[i] {
                EventType::Info
            } else {
                EventType::Fail
            };
            let error = if self.alive[i] {
                "timeout after 100 ms"
            } else {
                "connection refused"
            };
            return self.emit(
                t,
                &name,
                kind,
                F::Status,
                Some(&name),
                json!({"error": error}),
            );
        }
        let (state, leader) = self.state_of(i, t);
        let zxid = api::make_zxid(self.epoch, self.counter);
        let votes = (1..=self.spec.nodes as u64)
            .map(|sid| CountedVote {
                sid,
                leader: self.leader.map(|l| l as u64 + 1).unwrap_or(sid),
                zxid,
                peer_epoch: self.epoch,
                round: None,
                state: None,
            })
            .collect();
        let status = NodeStatus {
            sid: i as u64 + 1,
            state,
            leader,
            peer_epoch: self.epoch,
            accepted_epoch: self.epoch,
            config: None,
            election_epoch: self.epoch + 1,
            last_zxid: zxid,
            last_zxid_hex: format!("{zxid:#x}"),
            last_committed_zxid: zxid,
            zab_phase: if state == ServerState::Looking {
                ZabPhase::Election
            } else {
                ZabPhase::Broadcast
            },
            wall_clock_ms: self.started_at_ms + (t / MS) as i64 + self.clock_offset_ms[i],
            uptime_ms: (t - self.started_ns[i]) / MS,
            last_election: Some(ElectionSummary {
                round: self.epoch + 1,
                leader: self.leader.map(|l| l as u64 + 1).unwrap_or(0),
                zxid,
                peer_epoch: self.epoch,
                votes,
                took_ms: 212,
                received: Vec::new(),
                joined: false,
                own_round: None,
            }),
            peer_type: Default::default(),
        };
        self.emit(
            t,
            &name,
            EventType::Ok,
            F::Status,
            Some(&name),
            serde_json::to_value(status)?,
        )
    }

    fn write(&mut self, t: u64) -> Result<()> {
        let v = self.seq;
        self.emit(
            t,
            "0",
            EventType::Invoke,
            F::Write,
            None,
            json!({"value": v}),
        )?;
        if let Some((old, _)) = self
            .lost
            .filter(|(old, _)| self.spec.lose_writes && self.reachable(*old))
        {
            // The stale leader acknowledges in its old epoch; nobody else ever logs it.
            self.counter += 1;
            let zxid = api::make_zxid(self.epoch, self.counter);
            let node = node_name(old as u64 + 1);
            return self.schedule(
                t + 3 * MS,
                "0",
                EventType::Ok,
                F::Write,
                Some(&node),
                json!({"value": v, "zxid": zxid}),
            );
        }
        let (kind, latency, value) = match self.leader {
            Some(_) if self.rng.gen_bool(0.995) => {
                self.counter += 1;
                let zxid = api::make_zxid(self.epoch, self.counter);
                self.committed.push((zxid, v));
                (
                    EventType::Ok,
                    self.rng.gen_range(2..12) * MS,
                    json!({"value": v, "zxid": zxid}),
                )
            }
            Some(_) => (
                EventType::Info,
                1000 * MS,
                json!({"error": "timeout", "value": v}),
            ),
            None => (
                EventType::Fail,
                self.rng.gen_range(1..4) * MS,
                json!({"error": "no leader", "value": v}),
            ),
        };
        self.schedule(t + latency, "0", kind, F::Write, None, value)
    }

    fn inject(&mut self, t: u64, fault: Fault) -> Result<usize> {
        let leader = self.leader.unwrap_or(self.spec.nodes - 1);
        let follower = (leader + 1 + self.rng.gen_range(0..self.spec.nodes - 1)) % self.spec.nodes;
        let (node, f, value) = match fault {
            Fault::Kill => (
                leader,
                F::Kill,
                json!({"nodes": [node_name(leader as u64 + 1)], "pids": [40000 + leader]}),
            ),
            Fault::Pause => (
                follower,
                F::Pause,
                json!({"nodes": [node_name(follower as u64 + 1)], "pids": [40000 + follower]}),
            ),
            Fault::Partition => {
                let me = node_name(leader as u64 + 1);
                let others: Vec<String> = (0..self.spec.nodes)
                    .filter(|&j| j != leader)
                    .map(|j| node_name(j as u64 + 1))
                    .collect();
                let mut drops = serde_json::Map::new();
                drops.insert(me.clone(), json!(others));
                for o in &others {
                    drops.insert(o.clone(), json!([me]));
                }
                (
                    leader,
                    F::Partition,
                    json!({"nodes": [me], "shape": "isolate-leader", "drops": drops}),
                )
            }
            Fault::Clock => (
                follower,
                F::Clock,
                json!({"nodes": [node_name(follower as u64 + 1)], "mode": "bump", "delta_ms": -600000}),
            ),
        };
        self.nemesis(t, f, value)?;
        match fault {
            Fault::Kill => self.alive[node] = false,
            Fault::Pause => self.paused[node] = true,
            Fault::Partition => self.isolated = Some(node),
            Fault::Clock => self.clock_offset_ms[node] = -600_000,
        }
        self.faults += 1;
        let kind = match fault {
            Fault::Kill => FaultKind::Kill,
            Fault::Partition => FaultKind::Partition,
            Fault::Pause => FaultKind::Pause,
            Fault::Clock => FaultKind::Clock,
        };
        // `nemesis` wrote the action's info last.
        self.fault_starts
            .push((kind, t + 3 * MS, self.index - 1, node_name(node as u64 + 1)));
        Ok(node)
    }

    fn undo(&mut self, t: u64, fault: Fault, node: usize) -> Result<()> {
        let nodes = json!({"nodes": [node_name(node as u64 + 1)]});
        match fault {
            Fault::Kill => {
                self.nemesis(t, F::Start, nodes)?;
                self.alive[node] = true;
                self.started_ns[node] = t;
            }
            Fault::Pause => {
                self.nemesis(t, F::Resume, nodes)?;
                self.paused[node] = false;
            }
            Fault::Partition => {
                self.nemesis(t, F::Heal, json!({"final": false}))?;
                self.isolated = None;
                self.started_ns[node] = t;
            }
            Fault::Clock => {
                self.nemesis(
                    t,
                    F::Clock,
                    json!({"nodes": [node_name(node as u64 + 1)], "mode": "reset"}),
                )?;
                self.clock_offset_ms[node] = 0;
            }
        }
        Ok(())
    }

    fn nemesis(&mut self, t: u64, f: F, value: Value) -> Result<()> {
        self.emit(t, NEMESIS, EventType::Invoke, f, None, value.clone())?;
        self.emit(t + 3 * MS, NEMESIS, EventType::Info, f, None, value)?;
        self.nemesis_actions += 1;
        Ok(())
    }

    fn final_logs(&mut self, t: u64) -> Result<()> {
        let entries: Vec<Value> = self
            .committed
            .iter()
            .map(|(z, v)| json!({"zxid": z, "value": v}))
            .collect();
        let last = self.committed.last().map(|c| c.0).unwrap_or(0);
        for i in 0..self.spec.nodes {
            let name = node_name(i as u64 + 1);
            let value = json!({"entries": entries, "last_committed_zxid": last});
            self.emit(
                t + i as u64 * MS,
                "final",
                EventType::Ok,
                F::FinalLog,
                Some(&name),
                value,
            )?;
        }
        Ok(())
    }

    fn schedule(
        &mut self,
        t: u64,
        process: &str,
        kind: EventType,
        f: F,
        node: Option<&str>,
        value: Value,
    ) -> Result<()> {
        let line = serde_json::to_string(&Event {
            index: 0,
            time: t,
            process: process.into(),
            kind,
            f,
            node: node.map(String::from),
            value,
        })?;
        self.seq += 1;
        self.later.push(std::cmp::Reverse((t, self.seq, line)));
        Ok(())
    }

    fn emit(
        &mut self,
        t: u64,
        process: &str,
        kind: EventType,
        f: F,
        node: Option<&str>,
        value: Value,
    ) -> Result<()> {
        self.flush_until(t)?;
        self.seq += 1;
        let t = t.max(self.latest);
        self.latest = t;
        let event = Event {
            index: self.index,
            time: t,
            process: process.into(),
            kind,
            f,
            node: node.map(String::from),
            value,
        };
        serde_json::to_writer(&mut self.out, &event)?;
        self.out.write_all(b"\n")?;
        self.index += 1;
        Ok(())
    }

    /// Writes the delayed events due before `t`, renumbering them in history order.
    fn flush_until(&mut self, t: u64) -> Result<()> {
        while self.later.peek().is_some_and(|r| r.0 .0 < t) {
            let std::cmp::Reverse((_, _, line)) = self.later.pop().expect("peeked");
            let mut e: Event = serde_json::from_str(&line)?;
            e.index = self.index;
            e.time = e.time.max(self.latest);
            self.latest = e.time;
            serde_json::to_writer(&mut self.out, &e)?;
            self.out.write_all(b"\n")?;
            self.index += 1;
        }
        Ok(())
    }
}

fn write_results(
    run_dir: &Path,
    spec: &FixtureSpec,
    script: &Script,
) -> Result<Vec<(String, Validity)>> {
    let checkers = vec![
        CheckResult {
            applicable: true,
            kinds: Default::default(),
            name: "election-safety".into(),
            valid: Validity::True,
            explanation: format!(
                "{} leaders in {} epochs, never two in one epoch.",
                script.leaders.len(),
                script.epoch
            ),
            evidence: vec![],
            measurements: checker::Measurements::Other(json!({"leaders": script.leaders.len()})),
        },
        CheckResult {
            applicable: true,
            kinds: Default::default(),
            name: "durability".into(),
            valid: if spec.invalid {
                Validity::False
            } else {
                Validity::True
            },
            explanation: if spec.invalid {
                "acknowledged write 17 (zxid 0x100000011) is missing from n2's final log <lost>"
                    .into()
            } else {
                "every acknowledged write is in every node's final log, in one order".into()
            },
            evidence: if spec.invalid {
                vec![
                    checker::Evidence::quoting(
                        "acknowledged",
                        json!({"index": 1234, "type": "ok", "f": "write", "value": {"value": 17, "zxid": 4294967313u64}}),
                    ),
                    // One long line of JSON, as real evidence often is: the page must fold it.
                    checker::Evidence::quoting(
                        "missing",
                        json!({"node": "n2", "missing": (0..80u64).map(|k| 4294967313u64 + k).collect::<Vec<_>>()}),
                    ),
                ]
            } else {
                vec![]
            },
            measurements: checker::Measurements::None,
        },
        CheckResult {
            applicable: true,
            kinds: Default::default(),
            name: "epoch-monotonicity".into(),
            valid: if spec.invalid {
                Validity::Unknown
            } else {
                Validity::True
            },
            explanation: if spec.invalid {
                "n4 was never read after its restart".into()
            } else {
                "no node's epoch ever went back".into()
            },
            evidence: vec![],
            measurements: checker::Measurements::None,
        },
        CheckResult {
            applicable: true,
            kinds: Default::default(),
            name: "recovery".into(),
            valid: Validity::True,
            explanation: "a quorum agreed on one leader 0.7 s after the final heal".into(),
            evidence: vec![],
            measurements: checker::Measurements::None,
        },
    ];
    let valid = checkers.iter().fold(Validity::True, |a, c| a.and(c.valid));
    let out = checkers.iter().map(|c| (c.name.clone(), c.valid)).collect();
    if spec.results {
        let results = Results {
            valid,
            checkers,
            coverage: None,
            known: Vec::new(),
            resembles: Vec::new(),
        };
        std::fs::write(
            run_dir.join("results.json"),
            serde_json::to_string_pretty(&results)?,
        )?;
    }
    Ok(out)
}
