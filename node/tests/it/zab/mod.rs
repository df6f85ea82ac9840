//! Zab for real: its shells in one process over loopback TCP (`cluster`), peers SIGKILLed
//! mid-write as child processes (`kill`), and inside real `fle-node` processes (`process`).

mod cluster;
mod kill;
mod process;
