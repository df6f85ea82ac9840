//! `fle-chaos test` end to end: bad input, cleanup on every exit path, concurrent runs, variants
//! and verdicts.
mod bad_input;
mod cleanup;
mod concurrent;
mod register;
mod replay;
mod three_nodes;
mod variants;
mod verdicts;
