//! One private 172.(24..31).y.0/24 per test fixture (fake VMs, qemu VMs), shared by the support
//! modules so that two fixtures, of either kind, never take the same subnet.

use std::path::PathBuf;
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
