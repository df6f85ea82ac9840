//! OS setup for the zookeeper target, as `control::backend::os_setup` does it for the fault tools:
//! Debian's `zookeeper` package (which brings the jars, Jetty, servlet-api and a JRE) is
//! installed with apt-get when missing and we are root, saying what is installed; without
//! root a missing piece is a clear error with the command to run.

use super::launch::CLASSPATH;
use crate::exit::bad_input;
use anyhow::Result;
use std::path::Path;
use std::process::Command;

/// What the target needs: every jar of the classpath and a `java` to run them.
pub const PACKAGES: &[&str] = &["zookeeper", "libslf4j-java", "default-jre-headless"];

/// The missing pieces, named for people.
pub fn missing(java: &Path) -> Vec<String> {
    let mut missing: Vec<String> = CLASSPATH
        .iter()
        .filter(|jar| !Path::new(jar).exists())
        .map(|jar| jar.to_string())
        .collect();
    if !java_runs(java) {
        missing.push(format!("a Java runtime (`{}`)", java.display()));
    }
    missing
}

fn java_runs(java: &Path) -> bool {
    Command::new(java)
        .arg("-version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// A Java runtime to run a distribution folder (`--zookeeper-home`, `--zookeeper-version`):
/// `default-jre-headless` installed when `java` does not run and we are root.
pub fn ensure_java(java: &Path, say: &mut dyn FnMut(&str)) -> Result<()> {
    if java_runs(java) {
        return Ok(());
    }
    let package = "default-jre-headless";
    if !crate::control::is_root() {
        return Err(bad_input(format!(
            "the zookeeper target needs a Java runtime (`{}`); install as root: apt-get install -y {package}",
            java.display()
        )));
    }
    let installed = crate::control::backend::apt::install(&[package], "the zookeeper target", say);
    if java_runs(java) {
        return Ok(());
    }
    anyhow::bail!(
        "could not install {package} (apt-get: {}); run `apt-get update && apt-get install -y {package}` and retry",
        installed.last_line
    )
}

/// Installs the packages when something is missing; `say` receives what is being done.
pub fn ensure(java: &Path, say: &mut dyn FnMut(&str)) -> Result<()> {
    let before = missing(java);
    if before.is_empty() {
        return Ok(());
    }
    let packages = PACKAGES.join(" ");
    if !crate::control::is_root() {
        return Err(bad_input(format!(
            "the zookeeper target needs {}; install as root: apt-get install -y {packages}",
            before.join(", ")
        )));
    }
    let installed = crate::control::backend::apt::install(PACKAGES, "the zookeeper target", say);
    let after = missing(java);
    if after.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "could not install {packages} (still missing: {}; apt-get: {}); run `apt-get update && apt-get install -y {packages}` and retry",
        after.join(", "),
        installed.last_line
    )
}
