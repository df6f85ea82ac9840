//! The node's command line: bad configs get one clear line and exit 2, bad data dirs a clear
//! fatal error, and the seeded bug is reachable only by its flag and announced loudly.

use std::process::Command;
use std::time::Duration;

use crate::support::{free_ports, Cluster, NODE_BIN};

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(NODE_BIN)
        .args(args)
        .output()
        .expect("run fle-node");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `dir/data` holding `myid`, for a zoo.cfg's dataDir.
fn data_dir(dir: &std::path::Path, myid: &str) -> std::path::PathBuf {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("myid"), myid).unwrap();
    data
}

fn write_cfg(dir: &std::path::Path, body: &str) -> String {
    let path = dir.join("zoo.cfg");
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

#[test]
fn a_bad_config_line_is_named_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_dir(dir.path(), "1");
    let cfg = write_cfg(
        dir.path(),
        &format!(
            "tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir={}\nserver.1=127.0.0.1:abc:3001\n",
            data.display()
        ),
    );
    let (code, err) = run(&["--config", &cfg]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("line 5") && err.contains("\"abc\""), "{err}");
}

#[test]
fn observer_configs_that_cannot_work_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_dir(dir.path(), "2");
    let base = format!(
        "tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir={}\n",
        data.display()
    );
    let cases = [
        // No voter left: every server observes.
        (
            "server.1=127.0.0.1:2001:3001:observer\nserver.2=127.0.0.1:2002:3002:observer\n",
            "at least one voter",
        ),
        // This server says it observes, but its own server line makes it a voter.
        (
            "server.1=127.0.0.1:2001:3001\nserver.2=127.0.0.1:2002:3002\npeerType=observer\n",
            ":observer",
        ),
        // An observer not in the server list: myid 2 has no line.
        (
            "server.1=127.0.0.1:2001:3001\nserver.3=127.0.0.1:2003:3003:observer\npeerType=observer\n",
            "no server.2 line",
        ),
    ];
    for (lines, says) in cases {
        let cfg = write_cfg(dir.path(), &format!("{base}{lines}"));
        let (code, err) = run(&["--config", &cfg]);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(
            err.contains("zoo.cfg") && err.contains(says),
            "{says}: {err}"
        );
    }
}

