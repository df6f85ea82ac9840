//! Per-host setup (Jepsen's `os` + `db/setup!` for remote nodes): the node's folder, the
//! fle-node binary the controller was built with, and the OS tools the chosen faults need,
//! installed with the host's own package manager when missing (saying so).

use super::preflight::HostFacts;
use super::remote::BINARY;
use super::session::HostSession;
use super::shell::quote;
use crate::control::backend::os_setup::Needs;
use crate::control::fault::faketime::LIBFAKETIME;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// Creates the node's folder.
pub async fn make_dir(host: &HostSession, dir: &str) -> Result<()> {
    host.run_ok(
        "creating the node folder",
        &format!("mkdir -p {d} && chmod 755 {d}", d = quote(dir)),
        None,
    )
    .await?;
    Ok(())
}

/// Uploads `local` as `<dir>/fle-node` (through a temporary name, size-checked, so a cut
/// upload never leaves a truncated binary behind).
pub async fn upload_binary(host: &HostSession, dir: &str, local: &Path) -> Result<()> {
    let bytes = tokio::fs::read(local).await.with_context(|| {
        format!(
            "cannot read the fle-node binary {} (build it: cargo build --release)",
            local.display()
        )
    })?;
    let target = format!("{dir}/{BINARY}");
    let script = format!(
        "cat > {t}.tmp && [ \"$(wc -c < {t}.tmp)\" -eq {n} ] && chmod 755 {t}.tmp && mv {t}.tmp {t}",
        t = quote(&target),
        n = bytes.len()
    );
    host.run_ok("uploading fle-node", &script, Some(&bytes))
        .await?;
    Ok(())
}

/// A copy of `binary` without debug info in `dir` (the run's recorded `flc-ssh-<run>` folder),
/// to upload instead (line tables are most of the release binary: 59 MB against ~7 MB); None
/// when `strip` is missing or fails, and the binary goes up as it is.
pub fn stripped_copy(binary: &Path, dir: &Path) -> Option<std::path::PathBuf> {
    let copy = dir.join(".fle-node.upload");
    let ok = std::process::Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&copy)
        .arg(binary)
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(copy)
}

/// Writes `contents` to `path` on the host (atomically: readers such as libfaketime never see
/// half a file).
pub async fn write_remote(host: &HostSession, path: &str, contents: &[u8]) -> Result<()> {
    let script = format!(
        "mkdir -p \"$(dirname {p})\" && cat > {p}.flc-tmp && mv {p}.flc-tmp {p}",
        p = quote(path)
    );
    host.run_ok(&format!("writing {path}"), &script, Some(contents))
        .await?;
    Ok(())
}

/// The packages the faults need that the host lacks.
fn missing_packages(facts: &HostFacts, needs: Needs) -> Vec<(&'static str, &'static str)> {
    let mut missing = Vec::new();
    if needs.iptables && !facts.has_iptables {
        missing.push(("iptables", "partitions"));
    }
    if needs.faketime && !facts.has_faketime {
        missing.push(("libfaketime", "clock faults"));
    }
    missing
}

/// Installs the missing tools; returns what it installed, for the user to read.
pub async fn install_tools(
    host: &HostSession,
    facts: &HostFacts,
    needs: Needs,
) -> Result<Option<String>> {
    let missing = missing_packages(facts, needs);
    if missing.is_empty() {
        return Ok(None);
    }
    let packages: Vec<&str> = missing.iter().map(|m| m.0).collect();
    let what: Vec<&str> = missing.iter().map(|m| m.1).collect();
    let list = packages.join(" ");
    let install = match facts.package_manager.as_deref() {
        Some("apt-get") => format!(
            "export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq --no-install-recommends {list} \
             || {{ apt-get update -qq && apt-get install -y -qq --no-install-recommends {list}; }}"
        ),
        Some("dnf") => format!("dnf install -y -q {list}"),
        Some("yum") => format!("yum install -y -q {list}"),
        Some("apk") => format!("apk add -q {list}"),
        Some("zypper") => format!("zypper -n -q install {list}"),
        _ => bail!(
            "{}: {} needed for {} but missing, and no known package manager; install it by hand",
            host.host(),
            list,
            what.join(", ")
        ),
    };
    let check = format!(
        "{install} >&2 || exit 1
{}
{}
true",
        if needs.iptables {
            "command -v iptables >/dev/null 2>&1 || [ -x /usr/sbin/iptables ] || { echo 'iptables still missing' >&2; exit 1; }"
        } else {
            ""
        },
        if needs.faketime {
            format!("[ -e {LIBFAKETIME} ] || {{ echo 'libfaketime not at {LIBFAKETIME} (clock faults need Debian/Ubuntu libfaketime)' >&2; exit 1; }}")
        } else {
            String::new()
        }
    );
    host.run_ok(&format!("installing {list}"), &check, None)
        .await
        .with_context(|| format!("cannot install {list} for {}", what.join(", ")))?;
    Ok(Some(format!(
        "{}: installed {list} for {} ({})",
        host.host(),
        what.join(", "),
        facts.package_manager.as_deref().unwrap_or("?")
    )))
}
