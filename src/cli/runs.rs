//! `memctl runs`: past runs as a table, newest first.

use crate::cli::Context;
use crate::report::runs_table;
use crate::store::Store;

/// Show past runs, newest first.
#[derive(clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(long, default_value = "table")]
    format: Format,
    /// Show at most this many runs.
    #[arg(long)]
    limit: Option<usize>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Table,
    Json,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let store = Store::open(&ctx.store)?;
    let mut runs = store.all()?;
    runs.reverse();
    if let Some(n) = args.limit {
        runs.truncate(n);
    }
    match args.format {
        Format::Table => {
            if runs.is_empty() {
                println!("no runs in {} yet; start with `memctl sweep specs/quickstart.mem`", ctx.store.display());
            } else {
                println!("{}", runs_table::table(&runs));
            }
        }
        Format::Json => println!("{}", serde_json::to_string_pretty(&runs)?),
    }
    Ok(0)
}