#[test]
fn missing_files_and_bad_flags_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = run(&["--config", "/nonexistent/zoo.cfg"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/zoo.cfg"), "{err}");

    let [q, e] = free_ports(2)[..] else {
        unreachable!()
    };
    let cfg = write_cfg(
        dir.path(),
        &format!(
            "tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir={}\nserver.1=127.0.0.1:{q}:{e}\n",
            dir.path().display()
        ),
    );
    let (code, err) = run(&["--config", &cfg]);
    assert_eq!(code, 2);
    assert!(err.contains("myid"), "names the missing myid: {err}");

    let (code, _) = run(&[]);
    assert_eq!(code, 2, "--config is required");
    let (code, err) = run(&["--config", &cfg, "--bug", "everything"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("quorum-minority"),
        "lists the known bugs: {err}"
    );
}

#[test]
fn accepted_epoch_below_current_epoch_is_fatal_and_clear() {
    let c = Cluster::new(1);
    let spec = &c.nodes[&1];
    std::fs::write(spec.data_dir.join("currentEpoch"), "3").unwrap();
    std::fs::write(spec.data_dir.join("acceptedEpoch"), "2").unwrap();
    let (code, err) = run(&["--config", spec.config.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("acceptedEpoch 2 is less than currentEpoch 3"),
        "{err}"
    );
}

/// Epoch files a real server wrote, damaged while it is down (a flipped bit that turns one digit
/// into another, as the `corrupt` fault may): the restart is refused, naming the file, rather
/// than serving a wrong epoch.
#[test]
fn a_damaged_epoch_file_written_by_a_server_is_refused_by_name() {
    let mut c = Cluster::new(1);
    c.start(1);
    c.wait_for(Duration::from_secs(30), "n1 to lead alone", |c| {
        c.role(1).filter(|(state, _)| state == "LEADING")
    });
    let dir = c.nodes[&1].data_dir.clone();
    c.wait_for(Duration::from_secs(10), "both epoch files", |_| {
        (dir.join("currentEpoch").exists() && dir.join("acceptedEpoch").exists()).then_some(())
    });
    c.kill(1);
    for file in ["currentEpoch", "acceptedEpoch"] {
        let path = dir.join(file);
        let good = std::fs::read(&path).unwrap();
        assert!(
            good.starts_with(b"crc32="),
            "{}",
            String::from_utf8_lossy(&good)
        );
        let mut bad = good.clone();
        let last_digit = bad.len() - 2; // before the newline
        bad[last_digit] ^= 1; // "1" <-> "0": still a decimal number, the wrong one
        std::fs::write(&path, &bad).unwrap();
        // Bounded: a server that accepted the file would run on, and fail the test by timing out.
        let mut child = Command::new(NODE_BIN)
            .args(["--config", c.nodes[&1].config.to_str().unwrap()])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let end = std::time::Instant::now() + Duration::from_secs(20);
        let code = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s.code().unwrap_or(-1);
            }
            if std::time::Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{file}: the server started on a damaged epoch file");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains(file) && err.contains("damaged epoch file") && err.contains("checksum"),
            "{err}"
        );
        std::fs::write(&path, &good).unwrap();
    }
}

#[test]
fn the_seeded_quorum_minority_bug_lets_a_lone_server_lead_and_says_so() {
    let mut c = Cluster::new(3);
    c.extra_args = vec!["--bug".into(), "quorum-minority".into()];
    c.start(1);
    c.wait_for(
        Duration::from_secs(30),
        "n1 to lead alone under the bug",
        |c| {
            let (state, leader) = c.role(1)?;
            (state == "LEADING" && leader == Some(1)).then_some(())
        },
    );
    assert!(
        c.log_of(1).contains("SEEDED BUG ENABLED"),
        "{}",
        c.log_of(1)
    );
}

#[test]
fn sigterm_stops_the_node_cleanly_with_exit_0() {
    let mut c = Cluster::new(1);
    c.start(1);
    // A one-server ensemble is its own quorum: it leads.
    c.wait_for(Duration::from_secs(30), "n1 to lead alone", |c| {
        let (state, leader) = c.role(1)?;
        (state == "LEADING" && leader == Some(1)).then_some(())
    });
    let mut guard = KillOnDrop(c.take_process(1).unwrap());
    let child = &mut guard.0;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() >= end {
            panic!("fle-node ignored SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{}", c.log_of(1));
    assert!(c.log_of(1).contains("fle-node stopping"));
}

/// Reaps a process handed out of the cluster, also when the test panics.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn clock_offset_without_the_right_to_set_the_clock_fails_clearly_and_records_nothing() {
    // setpriv drops CAP_SYS_TIME, so clock_settime really runs and is refused by the kernel;
    // the 1 ms asked for keeps this machine's clock harmless even if the drop did not work.
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("clock-offset");
    let out = Command::new("setpriv")
        .args([
            "--bounding-set",
            "-sys_time",
            "--inh-caps",
            "-sys_time",
            "--",
        ])
        .arg(NODE_BIN)
        .args(["clock-offset", "--ms", "1", "--state"])
        .arg(&state)
        .output()
        .expect("run setpriv (util-linux)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(
        err.contains("clock_settime") && err.contains("CAP_SYS_TIME"),
        "stderr: {err}"
    );
    assert!(!state.exists(), "a refused step must not be recorded");
}

#[test]
fn clock_offset_names_a_corrupt_state_file_and_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("clock-offset");
    std::fs::write(&state, "sixty seconds\n").unwrap();
    let s = state.to_str().unwrap();
    let (code, err) = run(&["clock-offset", "--ms", "0", "--state", s]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(s) && err.contains("OFFSET_MS BASE_NS"),
        "{err}"
    );
    // An offset already in force is a no-op that needs no rights: it succeeds.
    std::fs::write(&state, "-2500 17\n").unwrap();
    let out = Command::new(NODE_BIN)
        .args(["clock-offset", "--ms", "-2500", "--state", s])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "offset_ms=-2500 before_ms=-2500 step_ms=0"
    );
    let (code, err) = run(&["clock-offset", "--ms", "soon", "--state", s]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--ms"), "{err}");
    let (code, err) = run(&["clock-offset", "--ms", "5", "--config", "zoo.cfg"]);
    assert_eq!(code, 2, "{err}");
}
