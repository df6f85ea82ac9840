//! The arguments of one replay: `fle-chaos test` with the recorded run's settings, a timed
//! schedule and a run length of its own. Replays run as child processes through
//! `run::child` (the verdict from the exit code, the details from results.json).

use crate::commands::run::plan::{Net, TestArgs};
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

/// The `fle-chaos test` arguments that replay `args` for `time_limit` under `nemesis`
/// (`--nemesis-file FILE`, or None: `--nemesis none`, always the last two), without `--out` and
/// `--name` (the child runner adds them).
pub fn test_argv(args: &TestArgs, time_limit: Duration, nemesis: Option<&Path>) -> Vec<OsString> {
    let mut v: Vec<OsString> = Vec::new();
    let mut flag = |f: &str, value: String| {
        v.push(f.into());
        v.push(value.into());
    };
    if let Some(nodes) = &args.nodes {
        flag("--nodes", nodes.to_string());
    }
    flag("--time-limit", format!("{:.3}", time_limit.as_secs_f64()));
    flag("--workload", args.workload.clone());
    if let Some(seed) = args.seed {
        flag("--seed", seed.to_string());
    }
    if let Some(c) = args.concurrency {
        flag("--concurrency", c.to_string());
    }
    if let Some(r) = args.rate {
        flag("--rate", r.to_string());
    }
    flag(
        "--net",
        match args.net {
            Net::Netns => "netns",
            Net::Loopback => "loopback",
        }
        .into(),
    );
    flag("--target", args.target.name().into());
    flag("--tick-ms", args.tick_ms.to_string());
    flag("--init-limit", args.init_limit.to_string());
    flag("--sync-limit", args.sync_limit.to_string());
    flag("--recovery-timeout", args.recovery_timeout.to_string());
    if let Some(b) = &args.bug {
        flag("--bug", b.clone());
    }
    if let Some(ms) = args.finalize_wait_ms {
        flag("--finalize-wait-ms", ms.to_string());
    }
    for s in &args.zookeeper_config {
        flag("--zookeeper-config", s.to_string());
    }
    if let Some(v) = &args.zookeeper_version {
        flag("--zookeeper-version", v.clone());
    }
    let s = &args.ssh;
    if s.ssh {
        if let Some(u) = &s.ssh_user {
            flag("--ssh-user", u.clone());
        }
        if let Some(p) = s.ssh_port {
            flag("--ssh-port", p.to_string());
        }
        if !s.ssh_strict_host_key_checking {
            flag("--ssh-strict-host-key-checking", "false".into());
        }
    }
    let mut path = |f: &str, p: &Path| {
        v.push(f.into());
        v.push(p.as_os_str().to_owned());
    };
    if let Some(b) = &args.node_binary {
        path("--node-binary", b);
    }
    if let Some(h) = &args.zookeeper_home {
        path("--zookeeper-home", h);
    }
    if s.ssh {
        v.push("--ssh".into());
        for (f, p) in [
            ("--nodes-file", &s.nodes_file),
            ("--ssh-private-key", &s.ssh_private_key),
            ("--ssh-config", &s.ssh_config),
        ] {
            if let Some(p) = p {
                v.push(f.into());
                v.push(p.as_os_str().to_owned());
            }
        }
        if s.real_clock_skew {
            v.push("--real-clock-skew".into());
        }
    }
    if args.faketime {
        v.push("--faketime".into());
    }
    match nemesis {
        Some(file) => {
            v.push("--nemesis-file".into());
            v.push(file.as_os_str().to_owned());
        }
        None => {
            v.push("--nemesis".into());
            v.push("none".into());
        }
    }
    v
}
