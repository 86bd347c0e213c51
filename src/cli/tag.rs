//! `memctl tag RUN TAG [--remove]`: label a run (`memctl runs --where '"TAG" in tags'`).

use crate::cli::context::Context;
use crate::store::Store;

/// Add a tag to a run, or remove it with --remove.
#[derive(clap::Args)]
pub struct Args {
    run: u64,
    tag: String,
    /// Remove the tag instead.
    #[arg(long)]
    remove: bool,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let tag = args.tag.trim();
    if tag.is_empty() || tag.contains(['\n', '\t']) {
        anyhow::bail!("a tag is a non-empty word or phrase on one line");
    }
    // Tags are listed joined by commas (`runs`, `show`) and by semicolons (CSV): `a,b` would
    // read as two tags.
    if tag.contains([',', ';']) && !args.remove {
        anyhow::bail!(
            "a tag holds no comma or semicolon (`{tag}` would read as several tags); tag the run once per tag"
        );
    }
    let store = Store::open_existing(&ctx.store)?;
    let changed = store.tag(args.run, tag, !args.remove)?;
    let tags = store.summary(args.run)?.tags;
    match (changed, args.remove) {
        (true, false) => eprintln!("run {} tagged `{tag}`", args.run),
        (true, true) => eprintln!("run {}: removed tag `{tag}`", args.run),
        (false, false) => eprintln!("run {} already has tag `{tag}`", args.run),
        (false, true) => eprintln!("run {} has no tag `{tag}`", args.run),
    }
    eprintln!("tags: {}", if tags.is_empty() { "none".to_string() } else { tags.join(", ") });
    Ok(0)
}
