//! Removing what a run recorded in its registry, in dependency order: processes, iptables
//! rules, chains, namespaces, links, subnet claims, files. Shared by the run's own teardown
//! and by `fle-chaos clean`; it touches nothing that is not listed, and a process only when its
//! pid and start time still match the record (pids get reused).

use crate::control::backend::netns;
use crate::control::backend::registry::{
    is_same_process, process_start_time, processes_with_spawn_tokens, Resource,
};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::process::Command;
use std::time::{Duration, Instant};

/// What one teardown did: one line per removed resource, and the errors it met.
#[derive(Debug, Default)]
pub struct TeardownReport {
    pub removed: Vec<String>,
    pub errors: Vec<String>,
}

/// Removes every resource in `resources` (the controller record excepted), in the order
/// that lets each go: remote nodes, processes (then what they left), mounts, network, files.
pub fn remove_all(resources: &[Resource]) -> TeardownReport {
    let mut report = TeardownReport::default();
    // Remote nodes (SSH clusters) first: their record lives on their hosts.
    let (removed, errors) = crate::control::backend::ssh::remove_recorded(resources);
    report.removed.extend(removed);
    report.errors.extend(errors);
    let local = crate::control::backend::ssh::local_resources(resources);
    let resources = &local[..];
    let mut killed = kill_recorded(resources, &mut report);
    killed.extend(kill_spawned(resources, &mut report));
    wait_gone(&killed, &mut report);
    // After the processes (nothing of theirs is still writing), before the folders go.
    unmount(resources, &mut report);
    remove_network(resources, &mut report);
    for r in resources.iter().rev() {
        if let Resource::SshControl { dir } = r {
            remove_ssh_control(dir, &mut report);
        }
    }
    remove_files(resources, &mut report);
    report
}

/// SIGKILLs the recorded processes that are still the ones recorded; returns (pid, start time)
/// of each one killed.
fn kill_recorded(resources: &[Resource], report: &mut TeardownReport) -> Vec<(u32, u64)> {
    let mut killed = Vec::new();
    for r in resources {
        if let Resource::Process {
            pid,
            start_time,
            comm,
            node,
        } = r
        {
            // pid + start time identify the process across exec (a launcher script that
            // execs the server keeps both), and a reused pid has another start time.
            if is_same_process(*pid, *start_time) {
                match kill(Pid::from_raw(*pid as i32), Signal::SIGKILL) {
                    Ok(()) => {
                        report
                            .removed
                            .push(format!("process {pid} ({comm}, node {node})"));
                        killed.push((*pid, *start_time));
                    }
                    // Exited between the check and the kill: gone, as wanted.
                    Err(nix::errno::Errno::ESRCH) => {}
                    Err(e) => report.errors.push(format!("kill {pid}: {e}")),
                }
            }
        }
    }
    killed
}

/// SIGKILLs a process recorded only by its spawn token (the controller died before its pid
/// was written down), and whatever it started.
fn kill_spawned(resources: &[Resource], report: &mut TeardownReport) -> Vec<(u32, u64)> {
    let mut killed = Vec::new();
    let spawned: Vec<(&str, &str)> = resources
        .iter()
        .filter_map(|r| match r {
            Resource::Spawn { node, token } => Some((token.as_str(), node.as_str())),
            _ => None,
        })
        .collect();
    let tokens: Vec<&str> = spawned.iter().map(|(t, _)| *t).collect();
    for (pid, token) in processes_with_spawn_tokens(&tokens) {
        let Some(start_time) = process_start_time(pid) else {
            continue;
        };
        let node = spawned
            .iter()
            .find(|(t, _)| *t == token)
            .map_or("?", |(_, n)| n);
        match kill(Pid::from_raw(pid as i32), Signal::SIGKILL) {
            Ok(()) => {
                report
                    .removed
                    .push(format!("process {pid} (spawned for node {node}, {token})"));
                killed.push((pid, start_time));
            }
            Err(nix::errno::Errno::ESRCH) => {}
            Err(e) => report.errors.push(format!("kill {pid}: {e}")),
        }
    }
    killed
}

