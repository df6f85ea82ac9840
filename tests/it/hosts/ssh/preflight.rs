//! Preflight over SSH against fake VMs: an unreachable host, a refused key, an unknown host key
//! and a user without sudo are each a clear error (exit 254) before anything is created, and a
//! correct setup (strict host key checking with the VMs' known_hosts) passes.

use crate::support::ssh::{can_run, FakeVms};
use fle_chaos::control::backend::ssh::{check_hosts, SshOptions};
use fle_chaos::exit::{code_for, BAD_ARGS};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn options(key: &Path) -> SshOptions {
    SshOptions {
        user: Some("root".into()),
        port: None,
        private_key: Some(key.to_path_buf()),
        strict_host_key_checking: false,
        config_file: None,
        connect_timeout: Duration::from_secs(10),
        retries: 0,
    }
}

/// `fle-chaos test --ssh ...`: (exit code, stderr).
fn fle_chaos(vms: &FakeVms, hosts: &str, key: &Path, extra: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fle-chaos"))
        .args(["test", "--ssh", "--nodes", hosts, "--ssh-user", "root"])
        .arg("--ssh-private-key")
        .arg(key)
        .args(["--time-limit", "5", "--nemesis", "kill,partition"])
        .args(["--nemesis-interval", "2", "--out"])
        .arg(vms.dir.path().join("out"))
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Nothing was created: no run folder, and no process in the VM but its sshd.
fn nothing_started(vms: &FakeVms) {
    assert!(
        !vms.dir.path().join("out").exists(),
        "a run folder was created"
    );
    let out = Command::new("ip")
        .args(["netns", "pids", &vms.vms[0].netns])
        .output()
        .unwrap();
    let pids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    for pid in pids {
        // A connection's sshd child may exit while we look.
        let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) else {
            continue;
        };
        assert_eq!(comm.trim(), "sshd", "process {pid} ({comm}) runs on the VM");
    }
}

#[test]
fn unreachable_host_wrong_key_and_unknown_host_key_fail_before_anything_starts() {
    if !can_run("unreachable_host_wrong_key_and_unknown_host_key_fail_before_anything_starts") {
        return;
    }
    let vms = FakeVms::create(1);
    let good = vms.addr(0).to_string();
    let unreachable = vms.unused_addr().to_string();
    let no_check = ["--ssh-strict-host-key-checking", "false"];

    let (code, err) = fle_chaos(
        &vms,
        &format!("{good},{unreachable}"),
        &vms.client_key,
        &no_check,
    );
    assert_eq!(code, BAD_ARGS, "{err}");
    assert!(
        err.contains(&format!("cannot connect to root@{unreachable}")) && err.contains("is up"),
        "{err}"
    );
    assert!(
        !err.contains(&format!("root@{good}")),
        "the good host is fine: {err}"
    );
    nothing_started(&vms);

    let (code, err) = fle_chaos(&vms, &good, &vms.wrong_key, &no_check);
    assert_eq!(code, BAD_ARGS, "{err}");
    assert!(
        err.contains("Permission denied") && err.contains("--ssh-private-key"),
        "{err}"
    );
    nothing_started(&vms);

    // Strict checking (the default) against a host nobody has vouched for.
    let mut strict = options(&vms.client_key);
    strict.strict_host_key_checking = true;
    strict.config_file = Some(vms.dir.path().join("empty_ssh_config"));
    std::fs::write(
        vms.dir.path().join("empty_ssh_config"),
        format!(
            "UserKnownHostsFile {}\n",
            vms.dir.path().join("no_known_hosts").display()
        ),
    )
    .unwrap();
    let err = check_hosts(std::slice::from_ref(&good), &strict, false, false).unwrap_err();
    assert_eq!(code_for(&err), BAD_ARGS);
    assert!(format!("{err:#}").contains("host key"), "{err:#}");

    // The same, strict, with the VMs' real keys in known_hosts (through an ssh_config): passes.
    let mut known = options(&vms.client_key);
    known.strict_host_key_checking = true;
    known.private_key = None;
    known.user = None;
    known.config_file = Some(vms.ssh_config.clone());
    check_hosts(std::slice::from_ref(&good), &known, false, false)
        .expect("strict checking with known hosts");

    // --real-clock-skew on a "VM" that is this machine's own kernel: refused before anything
    // starts, since stepping its clock would step the controller's.
    let err = check_hosts(&[good], &known, true, false).unwrap_err();
    assert_eq!(code_for(&err), BAD_ARGS);
    assert!(
        format!("{err:#}").contains("runs on the controller's own kernel (same boot id)"),
        "{err:#}"
    );
    nothing_started(&vms);
}

/// A user with a home and a shell, removed again on drop.
struct TempUser(String);

impl Drop for TempUser {
    fn drop(&mut self) {
        // -f: an sshd child of the refused session may still run as the user.
        let _ = Command::new("userdel").args(["-f", &self.0]).status();
    }
}

#[test]
fn a_user_without_sudo_is_refused_before_anything_starts() {
    if !can_run("a_user_without_sudo_is_refused_before_anything_starts") {
        return;
    }
    // Declared before the VMs so that it is dropped after them (their sshd gone first).
    let user = TempUser(format!("flcu{:05x}", rand::random::<u32>() & 0xfffff));
    let vms = FakeVms::create(1);
    let made = Command::new("useradd")
        // `-p '*'`: no password, but not locked (sshd refuses locked accounts even with a key).
        .args([
            "-M",
            "-d",
            "/nonexistent",
            "-s",
            "/bin/sh",
            "-p",
            "*",
            &user.0,
        ])
        .status()
        .unwrap();
    assert!(made.success(), "useradd {}", user.0);
    let mut opts = options(&vms.client_key);
    opts.user = Some(user.0.clone());
    let err = check_hosts(&[vms.addr(0).to_string()], &opts, false, false).unwrap_err();
    assert_eq!(code_for(&err), BAD_ARGS, "{err:#}");
    let text = format!("{err:#}");
    assert!(
        text.contains(&format!(
            "user {} is not root and has no passwordless sudo",
            user.0
        )),
        "{text}"
    );
    nothing_started(&vms);
    let name = user.0.clone();
    drop(vms);
    drop(user);
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    assert!(
        !passwd.lines().any(|l| l.starts_with(&format!("{name}:"))),
        "the test user {name} is gone"
    );
}
