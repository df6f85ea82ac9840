//! What SSH costs a run, on fake VMs (namespaces running sshd; root): preflight + setup of 3
//! hosts (binary upload included), one remote command over the multiplexed connection, a
//! faketime file write, a daemon spawn + kill, and teardown. Prints figures; asserts nothing.
//! `cargo bench --bench ssh`
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

/// The SSH tests' fake VMs (tests/it/support), borrowed whole: this bench uses part of them.
#[allow(dead_code)]
#[path = "../tests/it/support"]
mod test_support {
    pub mod fixture;
    pub mod skip;
    pub mod ssh;
}

use fle_chaos::control::backend::os_setup::Needs;
use fle_chaos::control::backend::registry::Registry;
use fle_chaos::control::backend::ssh::{SshCluster, SshClusterConfig, SshOptions};
use fle_chaos::control::{Control, DaemonSpec};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn percentiles(mut v: Vec<Duration>) -> String {
    v.sort();
    let p = |q: f64| v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    format!(
        "median {:.2} ms, p99 {:.2} ms, max {:.2} ms (n={})",
        p(0.5),
        p(0.99),
        p(1.0),
        v.len()
    )
}

fn main() {
    if !test_support::ssh::can_run("bench ssh") {
        return;
    }
    let vms = test_support::ssh::FakeVms::create(3);
    std::env::set_var("FLE_CHAOS_REGISTRY", vms.dir.path().join("registry"));
    let run_id = format!("b{}", vms.suffix);
    let run_dir = vms.dir.path().join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    let registry = Arc::new(Registry::create(&run_id, &run_dir).unwrap());
    let binary = fle_chaos::control::sut::fle_node::built_binary();
    let size = std::fs::metadata(&binary).unwrap().len();

    let t = Instant::now();
    let c = SshCluster::create(
        SshClusterConfig {
            hosts: vms.hosts(),
            options: SshOptions {
                config_file: Some(vms.ssh_config.clone()),
                strict_host_key_checking: true,
                connect_timeout: Duration::from_secs(10),
                retries: 3,
                ..Default::default()
            },
            binary: binary.clone(),
            needs: Needs {
                netns: false,
                iptables: true,
                faketime: true,
            },
            real_clock: false,
        },
        &run_dir,
        registry,
        &mut |_| {},
    )
    .unwrap();
    println!(
        "preflight + setup of 3 hosts (fle-node {:.1} MB uploaded to each): {:.0} ms",
        size as f64 / 1e6,
        t.elapsed().as_secs_f64() * 1000.0
    );

    let mut exec = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        c.exec("n1", "true", &[]).unwrap();
        exec.push(t.elapsed());
    }
    println!("exec `true` on a host: {}", percentiles(exec));

    let mut writes = Vec::new();
    for i in 0..100 {
        let t = Instant::now();
        c.write_file(
            "n2",
            Path::new("faketime"),
            format!("+{i}.000\n").as_bytes(),
        )
        .unwrap();
        writes.push(t.elapsed());
    }
    println!("write_file (faketime): {}", percentiles(writes));

    let mut cycles = Vec::new();
    for _ in 0..20 {
        let spec = DaemonSpec {
            program: "/bin/sleep".into(),
            args: vec!["1000".into()],
            env: vec![],
            log: c.node_dir("n3").unwrap().join("node.log"),
        };
        let t = Instant::now();
        c.spawn("n3", &spec).unwrap();
        c.kill("n3").unwrap();
        cycles.push(t.elapsed());
    }
    println!(
        "spawn + SIGKILL (waited until gone): {}",
        percentiles(cycles)
    );

    let t = Instant::now();
    let report = c.teardown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    println!(
        "teardown of 3 hosts (kill, fetch folder, remove): {:.0} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
}
