//! What both VM fixtures (fake VMs, qemu VMs) share: one private 172.(24..31).y.0/24 each (so
//! two fixtures, of either kind, never take the same subnet), the keys made for the test, and
//! the ssh_config that logs in with them.

use std::path::{Path, PathBuf};
use std::process::Command;

fn output(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// 172.(24..31).y.0/24 with no address or route of this machine (or of any namespace) in it,
/// claimed with a lock file in the temp dir (the caller removes it when done).
pub fn claim_subnet() -> ((u8, u8), PathBuf) {
    use rand::Rng;
    let mut used = output("ip", &["-4", "-o", "addr"]);
    used.push_str(&output("ip", &["-4", "route"]));
    used.push_str(&output(
        "ip",
        &["-all", "netns", "exec", "ip", "-4", "-o", "addr"],
    ));
    let mut rng = rand::thread_rng();
    for _ in 0..200 {
        let (a, b) = (rng.gen_range(24..=31u8), rng.gen_range(0..=255u8));
        let prefix = format!("172.{a}.{b}.");
        if used.contains(&prefix) {
            continue;
        }
        // The name predates the qemu VMs; kept so older checkouts running beside us still see it.
        let claim = std::env::temp_dir().join(format!("flc-ssh-subnet-172.{a}.{b}"));
        if std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&claim)
            .is_ok()
        {
            return ((a, b), claim);
        }
    }
    panic!("no free 172.24-31.x.0/24 subnet found");
}

/// A fresh ed25519 key pair at `path` (and `path`.pub), no passphrase.
pub fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "flc-test", "-f"])
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "ssh-keygen could not make {}", path.display());
}

/// Writes `dir/known_hosts` and an ssh_config at `config` logging in as root with `client_key`
/// only, checking host keys against that known_hosts.
pub fn write_ssh_config(config: &Path, dir: &Path, client_key: &Path, known_hosts: &str) {
    let known = dir.join("known_hosts");
    std::fs::write(&known, known_hosts).unwrap();
    std::fs::write(
        config,
        format!(
            "Host *\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n",
            client_key.display(),
            known.display()
        ),
    )
    .unwrap();
}
