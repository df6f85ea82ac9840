//! Skipped tests, made visible. A test that cannot run on this machine (not root, a package
//! that could not be installed) returns early and passes, and libtest hides what a passing test
//! printed with `eprintln!`: a skipped test read `ok`. [`skip`] writes its line straight to
//! stderr (libtest captures only the print macros) and adds it to one list for the whole
//! `cargo test`, and every test binary that holds this module prints that list as it exits, so
//! the suite's output ends with every test skipped so far, or `skipped tests: none`.
//!
//! Shared by the controller's and the node's test binaries and the controller's unit tests
//! (`#[path]`), so there is one list and one way to skip.

use std::io::Write;
use std::path::PathBuf;

/// Says that `test` is skipped here and why (the caller then returns): on stderr at once, and
/// in the list printed when the test binaries exit.
pub fn skip(test: &str, why: &str) {
    let line = format!("SKIPPED {test}: {why}");
    let _ = writeln!(std::io::stderr(), "{line}");
    if let Some(path) = list_path() {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        if let Ok(mut f) = file {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// The list of this `cargo test`: `FLC_SKIPPED_LIST` when set (`.ci/run` sets it), else a file
/// named after the process that started the test binaries (cargo) and its start time, so that
/// the binaries of one `cargo test` share it and no other run's list is read.
fn list_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FLC_SKIPPED_LIST") {
        return Some(PathBuf::from(p));
    }
    let parent = std::os::unix::process::parent_id();
    let stat = std::fs::read_to_string(format!("/proc/{parent}/stat")).ok()?;
    // Field 22, after the parenthesised command name (which may hold spaces).
    let started = stat.rsplit(')').next()?.split_whitespace().nth(19)?;
    Some(std::env::temp_dir().join(format!("flc-skipped-{parent}-{started}.txt")))
}

/// Prints the list (as this binary exits): how many tests of this `cargo test` were skipped so
/// far, and each with its reason. Not under `cargo bench`, whose binaries borrow test support.
extern "C" fn print_list() {
    if std::env::args().any(|a| a == "--bench") {
        return;
    }
    let lines = list_path()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let mut lines: Vec<&str> = lines.lines().filter(|l| !l.is_empty()).collect();
    lines.sort();
    lines.dedup();
    let mut err = std::io::stderr().lock();
    if lines.is_empty() {
        let _ = writeln!(err, "skipped tests (this cargo test, so far): none");
        return;
    }
    let _ = writeln!(
        err,
        "skipped tests (this cargo test, so far): {}",
        lines.len()
    );
    for l in lines {
        let _ = writeln!(err, "  {l}");
    }
}

extern "C" fn print_list_at_exit() {
    // SAFETY: atexit only records the function; print_list touches no state being torn down
    // that it does not own (it opens its own file and locks stderr).
    unsafe {
        libc::atexit(print_list);
    }
}

/// Registers `print_list` when the binary starts (a constructor: the test harness owns `main`).
#[used]
#[link_section = ".init_array"]
static REGISTER_AT_START: extern "C" fn() = print_list_at_exit;
