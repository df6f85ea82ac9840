//! Real VMs (qemu guests, see support::vm) really have their own kernel and clock: each boots
//! with its own boot_id, stepping one guest's clock moves neither ours nor the other guest's,
//! the guests reach our gateway address and each other, the tools the SSH backend's scripts use
//! are there, and fle-node runs in a guest.

use crate::support;

use crate::support::vm::{can_run, QemuVms};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn guest_clock(vms: &QemuVms, i: usize) -> i64 {
    vms.ssh(i, "date +%s", b"").parse().unwrap()
}

#[test]
fn qemu_vms_have_their_own_kernel_clock_and_network() {
    if !can_run("qemu_vms_have_their_own_kernel_clock_and_network") {
        return;
    }
    let started = Instant::now();
    let vms = QemuVms::create(2);
    eprintln!("2 VMs booted in {:.1?}", started.elapsed());

    let host_boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let boot = |i| vms.ssh(i, "cat /proc/sys/kernel/random/boot_id", b"");
    let (boot1, boot2) = (boot(0), boot(1));
    assert_ne!(boot1, host_boot.trim());
    assert_ne!(boot2, host_boot.trim());
    assert_ne!(boot1, boot2);

    // The guests' clocks start at ours (-rtc base=utc, whole seconds).
    for i in 0..2 {
        let skew = guest_clock(&vms, i) - now();
        assert!(skew.abs() <= 3, "vm {} starts {skew} s off", i + 1);
    }
    // Steps guest 1 an hour ahead; ours and guest 2's must not move (checked against a clock
    // that cannot be stepped: the monotonic one).
    let (wall0, mono0) = (SystemTime::now(), Instant::now());
    vms.ssh(0, &format!("date -s @{} >/dev/null", now() + 3600), b"");
    let skew1 = guest_clock(&vms, 0) - now();
    assert!(
        (3595..=3605).contains(&skew1),
        "vm 1 is {skew1} s ahead, not 3600"
    );
    let skew2 = guest_clock(&vms, 1) - now();
    assert!(skew2.abs() <= 3, "vm 2 moved to {skew2} s off");
    let host_step = wall0.elapsed().unwrap().as_secs_f64() - mono0.elapsed().as_secs_f64();
    assert!(host_step.abs() < 1.0, "our clock moved by {host_step} s");

    // Guest to our gateway address over TCP.
    let listener = TcpListener::bind((vms.gateway(), 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = std::thread::spawn(move || {
        let (conn, from) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(conn).read_line(&mut line).unwrap();
        (from.ip(), line)
    });
    let gw = vms.gateway();
    vms.ssh(
        0,
        &format!("echo hello from vm | nc -w 10 {gw} {port}"),
        b"",
    );
    let (from, line) = accept.join().unwrap();
    assert_eq!((from, line.trim()), (vms.addr(0).into(), "hello from vm"));
    // Guest to guest: guest 2's sshd greets guest 1.
    let banner = vms.ssh(0, &format!("nc -w 10 {} 22 < /dev/null", vms.addr(1)), b"");
    assert!(banner.starts_with("SSH-2.0-"), "{banner:?}");

    // What the SSH backend's scripts run, GNU tar's --exclude included (busybox tar lacks it).
    let tools = "sh setsid nohup tar tac cat mv wc id uname kill sleep mkdir chmod rm date dirname";
    let check = format!(
        "for t in {tools}; do command -v $t >/dev/null || echo $t; done
        tar --exclude=./x -cf - -C /etc . >/dev/null"
    );
    assert_eq!(vms.ssh(0, &check, b""), "", "missing in the guest");

    // fle-node, uploaded as the SSH backend does, finds its libraries in the guest.
    let binary = std::fs::read(fle_chaos::control::sut::fle_node::built_binary()).unwrap();
    let upload = Instant::now();
    let version = vms.ssh(
        1,
        "cat > /tmp/fle-node && chmod +x /tmp/fle-node && /tmp/fle-node --version",
        &binary,
    );
    eprintln!(
        "uploaded {} MB and ran fle-node in {:.1?}",
        binary.len() >> 20,
        upload.elapsed()
    );
    assert!(version.starts_with("fle-node "), "{version:?}");
}

/// What a JVM costs in a guest (TCG on shared cores): boot with a Java runtime and ZooKeeper's
/// jars, `java -version`, and one ZooKeeper server from start to its AdminServer answering.
/// Prints the figures; minutes under TCG, so not in the suite (docs/testing.md).
#[test]
#[ignore = "minutes under TCG: run by hand (docs/testing.md)"]
fn a_guest_runs_zookeeper() {
    if !can_run("a_guest_runs_zookeeper") {
        return;
    }
    let started = Instant::now();
    let vms = QemuVms::create_with(1, support::vm::Guest { zookeeper: true });
    eprintln!("1 VM with a JRE booted in {:.1?}", started.elapsed());
    let t = Instant::now();
    let version = vms.ssh(0, "java -Xshare:auto -version 2>&1", b"");
    eprintln!("java -version in {:.1?}: {version}", t.elapsed());
    assert!(version.contains("OpenJDK"), "{version}");
    let jars: Vec<String> = support::vm::zookeeper_jars()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let script = format!(
        "mkdir -p /tmp/zk/data && cd /tmp/zk && printf 'tickTime=200\\ndataDir=/tmp/zk/data\\nclientPort=2181\\nadmin.serverPort=8080\\n' > zoo.cfg
        start=$(date +%s%N)
        nohup java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp {} org.apache.zookeeper.server.quorum.QuorumPeerMain zoo.cfg > zk.log 2>&1 &
        i=0; until echo srvr | nc 127.0.0.1 2181 2>/dev/null | grep -q Mode || [ $i -gt 600 ]; do sleep 0.5; i=$((i+1)); done
        echo $(( ($(date +%s%N) - start) / 1000000 ))
        kill %1",
        jars.join(":")
    );
    let t = Instant::now();
    let out = vms.ssh(0, &script, b"");
    eprintln!(
        "ZooKeeper answered srvr after {out} ms in the guest ({:.1?} with ssh)",
        t.elapsed()
    );
    let ms: u64 = out.lines().last().unwrap().parse().unwrap();
    assert!(ms < 300_000, "ZooKeeper never answered");
}
