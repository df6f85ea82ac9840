//! Fuzzing fle-node's decoders of outside bytes on the stable toolchain (issue 18): election
//! hellos and notification frames, Zab frames, txnlog images, zoo.cfg text and `POST /write`
//! bodies. Each decoder gets `FLC_FUZZ_INPUTS` (default 1,000,000) inputs from a seeded ChaCha
//! generator: mutations (bit flips, interesting bytes, splices, truncations, length-field
//! rewrites) of valid seeds, plus wholly random bytes. A panic prints the decoder, seed and
//! input (then becomes a unit test next to the decoder); memory is reported as RSS before,
//! after and the process peak, which must stay bounded.
//!
//! `cargo bench --bench fuzz` (env: FLC_FUZZ_INPUTS, FLC_FUZZ_SEED).
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use fle_node::api::{ServerState, WriteRequest};
use fle_node::config;
use fle_node::txnlog::{self, Txn, TxnLog};
use fle_node::wire::{self, HelloStart, Notification};
use fle_node::zab::messages::{decode_frame, Msg};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Peak memory any decoder may reach (the process's VmHWM).
const PEAK_LIMIT_KIB: u64 = 256 * 1024;

fn proc_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// One mutation of `seed` (or random bytes, one time in ten).
fn mutate(rng: &mut ChaCha8Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if rng.gen_ratio(1, 10) {
        let len = rng.gen_range(0..256);
        return (0..len).map(|_| rng.gen()).collect();
    }
    let mut b = seeds[rng.gen_range(0..seeds.len())].clone();
    for _ in 0..rng.gen_range(1..5) {
        let len = b.len();
        match rng.gen_range(0..8) {
            0 if len > 0 => {
                let i = rng.gen_range(0..len);
                b[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if len > 0 => {
                let i = rng.gen_range(0..len);
                b[i] = [0, 0xff, 0x7f, 0x80, 1, 0xfe][rng.gen_range(0..6)];
            }
            2 => b.truncate(rng.gen_range(0..=len)),
            3 => {
                let i = rng.gen_range(0..=len);
                let extra: Vec<u8> = (0..rng.gen_range(1..64)).map(|_| rng.gen()).collect();
                b.splice(i..i, extra);
            }
            4 if len >= 4 => {
                // Rewrite a 4-byte field (lengths live in such fields) with an edge value.
                let i = rng.gen_range(0..=len - 4);
                let v: u32 = [0, 1, u32::MAX, i32::MAX as u32, 0x8000_0000, len as u32 + 1]
                    [rng.gen_range(0..6)];
                b[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
            5 if len > 1 => {
                let (i, j) = (rng.gen_range(0..len), rng.gen_range(0..len));
                let (i, j) = (i.min(j), i.max(j));
                b.drain(i..j);
            }
            6 => {
                let other = &seeds[rng.gen_range(0..seeds.len())];
                let at = rng.gen_range(0..=other.len());
                b.extend_from_slice(&other[at..]);
            }
            _ => {
                let i = rng.gen_range(0..=len);
                b.insert(i, rng.gen());
            }
        }
    }
    b
}

/// Runs `decode` on `inputs` generated inputs; panics (after printing the input) on a panic.
fn fuzz(name: &str, seed: u64, inputs: usize, seeds: &[Vec<u8>], decode: impl Fn(&[u8]) -> bool) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let before = proc_kib("VmRSS:");
    let t0 = Instant::now();
    let mut accepted = 0usize;
    for i in 0..inputs {
        let input = mutate(&mut rng, seeds);
        match catch_unwind(AssertUnwindSafe(|| decode(&input))) {
            Ok(ok) => accepted += usize::from(ok),
            Err(_) => {
                eprintln!("{name}: decoder panicked on input #{i} (seed {seed}): {input:02x?}");
                std::process::exit(1);
            }
        }
    }
    let took = t0.elapsed();
    let (after, peak) = (proc_kib("VmRSS:"), proc_kib("VmHWM:"));
    println!(
        "{name:<22} {inputs} inputs in {:>6.2} s ({:>5.0} k/s), {accepted} decoded whole, no panic; RSS {} -> {} KiB, peak {} KiB",
        took.as_secs_f64(),
        inputs as f64 / took.as_secs_f64() / 1000.0,
        before,
        after,
        peak
    );
    assert!(peak <= PEAK_LIMIT_KIB, "{name}: peak RSS {peak} KiB");
}

/// The election port's reader, on bytes: hello, then length-prefixed notifications.
fn decode_election_stream(b: &[u8]) -> bool {
    let i64_at = |at: usize| -> Option<i64> {
        Some(i64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
    };
    let i32_at = |at: usize| -> Option<i32> {
        Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let Some(first) = i64_at(0) else { return false };
    let mut pos = match wire::hello_start(first) {
        Ok(HelloStart::LegacySid(_)) => 8,
        Ok(HelloStart::Versioned) => {
            let (Some(_sid), Some(len)) = (i64_at(8), i32_at(16)) else {
                return false;
            };
            let Ok(len) = wire::check_hello_addr_len(len) else {
                return false;
            };
            20 + len
        }
        Err(_) => return false,
    };
    let mut whole = true;
    while let Some(len) = i32_at(pos) {
        let Ok(len) = wire::check_frame_length(len) else {
            return false;
        };
        let Some(payload) = b.get(pos + 4..pos + 4 + len) else {
            return false;
        };
        whole &= wire::decode_notification(payload).is_ok();
        pos += 4 + len;
    }
    whole
}

fn notification(state: ServerState, leader: u64, config: &[u8]) -> Notification {
    Notification {
        state,
        leader,
        zxid: 0x2_0000_0007,
        election_epoch: 3,
        peer_epoch: 2,
        version: 2,
        config: config.to_vec(),
    }
}

fn main() {
    let inputs: usize = std::env::var("FLC_FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let seed: u64 = std::env::var("FLC_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(18);
    println!(
        "fle-node decoder fuzzing, {} UTC, seed {seed}, {inputs} inputs per decoder",
        chrono::Utc::now().format("%Y-%m-%d %H:%M")
    );
    // Panics are caught and reported with their input; keep the default hook quiet.
    std::panic::set_hook(Box::new(|_| {}));

    // Election: notifications alone, and whole streams (hello + frames).
    let notes: Vec<Vec<u8>> = [
        notification(ServerState::Looking, 1, b""),
        notification(
            ServerState::Leading,
            3,
            b"server.1=127.0.0.1:2001:3001:participant\nversion=0",
        ),
        notification(ServerState::Following, 2, b"version=0"),
    ]
    .iter()
    .map(wire::encode_notification)
    .chain([vec![0u8; 28], vec![0u8; 40]])
    .collect();
    fuzz("notification", seed, inputs, &notes, |b| {
        wire::decode_notification(b).is_ok()
    });
    let streams: Vec<Vec<u8>> = notes
        .iter()
        .map(|n| {
            [
                wire::encode_hello(2, "127.0.0.1:3002"),
                wire::frame(n),
                wire::frame(n),
            ]
            .concat()
        })
        .chain([[3i64.to_be_bytes().to_vec(), wire::frame(&notes[0])].concat()])
        .collect();
    fuzz(
        "election stream",
        seed + 1,
        inputs,
        &streams,
        decode_election_stream,
    );

    // Zab: a stream of frames as the quorum-port reader sees it.
    let value = serde_json::json!({"k": [1, 2, {"x": "y"}]});
    let msgs = [
        Msg::FollowerInfo {
            sid: 2,
            accepted_epoch: 1,
            last_zxid: 0x1_0000_0003,
        },
        Msg::LeaderInfo { epoch: 2 },
        Msg::AckEpoch {
            current_epoch: 1,
            last_zxid: 5,
        },
        Msg::Diff { last_zxid: 9 },
        Msg::Trunc { zxid: 4 },
        Msg::Snap { last_zxid: 9 },
        Msg::Txn {
            zxid: 7,
            value: value.clone(),
        },
        Msg::NewLeader {
            zxid: 0x2_0000_0000,
        },
        Msg::Ack { zxid: 7 },
        Msg::UpToDate { committed_zxid: 7 },
        Msg::Proposal {
            zxid: 8,
            value: value.clone(),
        },
        Msg::Commit { zxid: 8 },
        Msg::Ping,
    ];
    let frames: Vec<Vec<u8>> = msgs
        .iter()
        .map(|m| {
            let mut b = Vec::new();
            m.encode(&mut b);
            b
        })
        .chain([{
            let mut b = Vec::new();
            for m in &msgs {
                m.encode(&mut b);
            }
            b
        }])
        .collect();
    fuzz("zab frames", seed + 2, inputs, &frames, |b| {
        let mut pos = 0;
        loop {
            match decode_frame(&b[pos..]) {
                Ok(Some((_, n))) => pos += n,
                Ok(None) => return pos == b.len(),
                Err(_) => return false,
            }
        }
    });

    // txnlog: images of real logs (written by TxnLog itself).
    let dir = tempfile::Builder::new()
        .prefix("flc-fuzz-")
        .tempdir()
        .expect("temp dir");
    let mut images = Vec::new();
    for n in [0u64, 1, 3, 8] {
        let path = dir.path().join(format!("log{n}"));
        let (mut log, _) = TxnLog::open(&path).expect("open a log");
        let txns: Vec<Txn> = (1..=n)
            .map(|i| Txn {
                zxid: 0x1_0000_0000 + i,
                value: serde_json::json!(format!("v{i}")),
            })
            .collect();
        log.append(&txns).expect("append");
        log.commit(txns.last().map_or(0, |t| t.zxid))
            .expect("commit");
        log.sync().expect("sync");
        images.push(std::fs::read(&path).expect("read the log"));
    }
    fuzz("txnlog image", seed + 3, inputs, &images, |b| {
        matches!(txnlog::decode_image(b), Ok((_, _, None)))
    });

    // zoo.cfg text (bytes as an operator's editor might leave them, lossily decoded).
    let cfgs: Vec<Vec<u8>> = [
        "tickTime=200\ninitLimit=10\nsyncLimit=5\ndataDir=/var/lib/x\nclientPort=2181\n\
         server.1=10.0.0.1:2888:3888\nserver.2=10.0.0.2:2888:3888:participant;10.0.0.2:8080\n\
         admin.serverAddress=0.0.0.0\nadmin.serverPort=8080\njute.maxbuffer=1048576\n",
        "# c\ntickTime=1\ninitLimit=1\nsyncLimit=1\ndataDir=d\nserver.7=h:1:2;9\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    fuzz("zoo.cfg", seed + 4, inputs, &cfgs, |b| {
        config::parse("zoo.cfg", &String::from_utf8_lossy(b)).is_ok()
    });

    // POST /write bodies, decoded as the write route does.
    let bodies: Vec<Vec<u8>> = [
        r#"{"value": 1}"#,
        r#"{"value": {"a": [1, 2.5, "x", null, true]}}"#,
        r#"{"value": "a long-ish string value with \u00e9scapes\n"}"#,
        r#"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    fuzz("write body", seed + 5, inputs, &bodies, |b| {
        serde_json::from_slice::<WriteRequest>(b).is_ok()
    });
}
