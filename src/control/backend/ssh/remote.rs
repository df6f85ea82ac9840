//! What the SSH backend leaves on a host, and the shell that creates and removes it.
//!
//! Each node owns one folder on its host, `/tmp/flc-<run>-<node>/` (config, data, log, the
//! uploaded fle-node binary), and in it a record, `flc-resources`, that lists on the host
//! itself every process and iptables rule/chain the run creates there, appended *before* the
//! thing exists (a process records itself between fork and exec). Teardown and `clean` read that
//! record over SSH and remove exactly what it lists, then the folder; the controller's registry
//! holds one `RemoteNode` per host: how to reach it and which folder is ours.

use super::session::{HostSession, SshOptions};
use super::shell::quote;
use crate::control::backend::resource::RemoteNode;
use crate::control::host_clock;
use std::path::PathBuf;

/// The record file inside a node's remote folder.
pub const RECORD: &str = "flc-resources";
/// Where the uploaded fle-node binary lives inside the node's folder.
pub const BINARY: &str = "fle-node";
/// The file the spawned daemon's pid appears in.
const PID_FILE: &str = ".flc-pid";

impl RemoteNode {
    pub fn options(&self) -> SshOptions {
        SshOptions {
            user: self.user.clone(),
            port: self.port,
            private_key: self.private_key.clone(),
            strict_host_key_checking: self.strict_host_key_checking,
            config_file: self.config_file.clone(),
            connect_timeout: std::time::Duration::from_secs(10),
            retries: 3,
        }
    }
}

/// The folder of `node` for run `run_id` on its host.
pub fn node_dir(run_id: &str, node: &str) -> PathBuf {
    PathBuf::from(format!("/tmp/flc-{run_id}-{node}"))
}

