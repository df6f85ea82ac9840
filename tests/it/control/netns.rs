//! The local control layer on real namespaces: nodes get their own network stack, reach each
//! other and the controller over the bridge, daemons run inside their namespace and can be
//! paused, resumed and killed, and teardown removes exactly what was created.

use crate::support::run::{cluster, in_netns, leftovers, root_or_skip, wait_for};
use fle_chaos::control::backend::local::NetMode;
use fle_chaos::control::backend::registry::{is_same_process, process_start_time};
use fle_chaos::control::{Control, DaemonSpec, Signal};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

fn sleeper(dir: &std::path::Path) -> DaemonSpec {
    DaemonSpec {
        program: "/usr/bin/sleep".into(),
        args: vec!["1000".into()],
        env: vec![],
        log: dir.join("sleep.log"),
    }
}

fn proc_state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap()
}

#[test]
fn namespaces_connect_nodes_and_teardown_removes_everything() {
    if !root_or_skip("namespaces_connect_nodes_and_teardown_removes_everything") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(NetMode::Netns, 3, dir.path());
    let net = c.netns().unwrap().clone();
    assert!(c.net().is_some(), "namespaced nodes can be cut off");
    assert!(
        c.clock().is_none(),
        "a local cluster never steps the host clock"
    );

    // n1 listens on its own address; the controller (host, over the bridge) and n2 connect.
    let n1 = c.node_host("n1").unwrap();
    let listener = in_netns(&net.netns_of("n1").unwrap(), move || {
        TcpListener::bind(SocketAddr::new(n1, 7000)).unwrap()
    });
    let addr = SocketAddr::new(n1, 7000);
    TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("controller -> n1");
    let from_n2 = in_netns(&net.netns_of("n2").unwrap(), move || {
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map(|s| s.local_addr().unwrap())
    })
    .expect("n2 -> n1");
    assert_eq!(from_n2.ip(), c.node_host("n2").unwrap());
    // n1's address is not bound on the host: the listener really is in n1's stack.
    assert!(TcpListener::bind(SocketAddr::new(n1, 0)).is_err());
    drop(listener);

    // A daemon runs inside its node's namespace.
    let pid = c.spawn("n3", &sleeper(dir.path())).unwrap();
    let ns_of = |p: &str| std::fs::metadata(p).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    assert_eq!(
        ns_of(&format!("/proc/{pid}/ns/net")).unwrap(),
        ns_of(&format!("/run/netns/{}", net.netns_of("n3").unwrap())).unwrap()
    );
    assert!(
        c.spawn("n3", &sleeper(dir.path())).is_err(),
        "one daemon per node"
    );

    // Pause, resume, kill.
    assert_eq!(c.signal("n3", Signal::SIGSTOP).unwrap(), Some(pid));
    assert!(wait_for(Duration::from_secs(10), || proc_state(pid) == 'T'));
    assert_eq!(c.signal("n3", Signal::SIGCONT).unwrap(), Some(pid));
    assert!(wait_for(Duration::from_secs(10), || proc_state(pid) != 'T'));
    let start = process_start_time(pid).unwrap();
    assert_eq!(c.kill("n3").unwrap(), Some(pid));
    assert!(!is_same_process(pid, start));
    assert_eq!(c.pid("n3"), None);
    assert_eq!(c.kill("n3").unwrap(), None);

    // Teardown removes the namespaces, links, claim and a still-running daemon.
    let pid2 = c.spawn("n1", &sleeper(dir.path())).unwrap();
    let start2 = process_start_time(pid2).unwrap();
    let recorded = c.registry().resources();
    assert!(!leftovers(&recorded).is_empty(), "nothing to tear down?");
    let report = c.teardown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(leftovers(&recorded), Vec::<String>::new());
    assert!(!is_same_process(pid2, start2));
    assert!(!c.registry().global_path().exists(), "registry entry kept");
    assert!(
        c.spawn("n1", &sleeper(dir.path())).is_err(),
        "spawn after teardown"
    );
}

#[test]
fn loopback_nodes_get_distinct_addresses_and_free_ports() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(NetMode::Loopback, 3, dir.path());
    assert!(c.netns().is_none());
    assert!(
        c.net().is_none(),
        "loopback nodes share one stack: no partitions"
    );
    let hosts: Vec<_> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| c.node_host(n).unwrap())
        .collect();
    assert!(hosts.iter().all(|h| h.is_loopback()));
    assert_ne!(hosts[0], hosts[1]);
    let port = c.node_port("n1", 8080).unwrap();
    TcpListener::bind(SocketAddr::new(hosts[0], port)).expect("the port is free");
    let pid = c.spawn("n2", &sleeper(dir.path())).unwrap();
    assert_eq!(c.pid("n2"), Some(pid));
    let report = c.teardown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(c.pid("n2"), None);
    assert!(c.node_host("n9").is_err());
}

/// How many times a 10 ms ticker task ticks while another task runs `call`, on a runtime with
/// one worker; and how long `call` took.
async fn ticks_during(call: impl FnOnce() + Send + 'static) -> (u64, Duration) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let ticks = Arc::new(AtomicU64::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let started = std::time::Instant::now();
    while ticks.load(Ordering::Relaxed) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the ticker never ran"
        );
        tokio::task::yield_now().await;
    }
    let before = ticks.load(Ordering::Relaxed);
    let took = tokio::spawn(async move {
        let t = std::time::Instant::now();
        call();
        t.elapsed()
    })
    .await
    .unwrap();
    let during = ticks.load(Ordering::Relaxed) - before;
    ticker.abort();
    (during, took)
}

/// A blocking `Control` call made from an async task must not stall the runtime's worker: with
/// one worker, a ticker task keeps ticking while another task waits on a 1 s command; the same
/// command run bare from a task stalls it (so the measure can tell the two apart).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn blocking_control_calls_leave_the_async_worker_free() {
    let dir = tempfile::tempdir().unwrap();
    let c = std::sync::Arc::new(cluster(NetMode::Loopback, 1, dir.path()));
    let (bare, took) = ticks_during(|| {
        std::process::Command::new("sleep")
            .arg("1")
            .output()
            .unwrap();
    })
    .await;
    assert!(took >= Duration::from_secs(1));
    assert!(
        bare <= 5,
        "a bare blocking call let the ticker tick {bare} times: this measure cannot see a blocked worker"
    );
    let (during, took) = ticks_during(move || {
        c.exec("n1", "sleep", &["1"]).unwrap();
    })
    .await;
    assert!(
        took >= Duration::from_secs(1),
        "exec returned after {took:?}"
    );
    // ~100 at 10 ms; a blocked worker gives 0 or 1.
    assert!(
        during >= 20,
        "the ticker ticked {during} times during a 1 s exec: the worker was blocked"
    );
}