/// Waits (bounded) until the killed processes are gone: a killed process keeps its sockets
/// until then, and namespaces go cleanly only after. Then removes the libfaketime files each
/// one left.
fn wait_gone(killed: &[(u32, u64)], report: &mut TeardownReport) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while killed.iter().any(|(p, s)| is_same_process(*p, *s)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    for (pid, start_time) in killed {
        for f in crate::control::fault::faketime_shm::remove_pair_of(*pid, *start_time) {
            report
                .removed
                .push(format!("libfaketime's {}", f.display()));
        }
    }
}

/// Unmounts the lazyfs mounts, newest first.
fn unmount(resources: &[Resource], report: &mut TeardownReport) {
    for r in resources.iter().rev() {
        if let Resource::LazyFs { mount, node, .. } = r {
            match crate::control::fault::lazyfs::unmount_local(mount) {
                Ok(true) => report
                    .removed
                    .push(format!("lazyfs mount {} (node {node})", mount.display())),
                Ok(false) => {}
                // Unmounted between the look and the unmount (its run tearing itself down, a
                // concurrent `clean`): gone, as wanted.
                Err(_) if !crate::control::fault::lazyfs::is_mounted(mount) => {}
                Err(e) => report.errors.push(format!("{e:#}")),
            }
        }
    }
}

/// Qdiscs, iptables rules, then chains (a chain still referenced cannot be deleted), then
/// namespaces and links, newest first.
fn remove_network(resources: &[Resource], report: &mut TeardownReport) {
    for r in resources.iter().rev() {
        if let Resource::Qdisc { netns, dev, handle } = r {
            if remove_qdisc(netns.as_deref(), dev, handle) {
                report.removed.push(format!("qdisc {handle} on {dev}"));
            }
        }
    }
    for r in resources.iter().rev() {
        if let Resource::Rule { netns, table, spec } = r {
            let mut args = vec!["-w", "-t", table, "-D"];
            args.extend(spec.iter().map(String::as_str));
            if iptables(netns.as_deref(), &args).is_ok() {
                report
                    .removed
                    .push(format!("iptables rule {}", spec.join(" ")));
            }
        }
    }
    for r in resources.iter().rev() {
        if let Resource::Chain {
            netns,
            table,
            chain,
        } = r
        {
            let flushed = iptables(netns.as_deref(), &["-w", "-t", table, "-F", chain]);
            let deleted = iptables(netns.as_deref(), &["-w", "-t", table, "-X", chain]);
            if flushed.is_ok() && deleted.is_ok() {
                report.removed.push(format!("iptables chain {chain}"));
            }
        }
    }
    for r in resources.iter().rev() {
        match r {
            // "Removed" only when it was there a moment before; gone meanwhile is no error.
            Resource::Netns { name } => {
                let existed = std::path::Path::new("/run/netns").join(name).exists();
                match netns::delete_netns(name) {
                    Ok(()) if existed => report.removed.push(format!("namespace {name}")),
                    Ok(()) => {}
                    Err(e) => report.errors.push(format!("{e:#}")),
                }
            }
            Resource::Link { name } => {
                let existed = std::path::Path::new("/sys/class/net").join(name).exists();
                match netns::delete_link(name) {
                    Ok(()) if existed => report.removed.push(format!("link {name}")),
                    Ok(()) => {}
                    Err(e) => report.errors.push(format!("{e:#}")),
                }
            }
            _ => {}
        }
    }
}

/// Subnet claims and files outside the run folder, newest first.
fn remove_files(resources: &[Resource], report: &mut TeardownReport) {
    for r in resources.iter().rev() {
        match r {
            Resource::Subnet { claim, cidr } if std::fs::remove_file(claim).is_ok() => {
                report.removed.push(format!("subnet claim {cidr}"));
            }
            Resource::File { path } => {
                let gone = if path.is_dir() {
                    std::fs::remove_dir_all(path)
                } else {
                    std::fs::remove_file(path)
                };
                if gone.is_ok() {
                    report.removed.push(format!("file {}", path.display()));
                }
            }
            _ => {}
        }
    }
}

