//! One test run end to end (Jepsen's `core/run!`): setup, observe, workload, nemesis, final
//! heal, teardown, check, report.

use clap::Args;

/// `fle-chaos test` options.
#[derive(Args, Debug, Clone)]
pub struct TestArgs {}

pub async fn test(_args: TestArgs) -> anyhow::Result<i32> {
    anyhow::bail!("not yet implemented")
}
