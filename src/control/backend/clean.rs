//! `fle-chaos clean`: remove what crashed runs left behind.
//!
//! It reads the registry directory (every run lists its resources there before creating
//! them), skips runs whose controller is still alive (another run in progress, perhaps someone
//! else's), and removes exactly what the others recorded. Nothing unrecorded is ever touched.

use crate::control::backend::registry::{is_same_process, read_resources, registry_dir, Resource};
use crate::control::backend::teardown::remove_all;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct CleanArgs {
    /// Only list what would be removed.
    #[arg(long)]
    pub dry_run: bool,
    /// The registry directory to read [default: /run/fle-chaos as root, else /tmp/fle-chaos-UID;
    /// env FLE_CHAOS_REGISTRY overrides].
    #[arg(long, value_name = "DIR")]
    pub registry: Option<PathBuf>,
}

pub async fn clean(args: CleanArgs) -> anyhow::Result<i32> {
    let dir = args.registry.clone().unwrap_or_else(registry_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!("nothing to clean ({} does not exist)", dir.display());
            return Ok(crate::exit::VALID);
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("cannot read {}", dir.display())))
        }
    };
    let mut failed = false;
    let mut cleaned = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let resources = match read_resources(&path) {
            Ok(r) => r,
            // Its run finished its own teardown between the listing and now: nothing to do.
            Err(_) if !path.exists() => continue,
            Err(e) => return Err(e),
        };
        let run = path.file_stem().unwrap_or_default().to_string_lossy();
        let controller = resources.iter().find_map(|r| match r {
            Resource::Controller {
                pid,
                start_time,
                run_dir,
            } => Some((*pid, *start_time, run_dir.clone())),
            _ => None,
        });
        if let Some((pid, start, run_dir)) = &controller {
            if is_same_process(*pid, *start) {
                println!(
                    "run {run} ({}): controller {pid} still running, left alone",
                    run_dir.display()
                );
                continue;
            }
        }
        let where_ = controller
            .map(|c| c.2.display().to_string())
            .unwrap_or_default();
        if args.dry_run {
            println!("run {run} ({where_}) would be cleaned:");
            for r in &resources {
                if !matches!(r, Resource::Controller { .. }) {
                    println!("  {}", serde_json::to_string(r)?);
                }
            }
            continue;
        }
        let report = tokio::task::spawn_blocking(move || remove_all(&resources)).await?;
        println!("run {run} ({where_}):");
        for line in &report.removed {
            println!("  removed {line}");
        }
        for line in &report.errors {
            println!("  error: {line}");
        }
        if report.errors.is_empty() {
            let _ = std::fs::remove_file(&path);
            cleaned += 1;
        } else {
            failed = true;
        }
    }
    if cleaned == 0 && !failed && !args.dry_run {
        println!("nothing to clean");
    }
    Ok(if failed {
        crate::exit::CRASHED
    } else {
        crate::exit::VALID
    })
}