/// Ends the run's OpenSSH masters (those with their socket under `dir`) and removes `dir`,
/// refusing any folder that is not an `flc-ssh-` one.
fn remove_ssh_control(dir: &std::path::Path, report: &mut TeardownReport) {
    let ours = dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("flc-ssh-"));
    if !ours {
        report.errors.push(format!(
            "refusing to remove {}: not an flc-ssh- folder",
            dir.display()
        ));
        return;
    }
    for pid in crate::control::backend::ssh::masters_in(dir) {
        if kill(Pid::from_raw(pid as i32), Signal::SIGTERM).is_ok() {
            report.removed.push(format!("ssh master {pid}"));
        }
    }
    if std::fs::remove_dir_all(dir).is_ok() {
        report.removed.push(format!("folder {}", dir.display()));
    }
}

/// Deletes the root qdisc `handle` on `dev` if it is still the root there (never another's);
/// true when it did.
fn remove_qdisc(netns: Option<&str>, dev: &str, handle: &str) -> bool {
    let tc = |args: &[&str]| -> Option<String> {
        let mut cmd = match netns {
            Some(ns) => {
                if !std::path::Path::new("/run/netns").join(ns).exists() {
                    return None;
                }
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "tc"]);
                c
            }
            None => Command::new("tc"),
        };
        match cmd.args(args).output() {
            Ok(out) if out.status.success() => Some(String::from_utf8_lossy(&out.stdout).into()),
            _ => None,
        }
    };
    let ours = tc(&["qdisc", "show", "dev", dev]).is_some_and(|listing| {
        listing.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() >= 4 && w[0] == "qdisc" && w[2] == handle && w[3] == "root"
        })
    });
    ours && tc(&["qdisc", "del", "dev", dev, "root", "handle", handle]).is_some()
}

