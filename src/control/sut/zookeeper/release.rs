//! `--zookeeper-version V`: a ZooKeeper release on demand, from Debian's package archive.
//!
//! Debian carries several releases as `libzookeeper-java` (bookworm 3.8.0, trixie 3.9.3, sid
//! 3.9.6, ...). The tool downloads the jars of V and the dependency jars a server needs with
//! apt-get under a private configuration and state folder (the host's apt sources and its
//! installed packages are never touched, nothing is installed), unpacks them with dpkg-deb, and
//! assembles a distribution folder in the user's cache (`lib/`, as `--zookeeper-home` takes
//! it), its jars copied without their manifests' `Class-Path` (`jar`). The folder is reused by
//! later runs; two runs that fetch at once take turns (a lock file), and a half-built folder is
//! never seen (built beside, renamed into place). Before a folder is used, ZooKeeper's own
//! `VersionInfoMain` must print V.
//!
//! The dependency jars come from Debian 12 (bookworm) whatever the release: every release above
//! is built for Java 8 bytecode and runs on bookworm's jars and Java 17, which is what this
//! machine and its hosts run.

use super::jar;
use crate::exit::bad_input;
use anyhow::{Context, Result};
use nix::fcntl::{Flock, FlockArg};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The package that holds ZooKeeper's jars.
pub const PACKAGE: &str = "libzookeeper-java";

/// The suites searched for releases.
pub const SUITES: &[&str] = &["bookworm", "trixie", "sid"];

/// Where the dependency jars come from.
const DEPENDENCY_SUITE: &str = "bookworm";

/// What a server needs beside ZooKeeper's own jars: logging (slf4j, with slf4j-simple as its
/// binding), metrics, snappy (snapshots), the AdminServer (Jetty, servlet-api, Jackson) the
/// controller reads roles from, and commons-cli/io for ZooKeeper's own tools (TxnLogToolkit).
const DEPENDENCIES: &[&str] = &[
    "libslf4j-java",
    "libdropwizard-metrics-java",
    "libsnappy-java",
    "libjetty9-java",
    "libservlet-api-java",
    "libjackson2-databind-java",
    "libjackson2-core-java",
    "libjackson2-annotations-java",
    "libcommons-cli-java",
    "libcommons-io-java",
];

/// How old the archive's package lists may be before a fetch reads them again.
const LISTS_FRESH_FOR: Duration = Duration::from_secs(6 * 3600);

/// The main class that prints a jar set's release.
const VERSION_MAIN: &str = "org.apache.zookeeper.version.VersionInfoMain";

/// A release the archive offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offered {
    /// The upstream release, "3.9.6".
    pub version: String,
    /// Debian's version of the package, "3.9.6-2".
    pub debian: String,
    /// The suite that carries it, "sid".
    pub suite: String,
}

/// The archive's address: `FLC_DEBIAN_MIRROR` (a local mirror), else Debian's own.
pub fn mirror() -> String {
    std::env::var("FLC_DEBIAN_MIRROR").unwrap_or_else(|_| "http://deb.debian.org/debian".into())
}

/// Where releases are kept: `FLC_ZOOKEEPER_CACHE`, else `$XDG_CACHE_HOME/fle-chaos/zookeeper`,
/// else `~/.cache/fle-chaos/zookeeper`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("FLC_ZOOKEEPER_CACHE") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("fle-chaos").join("zookeeper")
}

/// The distribution folder of release `version`, fetched and assembled when this machine
/// does not have it yet; `say` hears what is being done. Bad input (254) when the archive
/// cannot be reached or does not offer `version`.
pub fn home_of(version: &str, java: &Path, say: &mut dyn FnMut(&str)) -> Result<PathBuf> {
    home_in(&cache_root(), version, java, say)
}

