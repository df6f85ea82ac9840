//! `fle-chaos report RUN_DIR` and `fle-chaos serve`.

use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {}

pub async fn report(_args: ReportArgs) -> anyhow::Result<i32> {
    anyhow::bail!("not yet implemented")
}

pub async fn serve(_args: ServeArgs) -> anyhow::Result<i32> {
    anyhow::bail!("not yet implemented")
}
