//! Exit codes, as Jepsen's: nightly jobs read these.

pub const VALID: i32 = 0;
pub const INVALID: i32 = 1;
pub const UNKNOWN: i32 = 2;
/// Bad command line, configuration or input file.
pub const BAD_ARGS: i32 = 254;
/// The tool itself failed.
pub const CRASHED: i32 = 255;

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
