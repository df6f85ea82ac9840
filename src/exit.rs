//! Exit codes, as Jepsen's: nightly jobs read these. A run ended by a signal exits as shells
//! report a process killed by it (128 + the signal's number), so a job can tell "interrupted"
//! from an `unknown` verdict.

pub const VALID: i32 = 0;
pub const INVALID: i32 = 1;
pub const UNKNOWN: i32 = 2;
/// Bad command line, configuration or input file.
pub const BAD_ARGS: i32 = 254;
/// The tool itself failed (or could not go on: a history it cannot write, a node that died
/// while the cluster was starting).
pub const CRASHED: i32 = 255;
/// Interrupted by SIGHUP (128 + 1).
pub const SIGHUP: i32 = 129;
/// Interrupted by SIGINT, Ctrl-C (128 + 2).
pub const SIGINT: i32 = 130;
/// Interrupted by SIGTERM (128 + 15).
pub const SIGTERM: i32 = 143;

/// True for the codes of a run ended by a signal.
pub fn is_interrupted(code: i32) -> bool {
    matches!(code, SIGHUP | SIGINT | SIGTERM)
}

/// An error caused by the user's input (flags, TOML files, paths): exit 254, not 255.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Builds a `BadInput` error from a message.
pub fn bad_input(msg: impl Into<String>) -> anyhow::Error {
    BadInput(msg.into()).into()
}

/// The exit code for an error that ended a command: 254 for bad input, else 255.
pub fn code_for(err: &anyhow::Error) -> i32 {
    if err.chain().any(|e| e.is::<BadInput>()) {
        BAD_ARGS
    } else {
        CRASHED
    }
}
