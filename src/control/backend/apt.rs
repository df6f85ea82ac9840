//! Installing Debian packages on this machine, quietly: the one place that runs `apt-get` here
//! (the fault tools of `os_setup`, the zookeeper target's jars and JRE).
//!
//! A user sees one line per package group and its outcome; apt's own output (dozens of lines
//! of unpacking and triggers) is kept aside and written at the top of the next run's
//! controller.log (`take_transcript`), where it is read only when something went wrong. A
//! fresh machine has no package lists yet, so a failed install refreshes them once and retries.

use std::process::Command;
use std::sync::Mutex;

/// apt's output since the last `take_transcript`, for the next run's controller.log.
static TRANSCRIPT: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Two callers in one process (a sweep's preflight, parallel tests) must not run apt-get side
/// by side: the second would fail on dpkg's lock.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What an install gave.
pub struct Installed {
    pub ok: bool,
    /// apt's last line of output, to name the cause when it failed.
    pub last_line: String,
}

/// `apt-get install PACKAGES`, output kept aside; says `installing ... for WHAT` and then
/// `installed` or `install failed` through `say`, one line each.
pub fn install(packages: &[&str], what: &str, say: &mut dyn FnMut(&str)) -> Installed {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let list = packages.join(" ");
    say(&format!(
        "installing {list} for {what} (apt-get; its output is kept for the run's log)"
    ));
    let mut last_line = String::new();
    let mut run = |args: &[&str]| {
        let out = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output();
        let mut t = TRANSCRIPT.lock().unwrap_or_else(|e| e.into_inner());
        t.extend_from_slice(format!("$ apt-get {}\n", args.join(" ")).as_bytes());
        match out {
            Ok(o) => {
                t.extend_from_slice(&o.stdout);
                t.extend_from_slice(&o.stderr);
                // apt's errors (`E: ...`) are on stderr: last, so they are the last line.
                let text = String::from_utf8_lossy(&o.stdout).to_string()
                    + &String::from_utf8_lossy(&o.stderr);
                if let Some(l) = text.lines().rev().find(|l| !l.trim().is_empty()) {
                    last_line = l.trim().to_string();
                }
                o.status.success()
            }
            Err(e) => {
                last_line = format!("cannot run apt-get: {e}");
                t.extend_from_slice(format!("{last_line}\n").as_bytes());
                false
            }
        }
    };
    let mut install_args = vec!["install", "-y", "-qq", "--no-install-recommends"];
    install_args.extend(packages);
    // `update` exits non-zero when one source of several is unreachable although the lists
    // that matter were fetched: install again either way.
    let ok = run(&install_args) || {
        run(&["update", "-qq"]);
        run(&install_args)
    };
    say(if ok { "installed" } else { "install failed" });
    Installed { ok, last_line }
}

/// apt's output so far, emptied: `run_dir::log_to` writes it at the top of controller.log, a
/// sweep into its `logs/apt.log`.
pub fn take_transcript() -> Vec<u8> {
    std::mem::take(&mut *TRANSCRIPT.lock().unwrap_or_else(|e| e.into_inner()))
}
