//! `fle-chaos clean`: remove what crashed runs left behind.

use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct CleanArgs {}

pub async fn clean(_args: CleanArgs) -> anyhow::Result<i32> {
    anyhow::bail!("not yet implemented")
}
