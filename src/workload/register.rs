//! The `register` workload (Jepsen's): `keys` keys, each a versioned register (a znode), and
//! `clients` clients, each bound to one server as a ZooKeeper session is, doing random reads,
//! sync + reads, sets and compare-and-sets on random keys, recorded as
//! `history::register::RegisterValue`s for the `linearizable` and `session-order` checkers.
//!
//! - Client `i` is bound to server `i mod N` and first creates its share of the keys (key `j`
//!   by client `j mod clients`), then runs the mix at its share of `rate`.
//! - A server that will not serve a read (refused connection, 503, no session) makes the
//!   client move to the next server, as ZooKeeper's client moves its session when the server
//!   drops it; a write refused for want of a leader, or a refusal (exists, no such key, another
//!   version), is the server's answer and keeps it.
//! - Values are 1, 2, 3, ... across all clients, unique by construction, so a read names the
//!   write it saw. A cas expects the version this client last saw of the key.
//! - An `info` (unknown outcome) retires the process number: the client goes on as
//!   `process + clients`, as Jepsen does, on the same server (whether it still serves, the
//!   next read tells). A move is a new session (ZooKeeper's sessions here are one per
//!   server), so it takes a new number too: `session-order` judges one process as one
//!   session on one server.

use crate::api::DataOp;
use crate::control::sut::{DataOutcome, Target};
use crate::history::recorder::Recorder;
use crate::history::register::RegisterValue;
use crate::history::{EventType, F};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What every client shares.
#[derive(Clone)]
pub struct Clients {
    pub target: Arc<dyn Target>,
    pub recorder: Arc<Recorder>,
    /// The servers clients bind to (every node: followers and observers serve reads too).
    pub nodes: Vec<String>,
    pub concurrency: usize,
    /// Operations per second, all clients together.
    pub rate: f64,
    pub keys: usize,
    /// Values are 1, 2, 3, ... across all clients.
    pub next_value: Arc<AtomicU64>,
    /// Each client's choices come from `seed` and its number.
    pub seed: u64,
}

/// The name of key `j`.
pub fn key_name(j: usize) -> String {
    format!("k{j}")
}

/// One operation a client chose.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Read { key: String, sync: bool },
    Write(DataOp),
}

/// One client's own state: where it is bound and what it has seen.
struct Session {
    process: usize,
    node: usize,
    /// The last version this client saw of each key (read or written).
    seen: HashMap<String, i64>,
    /// Keys this client still has to create.
    to_create: VecDeque<usize>,
    /// The server would not serve: move to the next one after this operation.
    moved: bool,
    rng: ChaCha8Rng,
}

