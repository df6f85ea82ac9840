//! Which ZooKeeper runs, and getting it onto a node's host.
//!
//! Two installs: Debian's `zookeeper` package (the default: jars under /usr/share/java) or a
//! distribution folder the user names with `--zookeeper-home` (Apache's layout: `bin/ lib/
//! conf/`, 3.5 to 3.9; `lib/` holds `zookeeper-<version>.jar` and its dependencies, `conf/` the
//! logging configuration). On this machine `os_setup` installs the package; on a remote host
//! (`--ssh`) `prepare_host` does it through the node's `Control`: the package with the host's
//! apt-get when a jar or `java` is missing; a home used where it already is on the host, else
//! uploaded from this machine into the node's folder (`zookeeper-home/`, not copied back at
//! teardown).

use super::launch::CLASSPATH;
use crate::control::backend::ssh::shell::quote;
use crate::control::Control;
use crate::exit::bad_input;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The folder, inside a node's folder, an uploaded home is unpacked into.
pub const UPLOADED_HOME: &str = "zookeeper-home";

/// Which ZooKeeper the servers run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Install {
    /// Debian's package (jars in /usr/share/java).
    Debian,
    /// A distribution folder (`--zookeeper-home`), as a path on this machine.
    Home(PathBuf),
}

impl Install {
    /// How the run's record names it.
    pub fn describe(&self) -> String {
        match self {
            Install::Debian => "Debian's zookeeper package (/usr/share/java)".into(),
            Install::Home(dir) => format!("--zookeeper-home {}", dir.display()),
        }
    }
}

/// The JVM classpath for a distribution folder at `home` (as a path where the server runs):
/// every jar of `lib/` (and a jar at the top, where 3.5-3.6 binary releases put it too), and
/// `conf/` for its logging configuration.
pub fn home_classpath(home: &str) -> String {
    format!("{home}/lib/*:{home}/*:{home}/conf")
}

/// The JVM classpath of an install, `home` being where the folder is on the server's host.
pub fn classpath(install: &Install, home: Option<&str>) -> String {
    match (install, home) {
        (Install::Home(dir), None) => home_classpath(&dir.to_string_lossy()),
        (Install::Home(_), Some(h)) => home_classpath(h),
        (Install::Debian, _) => CLASSPATH.join(":"),
    }
}

/// Checks that `dir` looks like a ZooKeeper distribution (a bad `--zookeeper-home` is bad
/// input, named with the fix).
pub fn check_home(dir: &Path) -> Result<()> {
    let fix = "point --zookeeper-home at an Apache ZooKeeper binary distribution folder \
               (apache-zookeeper-X.Y.Z-bin: bin/ lib/ conf/, 3.5 to 3.9)";
    if !dir.is_dir() {
        return Err(bad_input(format!(
            "--zookeeper-home {}: no such folder; {fix}",
            dir.display()
        )));
    }
    let has_jar = std::fs::read_dir(dir.join("lib"))
        .map(|entries| {
            entries.flatten().any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with("zookeeper") && name.ends_with(".jar") && !name.contains("jute")
            })
        })
        .unwrap_or(false);
    if !has_jar {
        return Err(bad_input(format!(
            "--zookeeper-home {}: no lib/zookeeper-*.jar in it (a source release, or not \
             ZooKeeper?); {fix}",
            dir.display()
        )));
    }
    Ok(())
}

/// The Debian packages a host needs for the default install.
const PACKAGES: &str = "zookeeper libslf4j-java default-jre-headless";

/// What a host lacks for `install` ("java", jar paths), and whether a home is already there.
fn probe_script(install: &Install) -> String {
    let mut s = String::from(
        "java -version >/dev/null 2>&1 || echo missing=java\n\
         command -v apt-get >/dev/null 2>&1 && echo pm=apt-get\n",
    );
    match install {
        Install::Debian => {
            for jar in CLASSPATH {
                s.push_str(&format!("[ -e {jar} ] || echo missing={jar}\n"));
            }
        }
        Install::Home(dir) => {
            s.push_str(&format!(
                "ls {}/lib/zookeeper*.jar >/dev/null 2>&1 && echo home=there\n",
                quote(&dir.to_string_lossy())
            ));
        }
    }
    s.push_str("true");
    s
}