/// Shell functions every script starts with: whether a recorded process is still the one we
/// started (same pid and start time, not a zombie), and a process's start time.
const PRELUDE: &str = r#"
flc_start() { s=$(cat /proc/$1/stat 2>/dev/null) || return 1; set -- ${s##*) }; echo "${20}"; }
flc_alive() { want=$2; s=$(cat /proc/$1/stat 2>/dev/null) || return 1; set -- ${s##*) }; [ "$1" != Z ] && [ "${20}" = "$want" ]; }
flc_shm_gone() { for f in /dev/shm/faketime_shm_$1 /dev/shm/sem.faketime_sem_$1; do [ -e "$f" ] || continue; b=$(sed -n 's/^btime //p' /proc/stat); t=$(getconf CLK_TCK 2>/dev/null || echo 100); [ "$(stat -c %Y "$f")" -ge $((b + $2 / t - 2)) ] && rm -f "$f" && echo "removed libfaketime's $f"; done; true; }
"#;

/// Starts `command` (already quoted) detached from the SSH session, in `dir`, appending its
/// output to `log`; prints "PID START". The daemon records itself before exec'ing.
pub fn spawn_script(dir: &str, log: &str, command: &str) -> String {
    let d = quote(dir);
    let inner = format!(
        "echo \"process $$ $(flc_start $$)\" >> {rec} && echo $$ > {pid}.tmp && mv {pid}.tmp {pid} && exec {command}",
        rec = quote(RECORD),
        pid = PID_FILE,
    );
    format!(
        "{PRELUDE}
cd {d} || exit 1
rm -f {PID_FILE}
nohup setsid sh -c {inner} >> {log} 2>&1 < /dev/null &
i=0
while [ ! -s {PID_FILE} ] && [ $i -lt 400 ]; do sleep 0.025; i=$((i+1)); done
[ -s {PID_FILE} ] || {{ echo 'the daemon did not start' >&2; exit 1; }}
pid=$(cat {PID_FILE})
echo \"$pid $(flc_start $pid)\"",
        inner = quote(&format!("{PRELUDE}\n{inner}")),
        log = quote(log),
    )
}

/// Exits 0 when process `pid` with start time `start` is alive.
/// Prints "alive" or "gone" for the recorded process: only the word "gone" proves it ended
/// (a failing sudo or shell on a loaded host exits non-zero too, and proves nothing).
pub fn alive_script(pid: u32, start: u64) -> String {
    format!("{PRELUDE}\nif flc_alive {pid} {start}; then echo alive; else echo gone; fi")
}

/// Prints "stopped" when the recorded process is ours and in state T (SIGSTOP).
pub fn stopped_script(pid: u32, start: u64) -> String {
    format!(
        "{PRELUDE}
flc_alive {pid} {start} || exit 0
s=$(cat /proc/{pid}/stat) || exit 0
set -- ${{s##*) }}
[ \"$1\" = T ] && echo stopped
true"
    )
}

/// Sends `signal` (a name without SIG) to the recorded process if it still is ours; prints
/// "sent" or "gone". With `wait`, also waits (bounded) until it is gone.
pub fn signal_script(pid: u32, start: u64, signal: &str, wait: bool) -> String {
    let wait = if wait {
        format!(
            "i=0; while flc_alive {pid} {start} && [ $i -lt 400 ]; do sleep 0.025; i=$((i+1)); done
flc_alive {pid} {start} && {{ echo 'still alive after SIGKILL' >&2; exit 1; }}
flc_shm_gone {pid} {start}"
        )
    } else {
        String::new()
    };
    format!(
        "{PRELUDE}
flc_alive {pid} {start} || {{ echo gone; exit 0; }}
kill -s {signal} {pid} || exit 1
{wait}
echo sent"
    )
}

/// `iptables ARGS` with the chain or hook rule it creates written into the record first.
pub fn record_iptables(dir: &str, args: &[&str]) -> Option<String> {
    let mut table = "filter".to_string();
    let mut lines = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i] {
            "-t" | "--table" if i + 1 < args.len() => {
                table = args[i + 1].to_string();
                i += 1;
            }
            "-N" | "--new-chain" if i + 1 < args.len() => {
                lines.push(format!("chain {table} {}", quote(args[i + 1])));
                i += 1;
            }
            "-A" | "--append" | "-I" | "--insert" if i + 1 < args.len() => {
                let chain = args[i + 1];
                let mut rest: Vec<&str> = args[i + 2..].to_vec();
                // `-I CHAIN 1 ...`: the position is not part of the rule.
                if matches!(args[i], "-I" | "--insert")
                    && rest.first().is_some_and(|p| p.parse::<u32>().is_ok())
                {
                    rest.remove(0);
                }
                let spec: Vec<String> = std::iter::once(chain)
                    .chain(rest.into_iter().filter(|a| *a != "-w"))
                    .map(quote)
                    .collect();
                lines.push(format!("rule {table} {}", spec.join(" ")));
                break;
            }
            _ => {}
        }
        i += 1;
    }
    if lines.is_empty() {
        return None;
    }
    let mut script = String::new();
    for l in lines {
        script.push_str(&format!(
            "printf '%s\\n' {} >> {}/{RECORD} || exit 1\n",
            quote(&l),
            quote(dir)
        ));
    }
    Some(script)
}

/// For `fle-node lazyfs mount ... --mount DIR ...` (power-loss faults), the mount written into
/// the record first, so teardown and `clean` unmount it on the host.
pub fn record_lazyfs(dir: &str, args: &[&str]) -> Option<String> {
    if args.first() != Some(&"lazyfs") || args.get(1) != Some(&"mount") {
        return None;
    }
    let at = args.iter().position(|a| *a == "--mount")?;
    let mount = args.get(at + 1)?;
    Some(format!(
        "printf '%s\\n' {} >> {}/{RECORD} || exit 1\n",
        quote(&format!("lazyfs {}", quote(mount))),
        quote(dir)
    ))
}

/// Steps the host's clock to `offset_ms` from the true time with the uploaded fle-node
/// (`--real-clock-skew`; see `host_clock`), keeping the offset in the node's folder.
pub fn clock_script(dir: &str, offset_ms: i64) -> String {
    format!(
        "{} clock-offset --ms {offset_ms} --state {}",
        quote(&format!("{dir}/{BINARY}")),
        quote(&format!("{dir}/{}", host_clock::STATE))
    )
}

/// Kills the recorded processes still ours, unmounts the recorded lazyfs mounts (lazily, which
/// also clears a dead one; the filesystem process then ends), deletes the recorded iptables
/// rules (newest first, every copy) and chains, and steps a real clock skew back. Prints "removed ..." lines;
/// failures go to stderr as "error: ..." lines. Exits 1 when the clock could not be stepped
/// back, so that the folder holding its record is kept.
pub fn cleanup_script(dir: &str) -> String {
    format!(
        "{PRELUDE}
R={rec}
if [ -f \"$R\" ]; then
  pids=''
  while read -r kind a b rest; do
    if [ \"$kind\" = process ] && flc_alive \"$a\" \"$b\"; then
      kill -s KILL \"$a\" && echo \"removed process $a\" && pids=\"$pids $a:$b\"
    fi
  done < \"$R\"
  for pb in $pids; do
    i=0
    while flc_alive \"${{pb%%:*}}\" \"${{pb#*:}}\" && [ $i -lt 400 ]; do sleep 0.025; i=$((i+1)); done
    flc_alive \"${{pb%%:*}}\" \"${{pb#*:}}\" && echo \"error: process ${{pb%%:*}} survived SIGKILL\" >&2
    flc_alive \"${{pb%%:*}}\" \"${{pb#*:}}\" || flc_shm_gone \"${{pb%%:*}}\" \"${{pb#*:}}\"
  done
  while read -r kind m; do
    [ \"$kind\" = lazyfs ] || continue
    eval \"m=$m\"
    grep -q \"^{fs} $m \" /proc/mounts || continue
    if umount -l \"$m\"; then echo \"removed lazyfs mount $m\"; else echo \"error: cannot unmount $m\" >&2; fi
  done < \"$R\"
  tac \"$R\" | while read -r kind table rest; do
    [ \"$kind\" = rule ] || continue
    eval \"set -- $rest\"
    while iptables -w -t \"$table\" -D \"$@\" 2>/dev/null; do echo \"removed iptables rule $*\"; done
  done
  tac \"$R\" | while read -r kind table chain; do
    [ \"$kind\" = chain ] || continue
    eval \"chain=$chain\"
    iptables -w -t \"$table\" -S \"$chain\" >/dev/null 2>&1 || continue
    if iptables -w -t \"$table\" -F \"$chain\" && iptables -w -t \"$table\" -X \"$chain\"; then
      echo \"removed iptables chain $chain\"
    else
      echo \"error: cannot delete iptables chain $chain (still referenced?)\" >&2
    fi
  done
fi
S={state}
off=0
[ -s \"$S\" ] && read -r off base < \"$S\"
if [ \"$off\" != 0 ]; then
  if msg=$({clock} 2>&1 >/dev/null); then
    echo \"removed clock offset of $off ms (the host clock is set back)\"
  else
    echo \"error: cannot set the host clock back from $off ms: $msg; fix that and run fle-chaos clean again, or set it by hand (date -s) and delete $S\" >&2
    exit 1
  fi
fi
true",
        rec = quote(&format!("{dir}/{RECORD}")),
        fs = fle_node::lazyfs::FS_NAME,
        state = quote(&format!("{dir}/{}", host_clock::STATE)),
        clock = clock_script(dir, 0),
    )
}

/// Deletes the node's folder, refusing any path that is not one of ours.
pub fn remove_dir_script(dir: &str) -> String {
    format!(
        "case {d} in /*/flc-*) ;; *) echo 'error: refusing to delete {d}' >&2; exit 1;; esac
[ -e {d} ] || exit 0
rm -rf {d} && echo 'removed folder '{d}",
        d = quote(dir)
    )
}

/// The node's folder as a tar stream on stdout (logs, data, record; not the binary, nor an
/// uploaded ZooKeeper distribution).
pub fn fetch_script(dir: &str) -> String {
    format!(
        "[ -d {d} ] || exit 0; tar -C {d} --exclude=./{BINARY} --exclude=./{PID_FILE} --exclude=./{home} -cf - .",
        d = quote(dir),
        home = crate::control::sut::zookeeper::install::UPLOADED_HOME,
    )
}

/// What removing one node's resources did.
#[derive(Debug, Default)]
pub struct Removal {
    pub removed: Vec<String>,
    pub errors: Vec<String>,
}

/// Kills the node's recorded processes and deletes its recorded iptables rules and chains,
/// adding what it did to `r`; false when the host could not be asked.
pub async fn cleanup(host: &HostSession, dir: &str, r: &mut Removal) -> bool {
    run_removal(
        host,
        "removing processes and iptables rules",
        &cleanup_script(dir),
        r,
    )
    .await
}

/// Removes everything `node` recorded on its host, then its folder (`clean`, and the last step
/// of a run's teardown).
pub async fn remove_node(host: &HostSession, dir: &str, r: &mut Removal) {
    // Without the cleanup, deleting the folder would lose the record of what to kill.
    if cleanup(host, dir, r).await {
        run_removal(host, "removing the node folder", &remove_dir_script(dir), r).await;
    }
}

async fn run_removal(host: &HostSession, what: &str, script: &str, r: &mut Removal) -> bool {
    let name = host.host();
    match host.run(what, script, None).await {
        Ok(out) => {
            for l in String::from_utf8_lossy(&out.stdout).lines() {
                if let Some(x) = l.strip_prefix("removed ") {
                    r.removed.push(format!("{x} on {name}"));
                }
            }
            let mut reported = false;
            for l in String::from_utf8_lossy(&out.stderr).lines() {
                if let Some(x) = l.strip_prefix("error: ") {
                    r.errors.push(format!("{name}: {x}"));
                    reported = true;
                }
            }
            if !out.status.success() && !reported {
                r.errors.push(format!(
                    "{name}: {what} failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            out.status.success()
        }
        Err(e) => {
            r.errors.push(format!(
                "{name}: {what}: {e:#} (the record stays on the host; run `fle-chaos clean` \
                 when it is reachable again)"
            ));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hosts' script removes libfaketime's pair of a dead process made since its start
    /// (here on this machine: the same shell functions run on every host), and no older file.
    #[test]
    fn the_host_script_removes_the_shm_pair_of_a_killed_process_only() {
        use crate::control::backend::registry::process_start_time;
        let dir = tempfile::tempdir().unwrap();
        let Some((mut child, pair)) =
            crate::control::fault::faketime_shm::sleeper_with_pair(dir.path())
        else {
            return;
        };
        let pid = child.id();
        let start = process_start_time(pid).unwrap();
        let script = signal_script(pid, start, "KILL", true);
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        let _ = child.wait();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        assert!(stdout.contains("sent"), "{stdout}");
        for f in &pair {
            assert!(!f.exists(), "{} left: {stdout}", f.display());
            let line = format!("removed libfaketime's {}", f.display());
            assert!(stdout.contains(&line), "{stdout}");
        }
        // A pair older than the process it is checked against is another's: kept. (The pid
        // is this dead child's, the start is this test's own, later than the file.)
        let old = dir.path().join("old");
        std::fs::write(&old, b"").unwrap();
        let decoy = &pair[0];
        std::fs::copy(&old, decoy).unwrap();
        let touched = std::process::Command::new("touch")
            .args(["-d", "2000-01-01"])
            .arg(decoy)
            .status()
            .unwrap();
        assert!(touched.success());
        let me = process_start_time(std::process::id()).unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("{PRELUDE}\nflc_shm_gone {pid} {me}")])
            .output()
            .unwrap();
        let kept = decoy.exists();
        let _ = std::fs::remove_file(decoy);
        assert!(kept, "{out:?}");
    }

    #[test]
    fn a_lazyfs_mount_is_recorded_before_it_is_made_and_unmounted_by_cleanup() {
        let dir = "/tmp/flc-r1-n1";
        let mount = [
            "lazyfs",
            "mount",
            "--backing",
            "/b",
            "--mount",
            "/tmp/flc-r1-n1/data",
        ];
        let rec = record_lazyfs(dir, &mount).unwrap();
        assert!(
            rec.contains("'lazyfs /tmp/flc-r1-n1/data' >> /tmp/flc-r1-n1/"),
            "{rec}"
        );
        assert!(rec.contains(RECORD));
        assert_eq!(
            record_lazyfs(dir, &["lazyfs", "drop", "--control", "/s"]),
            None
        );
        assert_eq!(record_lazyfs(dir, &["--config", "/c"]), None);
        let clean = cleanup_script(dir);
        assert!(clean.contains("umount -l"), "{clean}");
        assert!(clean.contains(fle_node::lazyfs::FS_NAME));
    }
}
