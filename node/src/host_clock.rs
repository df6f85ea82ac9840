//! Real clock skew on throwaway VMs (`fle-chaos test --ssh --real-clock-skew`): steps a host's
//! system clock (CLOCK_REALTIME) with clock_settime, as Jepsen's clock nemesis does, instead of
//! moving one process's clock with libfaketime. `fle-node clock-offset` runs this on the host
//! (the uploaded fle-node binary is already there).
//!
//! The clock is set *absolutely*, against CLOCK_BOOTTIME, which nothing steps: before the first
//! step the state file (in the node folder) records `base = REALTIME - BOOTTIME`, fsync'd, and
//! every setting is `REALTIME := BOOTTIME + base + offset`. So undo, teardown and `fle-chaos
//! clean` put the clock back exactly, also after a crash between recording and stepping, and
//! also when a time daemon stepped the clock meanwhile.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;

/// The state file, in the node's folder on its host: "OFFSET_MS BASE_NS".
pub const STATE: &str = "clock-offset";

/// What the state file records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// The offset in force, in ms.
    pub offset_ms: i64,
    /// REALTIME - BOOTTIME before the tool moved the clock, in ns.
    pub base_ns: i128,
}

/// What one `set_offset` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    /// The offset in force before, in ms.
    pub before_ms: i64,
    /// How far the clock moved, in ms.
    pub step_ms: i64,
}

/// Reads the state; a missing file means the tool never moved this clock.
pub fn read_state(state: &Path) -> Result<Option<State>> {
    match std::fs::read_to_string(state) {
        Ok(t) => parse_state(&t).with_context(|| format!("{}", state.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", state.display())),
    }
}

/// The state file's text: "OFFSET_MS BASE_NS" (empty: none).
pub fn parse_state(text: &str) -> Result<Option<State>> {
    let words: Vec<&str> = text.split_whitespace().collect();
    match words.as_slice() {
        [] => Ok(None),
        [offset, base] => match (offset.parse(), base.parse()) {
            (Ok(offset_ms), Ok(base_ns)) => Ok(Some(State { offset_ms, base_ns })),
            _ => bad_state(text),
        },
        _ => bad_state(text),
    }
}

fn bad_state(text: &str) -> Result<Option<State>> {
    bail!(
        "holds {:?}, not \"OFFSET_MS BASE_NS\"; step the clock back by hand (date -s) and \
         delete the file",
        text.trim()
    )
}

/// The offset in force according to a state file's text (0 when none).
pub fn offset_ms(text: &str) -> Result<i64> {
    Ok(parse_state(text)?.map_or(0, |s| s.offset_ms))
}

/// Sets the clock `target_ms` away from where it would be without the tool, recording the
/// state first (fsync'd). An offset already in force is left alone: no clock call at all.
pub fn set_offset(state: &Path, target_ms: i64) -> Result<Applied> {
    let _lock = lock(state)?;
    let before = read_state(state)?;
    let before_ms = before.map_or(0, |s| s.offset_ms);
    if target_ms == before_ms {
        return Ok(Applied {
            before_ms,
            step_ms: 0,
        });
    }
    let (real, boot) = now_ns()?;
    let base_ns = before.map_or(real - boot, |s| s.base_ns);
    write_state(
        state,
        State {
            offset_ms: target_ms,
            base_ns,
        },
    )?;
    let new = boot + base_ns + target_ms as i128 * 1_000_000;
    if let Err(e) = set_realtime(new) {
        // Nothing moved: the record must say so again.
        let restored = match before {
            Some(b) => write_state(state, b),
            None => std::fs::remove_file(state).map_err(Into::into),
        };
        return Err(match restored {
            Ok(()) => e,
            Err(r) => e.context(format!(
                "and {} could not be restored: {r:#}",
                state.display()
            )),
        });
    }
    Ok(Applied {
        before_ms,
        step_ms: ((new - real) / 1_000_000) as i64,
    })
}

/// Serializes `clock-offset` runs on one state file (flock on a file beside it; released when
/// the returned lock is dropped).
fn lock(state: &Path) -> Result<nix::fcntl::Flock<std::fs::File>> {
    let path = state.with_extension("lock");
    let f = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| anyhow::anyhow!("cannot lock {}: {e}", path.display()))
}

fn write_state(state: &Path, s: State) -> Result<()> {
    let tmp = state.with_extension("tmp");
    let mut f =
        std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    writeln!(f, "{} {}", s.offset_ms, s.base_ns)?;
    f.sync_all()?;
    std::fs::rename(&tmp, state).with_context(|| format!("cannot write {}", state.display()))?;
    // The rename itself must survive a crash too.
    if let Some(dir) = state.parent() {
        std::fs::File::open(dir).and_then(|d| d.sync_all())?;
    }
    Ok(())
}

fn read_clock(clock: libc::clockid_t) -> Result<i128> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(clock, &mut t) } != 0 {
        bail!("clock_gettime: {}", std::io::Error::last_os_error());
    }
    Ok(t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128)
}

/// (REALTIME, BOOTTIME) read back to back, in ns.
fn now_ns() -> Result<(i128, i128)> {
    Ok((
        read_clock(libc::CLOCK_REALTIME)?,
        read_clock(libc::CLOCK_BOOTTIME)?,
    ))
}

fn set_realtime(ns: i128) -> Result<()> {
    let t = libc::timespec {
        tv_sec: ns.div_euclid(1_000_000_000) as libc::time_t,
        tv_nsec: ns.rem_euclid(1_000_000_000) as libc::c_long,
    };
    // SAFETY: `t` is a valid timespec with 0 <= tv_nsec < 1e9.
    if unsafe { libc::clock_settime(libc::CLOCK_REALTIME, &t) } != 0 {
        let e = std::io::Error::last_os_error();
        bail!(
            "clock_settime: {e}{}",
            if e.raw_os_error() == Some(libc::EPERM) {
                " (setting the system clock needs root, CAP_SYS_TIME)"
            } else {
                ""
            }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_is_offset_and_base_and_missing_means_none() {
        assert_eq!(
            parse_state("60000 -1234567890123\n").unwrap(),
            Some(State {
                offset_ms: 60_000,
                base_ns: -1_234_567_890_123
            })
        );
        assert_eq!(parse_state("").unwrap(), None);
        assert_eq!(offset_ms("-250 17").unwrap(), -250);
        assert_eq!(offset_ms("").unwrap(), 0);
        for bad in ["+1.5 x2", "60000", "1 2 3"] {
            let err = parse_state(bad).unwrap_err().to_string();
            assert!(err.contains("OFFSET_MS BASE_NS"), "{bad}: {err}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_state(&dir.path().join(STATE)).unwrap(), None);
    }

    #[test]
    fn an_offset_already_in_force_touches_no_clock() {
        // A no-op never calls clock_settime, so this is safe on any machine.
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join(STATE);
        std::fs::write(&state, "1500 42\n").unwrap();
        let applied = set_offset(&state, 1500).unwrap();
        assert_eq!(
            applied,
            Applied {
                before_ms: 1500,
                step_ms: 0
            }
        );
        assert_eq!(std::fs::read_to_string(&state).unwrap(), "1500 42\n");
        // No record and no offset asked for: nothing to do either.
        let fresh = dir.path().join("fresh");
        assert_eq!(set_offset(&fresh, 0).unwrap().step_ms, 0);
        assert!(!fresh.exists());
    }
}