/// Makes `install` runnable on `node`'s (remote) host; returns where the home is there (None
/// for the Debian package) and, when something was installed or uploaded, a line saying so.
pub fn prepare_host(
    control: &dyn Control,
    node: &str,
    install: &Install,
) -> Result<(Option<String>, Option<String>)> {
    let out = control.exec(node, "sh", &["-c", &probe_script(install)])?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let missing: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("missing="))
        .collect();
    let apt = text.lines().any(|l| l == "pm=apt-get");
    let mut said = Vec::new();
    if !missing.is_empty() {
        let packages = match install {
            Install::Debian => PACKAGES,
            Install::Home(_) => "default-jre-headless",
        };
        if !apt {
            bail!(
                "{node}: the zookeeper target needs {} on the host, which has no apt-get; \
                 install a Java runtime{} by hand",
                missing.join(", "),
                if *install == Install::Debian {
                    " and ZooKeeper (or use --zookeeper-home)"
                } else {
                    ""
                }
            );
        }
        let script = format!(
            "export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq --no-install-recommends {packages} >&2 \
             || {{ apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends {packages} >&2; }}"
        );
        control
            .exec(node, "sh", &["-c", &script])
            .with_context(|| format!("{node}: cannot install {packages} with apt-get"))?;
        said.push(format!(
            "installed {packages} (missing: {}) with apt-get",
            missing.join(", ")
        ));
    }
    let home = match install {
        Install::Debian => None,
        Install::Home(dir) if text.lines().any(|l| l == "home=there") => {
            Some(dir.to_string_lossy().into_owned())
        }
        Install::Home(dir) => {
            let uploaded = upload_home(control, node, dir)?;
            said.push(format!("uploaded {} to {uploaded}", dir.display()));
            Some(uploaded)
        }
    };
    let note = (!said.is_empty()).then(|| format!("{node}: {}", said.join("; ")));
    Ok((home, note))
}

/// Copies the local folder `dir` into the node's folder on its host; returns its path there.
fn upload_home(control: &dyn Control, node: &str, dir: &Path) -> Result<String> {
    let tar = std::process::Command::new("tar")
        .arg("-C")
        .arg(dir)
        .args(["-cf", "-", "."])
        .output()
        .context("cannot run tar")?;
    if !tar.status.success() {
        bail!(
            "cannot pack {}: {}",
            dir.display(),
            String::from_utf8_lossy(&tar.stderr).trim()
        );
    }
    let archive = format!("{UPLOADED_HOME}.tar");
    let path = control.write_file(node, Path::new(&archive), &tar.stdout)?;
    let target = control.node_dir(node)?.join(UPLOADED_HOME);
    let t = target.to_string_lossy().into_owned();
    let script = format!(
        "mkdir -p {t} && tar -xf {a} -C {t} && rm -f {a}",
        t = quote(&t),
        a = quote(&path.to_string_lossy())
    );
    control.exec(node, "sh", &["-c", &script])?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_runs_every_jar_of_lib_with_conf_for_logging() {
        assert_eq!(
            classpath(&Install::Home("/opt/zk".into()), None),
            "/opt/zk/lib/*:/opt/zk/*:/opt/zk/conf"
        );
        assert_eq!(
            classpath(&Install::Home("/opt/zk".into()), Some("/tmp/flc-x-n1/zookeeper-home")),
            "/tmp/flc-x-n1/zookeeper-home/lib/*:/tmp/flc-x-n1/zookeeper-home/*:/tmp/flc-x-n1/zookeeper-home/conf"
        );
        assert_eq!(classpath(&Install::Debian, None), CLASSPATH.join(":"));
    }

    #[test]
    fn a_folder_without_a_zookeeper_jar_is_bad_input_naming_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let e = check_home(&dir.path().join("nope")).unwrap_err();
        assert!(format!("{e}").contains("no such folder"), "{e}");
        std::fs::create_dir_all(dir.path().join("lib")).unwrap();
        std::fs::write(dir.path().join("lib/zookeeper-jute-3.8.4.jar"), b"").unwrap();
        let e = check_home(dir.path()).unwrap_err();
        assert!(format!("{e}").contains("no lib/zookeeper-*.jar"), "{e}");
        assert_eq!(crate::exit::code_for(&e), crate::exit::BAD_ARGS);
        std::fs::write(dir.path().join("lib/zookeeper-3.8.4.jar"), b"").unwrap();
        check_home(dir.path()).unwrap();
    }

    #[test]
    fn the_probe_asks_for_java_and_every_jar_or_the_home() {
        let s = probe_script(&Install::Debian);
        assert!(s.contains("missing=java"));
        for jar in CLASSPATH {
            assert!(s.contains(&format!("missing={jar}")), "{s}");
        }
        let s = probe_script(&Install::Home("/opt/my zk".into()));
        assert!(s.contains("ls '/opt/my zk'/lib/zookeeper*.jar"), "{s}");
    }
}
