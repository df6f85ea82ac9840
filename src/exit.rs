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

/// The worse of two exit codes, for commands that run several tests (`--test-count`, `sweep`,
/// `merge`): 255 (the tool failed) > 254 (bad input) > 1 (invalid) > 2 (unknown) > 0 (valid).
/// An interruption (129/130/143) outranks them all: the command was stopped, whatever the runs
/// said. Any other code is treated as the tool failing. On a tie the first is kept.
pub fn worse(a: i32, b: i32) -> i32 {
    let rank = |c: i32| match c {
        VALID => 0,
        UNKNOWN => 1,
        INVALID => 2,
        BAD_ARGS => 3,
        c if is_interrupted(c) => 5,
        _ => 4,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worse_orders_codes_as_the_contract_says() {
        // From least to most bad; each beats every code before it, from either side.
        let order = [VALID, UNKNOWN, INVALID, BAD_ARGS, CRASHED, SIGINT];
        for (i, &a) in order.iter().enumerate() {
            for &b in &order[..i] {
                assert_eq!(worse(a, b), a, "{a} vs {b}");
                assert_eq!(worse(b, a), a, "{b} vs {a}");
            }
        }
        assert_eq!(worse(VALID, VALID), VALID);
        // An unexpected code counts as the tool failing; the first of a tie is kept.
        assert_eq!(worse(INVALID, 3), 3);
        assert_eq!(worse(CRASHED, 3), CRASHED);
        assert_eq!(worse(SIGTERM, SIGINT), SIGTERM);
    }
}
