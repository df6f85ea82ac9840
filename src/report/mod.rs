//! Reports: HTML page, plots, JUnit XML, run index, serve.

pub mod cli;
