//! Real clock skew on throwaway VMs (`fle-chaos test --ssh --real-clock-skew`): steps a host's
//! system clock (CLOCK_REALTIME) with clock_settime, as Jepsen's clock nemesis does, instead of
//! moving one process's clock with libfaketime.
//!
//! The offset the tool has applied lives in a state file on the host itself, written right
//! after each step, so that undo, teardown and `fle-chaos clean` step the clock back by exactly
//! that much, also after the controller died. `fle-node clock-offset` runs this on the host
//! (the uploaded fle-node binary is already there).

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;

/// The state file, in the node's folder on its host: the applied offset in ms.
pub const STATE: &str = "clock-offset";

/// What one `set_offset` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    /// The offset in force before, in ms.
    pub before_ms: i64,
    /// The clock was stepped by this much.
    pub step_ms: i64,
}

/// Reads the applied offset; a missing file means none.
pub fn read_state(state: &Path) -> Result<i64> {
    let text = match std::fs::read_to_string(state) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", state.display())),
    };
    parse_state(&text).with_context(|| format!("{}", state.display()))
}

/// The state file's text: one integer, the offset in ms.
pub fn parse_state(text: &str) -> Result<i64> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(0);
    }
    t.parse::<i64>().map_err(|_| {
        anyhow::anyhow!(
            "holds {t:?}, not an offset in milliseconds; step the clock back by hand \
             (date -s) and delete the file"
        )
    })
}

/// Steps the clock so that it is `target_ms` away from where it would be without the tool,
/// and records the new offset in `state` (fsync'd).
pub fn set_offset(state: &Path, target_ms: i64) -> Result<Applied> {
    let before_ms = read_state(state)?;
    let step_ms = target_ms - before_ms;
    if step_ms != 0 {
        step_clock(step_ms)?;
    }
    if let Err(e) = write_state(state, target_ms) {
        // Without the record nobody could undo the step: take it back now.
        let undone = step_ms == 0 || step_clock(-step_ms).is_ok();
        bail!(
            "cannot record the clock offset in {}: {e:#}; the step was {}",
            state.display(),
            if undone { "undone" } else { "NOT undone" }
        );
    }
    Ok(Applied { before_ms, step_ms })
}

fn write_state(state: &Path, offset_ms: i64) -> Result<()> {
    let tmp = state.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    writeln!(f, "{offset_ms}")?;
    f.sync_all()?;
    std::fs::rename(&tmp, state)?;
    Ok(())
}

/// Moves CLOCK_REALTIME by `step_ms` (read and set back to back, so only the microseconds
/// between the two calls are lost).
fn step_clock(step_ms: i64) -> Result<()> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) } != 0 {
        bail!("clock_gettime: {}", std::io::Error::last_os_error());
    }
    let ns = now.tv_sec as i128 * 1_000_000_000 + now.tv_nsec as i128 + step_ms as i128 * 1_000_000;
    let new = libc::timespec {
        tv_sec: ns.div_euclid(1_000_000_000) as libc::time_t,
        tv_nsec: ns.rem_euclid(1_000_000_000) as libc::c_long,
    };
    // SAFETY: `new` is a valid timespec with 0 <= tv_nsec < 1e9.
    if unsafe { libc::clock_settime(libc::CLOCK_REALTIME, &new) } != 0 {
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
    fn state_is_one_integer_and_missing_means_zero() {
        assert_eq!(parse_state("60000\n").unwrap(), 60_000);
        assert_eq!(parse_state("-250").unwrap(), -250);
        assert_eq!(parse_state("").unwrap(), 0);
        let err = parse_state("+1.5 x2").unwrap_err().to_string();
        assert!(err.contains("not an offset"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_state(&dir.path().join(STATE)).unwrap(), 0);
    }

    #[test]
    fn an_offset_already_in_force_steps_nothing() {
        // A zero step never calls clock_settime, so this is safe on any machine.
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join(STATE);
        std::fs::write(&state, "1500\n").unwrap();
        let applied = set_offset(&state, 1500).unwrap();
        assert_eq!(
            applied,
            Applied {
                before_ms: 1500,
                step_ms: 0
            }
        );
        assert_eq!(read_state(&state).unwrap(), 1500);
    }
}
