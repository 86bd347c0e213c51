//! `memctl show RUN`: everything recorded for a run, as YAML (or the full JSON record).

use crate::cli::context::Context;
use crate::report::show;
use crate::store::Store;

/// Show everything recorded for a run: status, configuration, metrics, a summary of each curve
/// (first, last and best point), timing, environment, and the spec text.
#[derive(clap::Args)]
pub struct Args {
    /// Run id (as in `memctl runs`).
    run: u64,
    /// yaml (readable) or json (the stored record, curves included).
    #[arg(long, default_value = "yaml")]
    format: Format,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Yaml,
    Json,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let store = Store::open_existing(&ctx.store)?;
    let record = crate::store::as_seen(store.get(args.run)?);
    match args.format {
        Format::Yaml => print!("{}", show::yaml(&record)?),
        Format::Json => println!("{}", serde_json::to_string_pretty(&record)?),
    }
    Ok(0)
}