/// Runs iptables on the host or inside a namespace; a missing namespace counts as done
/// (deleting the namespace took its rules with it).
fn iptables(netns: Option<&str>, args: &[&str]) -> Result<(), ()> {
    let mut cmd = match netns {
        Some(ns) => {
            if !std::path::Path::new("/run/netns").join(ns).exists() {
                return Err(());
            }
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "iptables"]);
            c
        }
        None => Command::new("iptables"),
    };
    match cmd.args(args).output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::backend::registry::{process_start_time, SPAWN_ENV};

    /// A process recorded only by its spawn token (the controller was killed between the
    /// spawn and the pid's record) is found and killed by that exact token; a process whose
    /// token differs by a suffix is not ours and is left alone.
    #[test]
    fn a_process_known_only_by_its_spawn_token_is_removed() {
        let token = format!("flc-test-{}/n1/0", std::process::id());
        let spawn = |t: &str| {
            Command::new("sleep")
                .arg("30")
                .env(SPAWN_ENV, t)
                .spawn()
                .unwrap()
        };
        let mut ours = spawn(&token);
        let mut other = spawn(&format!("{token}0"));
        // The kernel lets the parent of a vfork-style spawn go on before the child's new
        // environment is published in /proc (it reads empty for a moment); wait for both.
        let deadline = Instant::now() + Duration::from_secs(5);
        let published = |pid: u32| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.windows(SPAWN_ENV.len())
                    .any(|w| w == SPAWN_ENV.as_bytes())
            })
        };
        while !(published(ours.id()) && published(other.id())) {
            assert!(
                Instant::now() < deadline,
                "the children's environments never showed"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let report = remove_all(&[Resource::Spawn {
            node: "n1".into(),
            token: token.clone(),
        }]);
        assert_eq!(report.errors, Vec::<String>::new());
        assert_eq!(report.removed.len(), 1, "{:?}", report.removed);
        assert!(report.removed[0].contains(&ours.id().to_string()));
        let status = ours.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert!(
            other.try_wait().unwrap().is_none(),
            "another token's process was killed"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }

    /// What `clean` meets when a run removes its own resources between `clean`'s listing and
    /// its removal: every resource listed, none of them there any more. Gone is what was
    /// wanted: no error (clean exits 0), nothing claimed as removed.
    #[test]
    fn resources_gone_before_their_removal_are_no_error() {
        if !crate::control::is_root() {
            crate::test_skip::skip("teardown: ip netns", "needs root (ip netns)");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let tag = format!("{:06x}", std::process::id() & 0xff_ffff);
        let (ns, link) = (format!("flc-gone-{tag}"), format!("flcgone{tag}"));
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start_time = process_start_time(pid).unwrap_or(1);
        child.wait().unwrap();
        let resources = vec![
            Resource::Process {
                pid,
                start_time,
                comm: "true".into(),
                node: "n1".into(),
            },
            Resource::LazyFs {
                node: "n1".into(),
                mount: tmp.path().join("mnt"),
                control: "@flc-lazyfs-gone-n1".into(),
            },
            Resource::Rule {
                netns: Some(ns.clone()),
                table: "filter".into(),
                spec: vec!["INPUT".into(), "-j".into(), "flc-x".into()],
            },
            Resource::Chain {
                netns: Some(ns.clone()),
                table: "filter".into(),
                chain: "flc-x".into(),
            },
            Resource::Netns { name: ns.clone() },
            Resource::Link { name: link.clone() },
            Resource::Subnet {
                claim: tmp.path().join("10.250.0"),
                cidr: "10.250.0.0/24".into(),
            },
            Resource::File {
                path: tmp.path().join("gone"),
            },
        ];
        let report = remove_all(&resources);
        assert_eq!(report.errors, Vec::<String>::new());
        assert_eq!(report.removed, Vec::<String>::new());
        // The removals themselves, with no look before them: what they do when the thing
        // vanished after any look.
        netns::delete_netns(&ns).expect("a namespace already gone");
        netns::delete_link(&link).expect("a link already gone");
    }

    /// A removal that fails for another reason is still an error (clean then exits 255): a
    /// "namespace" that is a folder cannot be removed as one.
    #[test]
    fn a_removal_that_really_fails_is_an_error() {
        if !crate::control::is_root() {
            crate::test_skip::skip("teardown: /run/netns", "needs root (/run/netns)");
            return;
        }
        let name = format!("flc-notns-{}", std::process::id());
        let dir = std::path::Path::new("/run/netns").join(&name);
        std::fs::create_dir_all(dir.join("inside")).unwrap();
        let r = netns::delete_netns(&name);
        let _ = std::fs::remove_dir_all(&dir);
        let e = r.expect_err("a folder is not a namespace");
        assert!(format!("{e:#}").contains(&name), "{e:#}");
    }

    /// A node killed under libfaketime leaves libfaketime's /dev/shm pair (it is removed only on
    /// a clean exit); teardown removes the pair of each process it killed.
    #[test]
    fn teardown_removes_the_shm_pair_libfaketime_leaves_behind_a_killed_process() {
        let dir = tempfile::tempdir().unwrap();
        let Some((mut child, pair)) =
            crate::control::fault::faketime_shm::sleeper_with_pair(dir.path())
        else {
            return;
        };
        let pid = child.id();
        let start_time = process_start_time(pid).unwrap();
        let report = remove_all(&[Resource::Process {
            pid,
            start_time,
            comm: "sleep".into(),
            node: "n1".into(),
        }]);
        let _ = child.wait();
        assert_eq!(report.errors, Vec::<String>::new());
        for f in &pair {
            let f = f.display().to_string();
            assert!(!std::path::Path::new(&f).exists(), "{f} left: {report:?}");
            assert!(
                report.removed.iter().any(|r| r.ends_with(&f)),
                "{f} not reported: {report:?}"
            );
        }
    }
}
