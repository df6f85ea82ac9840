//! The commands that drive the pipeline's stages (control, nemesis, workload, history,
//! checker, report), each over the ones before it: `run` (one test end to end), `sim` (the
//! deterministic simulator), `shrink` (a failing run's smallest failing schedule), `sweep`
//! (many runs from a matrix) and `prune` (retention for a reports folder).

pub mod prune;
pub mod run;
pub mod shrink;
pub mod sim;
pub mod sweep;
