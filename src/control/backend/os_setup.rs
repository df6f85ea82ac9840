//! OS setup, as Jepsen's `os` does it: make sure the tools the selected faults need are on the
//! machine (iproute2 for namespaces, iptables for partitions, libfaketime for clock faults),
//! installing them with apt-get (`apt`) when missing and we are root, and saying what we install.
//! Without root a missing tool is a clear error with the command to run.

use crate::control::fault::faketime::LIBFAKETIME;
use crate::exit::bad_input;
use anyhow::Result;
use std::path::Path;

/// What the run needs from the OS.
#[derive(Debug, Clone, Copy, Default)]
pub struct Needs {
    pub netns: bool,
    pub iptables: bool,
    pub faketime: bool,
}

struct Tool {
    what: &'static str,
    packages: &'static [&'static str],
    present: fn() -> bool,
}

fn on_path(program: &str) -> bool {
    ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(program).exists())
}

/// Every package a run may install on this machine (what `ensure` installs for the most
/// demanding run): a container image holds them all (docs/nightly/Containerfile).
pub fn every_package() -> Vec<&'static str> {
    let all = Needs {
        netns: true,
        iptables: true,
        faketime: true,
    };
    tools(all)
        .iter()
        .flat_map(|t| t.packages.iter().copied())
        .collect()
}

/// Installs what `needs` requires and is missing; `say` receives what is being done.
pub fn ensure(needs: Needs, say: &mut dyn FnMut(&str)) -> Result<()> {
    let tools = tools(needs);
    let missing: Vec<&Tool> = tools.iter().filter(|t| !(t.present)()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let packages: Vec<&str> = missing
        .iter()
        .flat_map(|t| t.packages.iter().copied())
        .collect();
    let what: Vec<&str> = missing.iter().map(|t| t.what).collect();
    if !crate::control::is_root() {
        return Err(bad_input(format!(
            "{} needed but missing; install as root: apt-get install -y {}",
            what.join(", "),
            packages.join(" ")
        )));
    }
    let installed = crate::control::backend::apt::install(&packages, &what.join(", "), say);
    let still_missing: Vec<&str> = missing
        .iter()
        .filter(|t| !(t.present)())
        .map(|t| t.what)
        .collect();
    if installed.ok && still_missing.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "could not install {} for {} (apt-get: {}); run `apt-get update && apt-get install -y {}` and retry",
        packages.join(" "),
        still_missing.join(", "),
        installed.last_line,
        packages.join(" ")
    )
}

/// The tools `needs` asks for, each with its packages.
fn tools(needs: Needs) -> Vec<Tool> {
    let mut tools = Vec::new();
    if needs.netns {
        tools.push(Tool {
            what: "network namespaces (`ip`)",
            packages: &["iproute2"],
            present: || on_path("ip"),
        });
    }
    if needs.iptables {
        tools.push(Tool {
            what: "partitions (`iptables`)",
            packages: &["iptables"],
            present: || on_path("iptables"),
        });
    }
    if needs.faketime {
        tools.push(Tool {
            what: "clock faults (libfaketime)",
            packages: &["libfaketime", "faketime"],
            present: || Path::new(LIBFAKETIME).exists(),
        });
    }
    tools
}
