//! A synthetic, linearizable history of the register workload for the `linearizable` rows of
//! `cargo bench --bench check`: clients each run one operation at a time on random keys, every
//! operation takes effect at a random instant inside its own interval (so the clients' operations
//! overlap and the search has to order them), and its result is what the register held there.
//! A cas that finds another version fails; one write in a hundred ends `info` (half of those
//! took effect), and its client comes back as a new process, as the workload does.

/// The history's size and pace.
pub struct Shape {
    pub clients: u64,
    pub keys: u64,
    pub ops: u64,
    /// Operations per second, all clients together.
    pub rate: u64,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One operation, before it is written: (time, line) for its invoke and its completion.
struct Planned {
    lines: Vec<(u64, String)>,
}

fn line(time: u64, process: u64, kind: &str, f: &str, value: &str) -> (u64, String) {
    let text = format!(
        r#"{{"index":0,"time":{time},"process":"{process}","type":"{kind}","f":"{f}","node":"n{}","value":{value}}}"#,
        process % 3 + 1
    );
    (time, text)
}

/// The history's lines, in time order, numbered.
pub fn history(shape: &Shape) -> Vec<String> {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    // (value, version) per key; every key created first by process 0.
    let mut keys: Vec<(i64, i64)> = (0..shape.keys as i64).map(|k| (k, 0)).collect();
    let mut out = Planned { lines: Vec::new() };
    for k in 0..shape.keys {
        let v = format!(r#"{{"key":"k{k}","value":{}}}"#, k);
        out.lines.push(line(k * 10, 0, "invoke", "create", &v));
        let done = format!(r#"{{"key":"k{k}","value":{},"version":0}}"#, k);
        out.lines.push(line(k * 10 + 5, 0, "ok", "create", &done));
    }
    let mut next_value = shape.keys as i64;
    // Each client's process number and when it is free: ns.
    let mut clients: Vec<(u64, u64)> = (0..shape.clients).map(|c| (c + 1, 1_000_000)).collect();
    let mut next_process = shape.clients + 1;
    let gap = 1_000_000_000 * shape.clients / shape.rate;
    // Operations in the order they take effect: the client free first goes next.
    let mut effects: Vec<(u64, usize, u64, u64)> = Vec::new();
    for _ in 0..shape.ops {
        let c = (0..clients.len())
            .min_by_key(|&i| clients[i].1)
            .expect("a client");
        let call = clients[c].1 + rng.below(gap);
        let latency = 2_000_000 + rng.below(60_000_000);
        let at = call + rng.below(latency);
        effects.push((at, c, call, call + latency));
        clients[c].1 = call + latency;
    }
    effects.sort_by_key(|e| e.0);
    for (_, c, call, ret) in effects {
        let process = clients[c].0;
        let key = rng.below(shape.keys) as usize;
        let (value, version) = keys[key];
        let roll = rng.below(100);
        let k = format!(r#""key":"k{key}""#);
        let (f, args, result, applied) = match roll {
            0..=39 => {
                let sync = roll < 30;
                let args = format!(r#"{{{k},"sync":{sync}}}"#);
                let result =
                    format!(r#"{{{k},"sync":{sync},"value":{value},"version":{version}}}"#);
                ("read", args, result, None)
            }
            40..=69 => {
                next_value += 1;
                let args = format!(r#"{{{k},"value":{next_value}}}"#);
                let done = format!(r#"{{{k},"value":{next_value},"version":{}}}"#, version + 1);
                ("set", args, done, Some(next_value))
            }
            _ => {
                next_value += 1;
                // A client expects the version it last knew: sometimes an older one.
                let expect = version - (rng.below(4) == 0) as i64;
                let args = format!(r#"{{{k},"expect":{expect},"value":{next_value}}}"#);
                let done = format!(
                    r#"{{{k},"expect":{expect},"value":{next_value},"version":{}}}"#,
                    version + 1
                );
                let applied = (expect == version).then_some(next_value);
                ("cas", args, done, applied)
            }
        };
        out.lines.push(line(call, process, "invoke", f, &args));
        let unknown = f != "read" && rng.below(100) == 0;
        let outcome = match (unknown, applied, f) {
            (true, _, _) => "info",
            (false, None, "cas") => "fail",
            _ => "ok",
        };
        let took_effect = applied.is_some() && (!unknown || rng.below(2) == 0);
        if took_effect {
            keys[key] = (applied.expect("applied"), version + 1);
        }
        let completion = if outcome == "ok" { result } else { args };
        out.lines.push(line(ret, process, outcome, f, &completion));
        if unknown {
            clients[c].0 = next_process;
            next_process += 1;
        }
    }
    out.lines.sort_by_key(|l| l.0);
    (out.lines.into_iter().enumerate())
        .map(|(i, (_, text))| text.replacen(r#""index":0"#, &format!(r#""index":{i}"#), 1))
        .collect()
}