/// Runs client `id` (0-based) until `stop` turns true.
pub async fn client(id: usize, c: Clients, mut stop: watch::Receiver<bool>) {
    if c.nodes.is_empty() || c.keys == 0 {
        return;
    }
    let period = Duration::from_secs_f64(c.concurrency as f64 / c.rate);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut s = Session {
        process: id,
        node: id % c.nodes.len(),
        seen: HashMap::new(),
        to_create: (id..c.keys).step_by(c.concurrency).collect(),
        moved: false,
        rng: ChaCha8Rng::seed_from_u64(c.seed ^ (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
    };
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let op = choose(&mut s, &c);
        // An operation runs to its own timeout even when the run stops, so that its outcome
        // is recorded rather than left as a dangling invoke.
        run_op(&mut s, &c, op).await;
    }
}

/// The next operation: this client's creates first, then [`mix`].
fn choose(s: &mut Session, c: &Clients) -> Op {
    let value = || c.next_value.fetch_add(1, Ordering::Relaxed) as i64 + 1;
    if let Some(&j) = s.to_create.front() {
        return Op::Write(DataOp::Create {
            key: key_name(j),
            value: value(),
        });
    }
    mix(s, c.keys, value)
}

/// A quarter each of reads, sync + reads, sets and compare-and-sets, on a random key of
/// `keys`; `value` gives the next unique value.
fn mix(s: &mut Session, keys: usize, mut value: impl FnMut() -> i64) -> Op {
    let key = key_name(s.rng.gen_range(0..keys));
    match s.rng.gen_range(0..4) {
        0 => Op::Read { key, sync: false },
        1 => Op::Read { key, sync: true },
        2 => Op::Write(DataOp::Set {
            key,
            value: value(),
        }),
        _ => Op::Write(DataOp::Cas {
            version: s.seen.get(&key).copied().unwrap_or(0),
            key,
            value: value(),
        }),
    }
}

/// The history's value of an operation's invoke.
fn invoked(op: &Op) -> (F, RegisterValue) {
    match op {
        Op::Read { key, sync } => (
            F::Read,
            RegisterValue {
                key: key.clone(),
                sync: *sync,
                ..Default::default()
            },
        ),
        Op::Write(w) => {
            let (f, value, expect) = match w {
                DataOp::Create { value, .. } => (F::Create, *value, None),
                DataOp::Set { value, .. } => (F::Set, *value, None),
                DataOp::Cas { version, value, .. } => (F::Cas, *value, Some(*version)),
            };
            let v = RegisterValue {
                key: w.key().to_string(),
                value: Some(value),
                expect,
                ..Default::default()
            };
            (f, v)
        }
    }
}

/// Invokes `op` on the client's server, records its completion and moves the client on.
async fn run_op(s: &mut Session, c: &Clients, op: Op) {
    let node_index = s.node;
    let node = c.nodes[node_index].clone();
    let p = s.process.to_string();
    let (f, mut v) = invoked(&op);
    c.recorder
        .record(&p, EventType::Invoke, f, Some(&node), v.to_json());
    let outcome = match &op {
        Op::Read { key, sync } => match c.target.data_read(&node, key, *sync).await {
            DataOutcome::Ok(r) => {
                v.value = r.value;
                DataOutcome::Ok((r.version, r.zxid))
            }
            other => other.map_ok(|_| (0, 0)),
        },
        Op::Write(w) => c
            .target
            .data_write(&node, w.clone())
            .await
            .map_ok(|w| (w.version, w.zxid)),
    };
    let kind = match outcome {
        DataOutcome::Ok((version, zxid)) => {
            (v.version, v.zxid) = (Some(version), Some(zxid));
            s.seen.insert(v.key.clone(), version);
            if f == F::Create {
                s.to_create.pop_front();
            }
            EventType::Ok
        }
        DataOutcome::Refused(error) => {
            if f == F::Create {
                s.to_create.pop_front(); // it exists: someone created it
            }
            v.error = Some(error);
            EventType::Fail
        }
        DataOutcome::Unavailable(error) => {
            v.error = Some(error);
            // A server that will not serve a read has dropped its clients (a ZooKeeper server
            // closes its sessions when it leaves broadcast): move on. A write refused for want
            // of a leader is only a `fail`; the next read tells whether the server still serves.
            if f == F::Read {
                s.moved = true;
            }
            EventType::Fail
        }
        DataOutcome::Info(error) => {
            v.error = Some(error);
            EventType::Info
        }
    };
    c.recorder.record(&p, kind, f, Some(&node), v.to_json());
    if std::mem::take(&mut s.moved) {
        s.node = (s.node + 1) % c.nodes.len();
    }
    if kind == EventType::Info || s.node != node_index {
        // Jepsen's rule after an unknown outcome; and a new server is a new session.
        s.process += c.concurrency;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: usize, clients: usize, keys: usize) -> Session {
        Session {
            process: id,
            node: 0,
            seen: HashMap::new(),
            to_create: (id..keys).step_by(clients).collect(),
            moved: false,
            rng: ChaCha8Rng::seed_from_u64(7),
        }
    }

    #[test]
    fn each_key_is_created_by_exactly_one_client() {
        let creators: Vec<Vec<usize>> = (0..3)
            .map(|id| session(id, 3, 7).to_create.into_iter().collect())
            .collect();
        assert_eq!(creators, [vec![0, 3, 6], vec![1, 4], vec![2, 5]]);
    }

    #[test]
    fn the_mix_has_every_kind_and_a_cas_expects_the_version_seen() {
        let mut s = session(0, 1, 0);
        s.seen.insert("k0".into(), 4);
        let mut next = 0;
        let ops: Vec<Op> = (0..400)
            .map(|_| {
                mix(&mut s, 1, || {
                    next += 1;
                    next
                })
            })
            .collect();
        let count = |p: fn(&Op) -> bool| ops.iter().filter(|o| p(o)).count();
        for n in [
            count(|o| matches!(o, Op::Read { sync: false, .. })),
            count(|o| matches!(o, Op::Read { sync: true, .. })),
            count(|o| matches!(o, Op::Write(DataOp::Set { .. }))),
            count(|o| matches!(o, Op::Write(DataOp::Cas { .. }))),
        ] {
            assert!((60..=140).contains(&n), "a quarter each of 400, got {n}");
        }
        let cas_versions: Vec<i64> = ops
            .iter()
            .filter_map(|o| match o {
                Op::Write(DataOp::Cas { version, .. }) => Some(*version),
                _ => None,
            })
            .collect();
        assert!(cas_versions.iter().all(|v| *v == 4), "{cas_versions:?}");
    }

    #[test]
    fn the_history_names_the_op_as_the_register_table_says() {
        let (f, v) = invoked(&Op::Write(DataOp::Cas {
            key: "k2".into(),
            version: 3,
            value: 9,
        }));
        assert_eq!(f, F::Cas);
        assert_eq!(
            v.to_json().to_string(),
            r#"{"expect":3,"key":"k2","value":9}"#
        );
        let (f, v) = invoked(&Op::Read {
            key: "k0".into(),
            sync: true,
        });
        assert_eq!(f, F::Read);
        assert_eq!(v.to_json().to_string(), r#"{"key":"k0","sync":true}"#);
    }
}
