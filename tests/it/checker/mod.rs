//! `fle-chaos check` and the checkers: fixture runs, the history parser, sampling without false
//! alarms, a seeded bug caught in a real cluster.
mod cli;
mod fixtures;
mod observers;
mod parse;
mod sampling;
mod seeded_bug;
