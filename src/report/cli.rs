//! `fle-chaos report RUN_DIR` and `fle-chaos serve`.

use crate::exit::{self, bad_input};
use clap::Args;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// The run folder to re-render (reports/<test>/<time>/, or reports/latest).
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// TCP port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// The reports folder to serve (`--out` of `test` and `sweep`).
    #[arg(long, alias = "dir", default_value = "reports", value_name = "DIR")]
    pub out: PathBuf,
    /// Address to listen on; 0.0.0.0 shares the reports with the network.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub bind: IpAddr,
}

/// Re-renders a run's report; exit 0 when written (the run's verdict is `test`'s exit code).
pub async fn report(args: ReportArgs) -> anyhow::Result<i32> {
    let dir = args.run_dir.clone();
    let started = std::time::Instant::now();
    let rendered = tokio::task::spawn_blocking(move || super::render_run(&dir)).await??;
    println!(
        "report: {} ({} plots, junit {}) in {}",
        rendered.report.display(),
        rendered.plots.len(),
        rendered.junit.display(),
        crate::duration::span(started.elapsed().as_secs_f64())
    );
    if let Some(index) = rendered.index {
        println!("index:  {}", index.display());
    }
    Ok(exit::VALID)
}

/// Serves the reports folder until interrupted.
pub async fn serve(args: ServeArgs) -> anyhow::Result<i32> {
    if !args.out.is_dir() {
        return Err(bad_input(format!(
            "--dir {}: no such folder; give the reports folder runs were written to \
             (default: reports)",
            args.out.display()
        )));
    }
    let dir = args.out.clone();
    super::serve::serve_dir(
        args.out,
        SocketAddr::new(args.bind, args.port),
        move |addr| {
            // Scripts (and the tests) read this line to learn the port.
            println!("serving {} at http://{addr}/", dir.display());
        },
    )
    .await?;
    Ok(exit::VALID)
}
