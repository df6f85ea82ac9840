//! The report: rendering, `fle-chaos report` and `serve` as processes, and a real browser opening
//! it.
mod browser;
mod cli;
mod render;