/// [`home_of`] with the cache at `root` (a test fetches into a cache of its own before it
/// takes the machine for its runs).
pub fn home_in(
    root: &Path,
    version: &str,
    java: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<PathBuf> {
    check_version_word(version)?;
    let home = root.join(version);
    if !home.join(COMPLETE).is_file() {
        std::fs::create_dir_all(root)
            .with_context(|| format!("cannot create the release cache {}", root.display()))?;
        let _turn = take_turn(&root.join(".lock"))?;
        // Another run may have built it while this one waited.
        if !home.join(COMPLETE).is_file() {
            build(root, version, java, say)?;
        }
    }
    verify(&home, version, java)?;
    Ok(home)
}

/// The releases the archive offers, newest suite's last (`--zookeeper-version list`).
pub fn offered(say: &mut dyn FnMut(&str)) -> Result<Vec<Offered>> {
    let root = cache_root();
    std::fs::create_dir_all(&root)
        .with_context(|| format!("cannot create the release cache {}", root.display()))?;
    let _turn = take_turn(&root.join(".lock"))?;
    let apt = Apt::new(&root.join("apt"))?;
    apt.refresh(say)?;
    apt.offered()
}

/// Checks that the folder `home` runs release `version`: ZooKeeper's `VersionInfoMain` on its
/// jars prints it. A folder that reports another is bad input (254), named.
pub fn verify(home: &Path, version: &str, java: &Path) -> Result<()> {
    let reported = reported_version(home, java)?;
    if reported != version {
        return Err(bad_input(format!(
            "{}: its jars report ZooKeeper {reported}, not {version}; remove the folder (a \
             later run fetches it again) or give --zookeeper-version {reported}",
            home.display()
        )));
    }
    Ok(())
}

/// The release the jars of `home/lib` report ("3.9.6").
pub fn reported_version(home: &Path, java: &Path) -> Result<String> {
    let out = Command::new(java)
        .arg("-cp")
        .arg(format!("{}/lib/*", home.display()))
        .arg(VERSION_MAIN)
        .output()
        .with_context(|| format!("cannot run {} (a Java runtime)", java.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_version_info(&text).ok_or_else(|| {
        bad_input(format!(
            "{}: ZooKeeper's {VERSION_MAIN} printed no release ({}); is it a ZooKeeper \
             distribution folder?",
            home.display(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("no output")
        ))
    })
}

/// "Apache ZooKeeper, version 3.9.6 2026-10-16 16:58 UTC" → "3.9.6".
fn parse_version_info(text: &str) -> Option<String> {
    let rest = text.split("version ").nth(1)?;
    let word = rest.split_whitespace().next()?;
    let release = upstream_of(word);
    (!release.is_empty()).then_some(release)
}

/// The upstream release of a Debian or ZooKeeper version string: its leading dotted number
/// ("1:3.8.0-11+deb12u2" → "3.8.0", "3.9.6-${mvngit.commit.id}" → "3.9.6").
pub fn upstream_of(version: &str) -> String {
    let no_epoch = version.split_once(':').map_or(version, |(_, v)| v);
    no_epoch
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect::<String>()
        .trim_end_matches('.')
        .to_string()
}

/// Whether `version` names a release: three dotted numbers ("3.9.6").
pub fn is_release(version: &str) -> bool {
    let parts: Vec<&str> = version.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok())
}

/// A version that is not a release is refused before the archive is asked.
fn check_version_word(version: &str) -> Result<()> {
    if !is_release(version) {
        return Err(bad_input(format!(
            "--zookeeper-version {version}: a release is three numbers such as 3.9.6; \
             `--zookeeper-version list` prints what Debian's archive offers"
        )));
    }
    Ok(())
}

/// The marker a finished folder holds (with what it was made of).
const COMPLETE: &str = "fle-chaos-release.txt";

/// Downloads, unpacks and assembles release `version` into `root/version`.
fn build(root: &Path, version: &str, java: &Path, say: &mut dyn FnMut(&str)) -> Result<()> {
    let apt = Apt::new(&root.join("apt"))?;
    apt.refresh(say)?;
    let offered = apt.offered()?;
    let Some(pick) = offered.iter().rev().find(|o| o.version == version) else {
        let names: Vec<String> = offered
            .iter()
            .map(|o| format!("{} ({})", o.version, o.suite))
            .collect();
        return Err(bad_input(format!(
            "--zookeeper-version {version}: Debian's archive ({}) offers {}; give one of them, \
             or run a distribution folder of your own with --zookeeper-home DIR",
            mirror(),
            names.join(", ")
        )));
    };
    say(&format!(
        "fetching ZooKeeper {version}: {PACKAGE} {} ({}) and its dependency jars ({DEPENDENCY_SUITE}) from {}",
        pick.debian,
        pick.suite,
        mirror()
    ));
    let scratch = Scratch::new(root.join(format!(".build-{version}-{}", std::process::id())))?;
    let debs = scratch.0.join("debs");
    let unpacked = scratch.0.join("root");
    let home = scratch.0.join("home");
    for d in [&debs, &unpacked, &home.join("lib")] {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let mut specs = vec![format!("{PACKAGE}={}", pick.debian)];
    specs.extend(
        DEPENDENCIES
            .iter()
            .map(|p| format!("{p}/{DEPENDENCY_SUITE}")),
    );
    apt.download(&specs, &debs)?;
    for deb in std::fs::read_dir(&debs)?.flatten() {
        let out = Command::new("dpkg-deb")
            .arg("-x")
            .arg(deb.path())
            .arg(&unpacked)
            .output()
            .context("cannot run dpkg-deb")?;
        if !out.status.success() {
            anyhow::bail!(
                "dpkg-deb -x {}: {}",
                deb.path().display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    let jars = collect_jars(&unpacked.join("usr/share/java"), &home.join("lib"))?;
    std::fs::write(
        home.join(COMPLETE),
        format!(
            "ZooKeeper {version}: {PACKAGE} {} ({}) from {}, dependency jars from {DEPENDENCY_SUITE};\n\
             jars copied without their Class-Path: {}\n",
            pick.debian,
            pick.suite,
            mirror(),
            jars.join(" ")
        ),
    )?;
    verify(&home, version, java)?;
    let target = root.join(version);
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&home, &target)
        .with_context(|| format!("cannot move the release into {}", target.display()))?;
    say(&format!("ZooKeeper {version} is in {}", target.display()));
    Ok(())
}

/// What a server loads beyond the jars ZooKeeper's manifest names: slf4j-simple, the one
/// binding that logs without a config file (to stderr, which the node's log keeps), and
/// servlet-api, which the AdminServer's Jetty needs and the manifest omits (as Debian's own
/// classpath, `launch::CLASSPATH`).
const BESIDE_THE_MANIFEST: &[&str] = &["slf4j-simple.jar", "servlet-api.jar"];

/// Copies ZooKeeper's jar and every jar its manifest's `Class-Path` names, transitively (by
/// file name, found in `java_dir`, a package's /usr/share/java with symlinks resolved inside
/// it), plus [`BESIDE_THE_MANIFEST`], into `lib` without their Class-Path; returns their names.
/// Only what a server loads: the packages also hold other slf4j bindings, which would make
/// slf4j pick one at random or refuse to start.
fn collect_jars(java_dir: &Path, lib: &Path) -> Result<Vec<String>> {
    let mut todo: Vec<String> = BESIDE_THE_MANIFEST.iter().map(|s| s.to_string()).collect();
    todo.push("zookeeper.jar".into());
    let mut names = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(wanted) = todo.pop() {
        let Some(file) = Path::new(&wanted)
            .file_name()
            .and_then(|n| resolve_inside(java_dir, &java_dir.join(n)))
        else {
            continue;
        };
        if !seen.insert(file.clone()) {
            continue;
        }
        todo.extend(jar::class_path(&file)?);
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        jar::copy_without_class_path(&file, &lib.join(&name))?;
        names.push(name);
    }
    names.sort();
    Ok(names)
}

/// The regular file a jar path names, following links by name inside `dir` (Debian's links
/// name a file of the same folder, relative or as /usr/share/java/NAME).
fn resolve_inside(dir: &Path, path: &Path) -> Option<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..8 {
        let meta = std::fs::symlink_metadata(&current).ok()?;
        if meta.is_file() {
            return Some(current);
        }
        let target = std::fs::read_link(&current).ok()?;
        current = dir.join(target.file_name()?);
    }
    None
}

/// apt-get under a private configuration and state: its own sources (the three suites of
/// Debian's archive, signed by Debian 12's keyring), lists, cache and an empty status, and
/// none of the host's apt.conf.d.
struct Apt {
    dir: PathBuf,
}

impl Apt {
    fn new(dir: &Path) -> Result<Apt> {
        let etc = dir.join("etc");
        for d in [
            "lists/partial",
            "cache/archives/partial",
            "etc/parts",
            "etc/sources.d",
            "etc/preferences.d",
        ] {
            std::fs::create_dir_all(dir.join(d))
                .with_context(|| format!("cannot create {}", dir.join(d).display()))?;
        }
        let keyring = "/usr/share/keyrings/debian-archive-keyring.gpg";
        let sources: String = SUITES
            .iter()
            .map(|s| format!("deb [signed-by={keyring}] {} {s} main\n", mirror()))
            .collect();
        std::fs::write(etc.join("sources.list"), sources)?;
        std::fs::write(dir.join("status"), "")?;
        let d = dir.display();
        let conf = format!(
            "Dir::Etc::parts \"{d}/etc/parts\";\n\
             Dir::Etc::sourcelist \"{d}/etc/sources.list\";\n\
             Dir::Etc::sourceparts \"{d}/etc/sources.d\";\n\
             Dir::Etc::preferences \"/dev/null\";\n\
             Dir::Etc::preferencesparts \"{d}/etc/preferences.d\";\n\
             Dir::State::Lists \"{d}/lists\";\n\
             Dir::State::status \"{d}/status\";\n\
             Dir::Cache \"{d}/cache\";\n\
             APT::Architecture \"amd64\";\n\
             APT::Sandbox::User \"root\";\n\
             Acquire::Languages \"none\";\n\
             Acquire::Retries \"2\";\n\
             Acquire::http::Timeout \"20\";\n\
             Acquire::Check-Valid-Until \"false\";\n\
             Acquire::IndexTargets::deb::DEP-11::DefaultEnabled \"false\";\n\
             Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled \"false\";\n"
        );
        std::fs::write(etc.join("apt.conf"), conf)?;
        Ok(Apt {
            dir: dir.to_path_buf(),
        })
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("APT_CONFIG", self.dir.join("etc/apt.conf"))
            .env("DEBIAN_FRONTEND", "noninteractive");
        c
    }

    /// Reads the archive's package lists when they are missing or older than
    /// `LISTS_FRESH_FOR`; an archive that cannot be reached is bad input naming the fix.
    fn refresh(&self, say: &mut dyn FnMut(&str)) -> Result<()> {
        let stamp = self.dir.join("lists/.updated");
        let fresh = std::fs::metadata(&stamp)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < LISTS_FRESH_FOR);
        if fresh {
            return Ok(());
        }
        say(&format!(
            "reading Debian's package lists ({}: {}) into {}",
            mirror(),
            SUITES.join(", "),
            self.dir.display()
        ));
        let out = self
            .command("apt-get")
            .args(["-q", "update"])
            .output()
            .context("cannot run apt-get (Debian's package tool)")?;
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        if let Some(why) = update_failure(&text)
            .or_else(|| (!out.status.success()).then(|| "apt-get update failed".to_string()))
        {
            return Err(bad_input(format!(
                "--zookeeper-version: Debian's package archive {} cannot be read ({why}); run a \
                 ZooKeeper distribution folder with --zookeeper-home DIR instead",
                mirror()
            )));
        }
        std::fs::write(&stamp, "")?;
        Ok(())
    }

    /// Every version of `PACKAGE` the lists hold, ordered by suite as `SUITES` lists them.
    fn offered(&self) -> Result<Vec<Offered>> {
        let out = self
            .command("apt-cache")
            .args(["madison", PACKAGE])
            .output()
            .context("cannot run apt-cache")?;
        let mut offered = parse_madison(&String::from_utf8_lossy(&out.stdout));
        offered.sort_by_key(|o| SUITES.iter().position(|s| *s == o.suite));
        Ok(offered)
    }

    /// `apt-get download SPECS` into `into`.
    fn download(&self, specs: &[String], into: &Path) -> Result<()> {
        let out = self
            .command("apt-get")
            .args(["-q", "download"])
            .args(specs)
            .current_dir(into)
            .output()
            .context("cannot run apt-get download")?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            anyhow::bail!(
                "apt-get download {}: {}",
                specs.join(" "),
                err.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("failed")
            );
        }
        Ok(())
    }
}

/// What an `apt-get update` transcript says went wrong: an `Err:` line with the reason apt
/// prints under it ("Could not connect to ..."), or an `E:` line; None when nothing did.
fn update_failure(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("Err:") || l.starts_with("E:"))?;
    let mut why = lines[at].trim().to_string();
    if let Some(next) = lines.get(at + 1).filter(|l| l.starts_with(' ')) {
        why.push_str(": ");
        why.push_str(next.trim());
    }
    Some(why)
}

/// `apt-cache madison` lines: "libzookeeper-java | 3.9.6-2 | http://... sid/main amd64 Packages".
fn parse_madison(text: &str) -> Vec<Offered> {
    text.lines()
        .filter_map(|line| {
            let cols: Vec<&str> = line.split('|').map(str::trim).collect();
            let [_, debian, source] = cols[..] else {
                return None;
            };
            if !source.ends_with("Packages") {
                return None;
            }
            let suite = source.split_whitespace().nth(1)?.split('/').next()?;
            Some(Offered {
                version: upstream_of(debian),
                debian: debian.to_string(),
                suite: suite.to_string(),
            })
        })
        .collect()
}

/// A folder removed when dropped (the build's scratch: downloads, the unpacked tree, and the
/// folder being assembled until it is moved into place).
struct Scratch(PathBuf);

impl Scratch {
    fn new(dir: PathBuf) -> Result<Scratch> {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Takes an exclusive lock on `path` (flock, waiting for it), released when the value is
/// dropped: two runs never build the same release or share apt's state at once.
fn take_turn(path: &Path) -> Result<Flock<std::fs::File>> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .with_context(|| format!("cannot lock {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_from_debian_and_zookeeper_strings() {
        assert_eq!(upstream_of("3.8.0-11+deb12u2"), "3.8.0");
        assert_eq!(upstream_of("1:3.9.6-2"), "3.9.6");
        assert_eq!(upstream_of("3.9.6-${mvngit.commit.id}"), "3.9.6");
        assert_eq!(
            parse_version_info("Apache ZooKeeper, version 3.9.3 2026-03-08 16:19 UTC\n"),
            Some("3.9.3".into())
        );
        assert_eq!(parse_version_info("Error: could not find main class"), None);
        let madison = "libzookeeper-java | 3.8.0-11+deb12u2 | http://deb.debian.org/debian bookworm/main amd64 Packages\n\
                       libzookeeper-java | 3.9.6-2 | http://deb.debian.org/debian sid/main amd64 Packages\n\
                       zookeeper | 3.9.6-2 | http://deb.debian.org/debian sid/main Sources\n";
        let o = parse_madison(madison);
        assert_eq!(o.len(), 2);
        assert_eq!(
            o[1],
            Offered {
                version: "3.9.6".into(),
                debian: "3.9.6-2".into(),
                suite: "sid".into()
            }
        );
    }

    #[test]
    fn an_update_failure_names_the_suite_and_the_reason() {
        let text = "Ign:1 http://127.0.0.1:9/debian bookworm InRelease\n\
                    Err:1 http://127.0.0.1:9/debian bookworm InRelease\n  Could not connect to 127.0.0.1:9 (127.0.0.1). - connect (111: Connection refused)\n\
                    Reading package lists...\n";
        let why = update_failure(text).unwrap();
        assert!(
            why.starts_with(
                "Err:1 http://127.0.0.1:9/debian bookworm InRelease: Could not connect"
            ),
            "{why}"
        );
        assert_eq!(update_failure("Hit:1 http://x bookworm InRelease\n"), None);
    }

    #[test]
    fn a_version_that_is_not_three_numbers_is_refused_before_the_archive_is_asked() {
        for bad in ["3.9", "latest", "3.9.x", "3.9.6.1", ""] {
            let e = check_version_word(bad).unwrap_err();
            assert_eq!(crate::exit::code_for(&e), 254, "{bad}");
            assert!(format!("{e:#}").contains("list"), "{e:#}");
        }
        assert!(check_version_word("3.9.6").is_ok());
    }

    #[test]
    fn jar_links_resolve_inside_the_unpacked_tree() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("zookeeper-3.9.6.jar"), "x").unwrap();
        std::os::unix::fs::symlink("zookeeper-3.9.6.jar", d.join("zookeeper.jar")).unwrap();
        std::os::unix::fs::symlink("/usr/share/java/zookeeper-3.9.6.jar", d.join("z2.jar"))
            .unwrap();
        std::os::unix::fs::symlink("/usr/share/java/elsewhere.jar", d.join("gone.jar")).unwrap();
        let file = d.join("zookeeper-3.9.6.jar");
        assert_eq!(
            resolve_inside(d, &d.join("zookeeper.jar")),
            Some(file.clone())
        );
        assert_eq!(resolve_inside(d, &d.join("z2.jar")), Some(file));
        assert_eq!(resolve_inside(d, &d.join("gone.jar")), None);
    }
}
