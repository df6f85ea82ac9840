//! `fle-chaos check RUN_DIR`.

use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {}

pub async fn check(_args: CheckArgs) -> anyhow::Result<i32> {
    anyhow::bail!("not yet implemented")
}
