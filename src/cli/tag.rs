//! `memctl tag RUN TAG [--remove]`: label a run (`memctl runs --where '"TAG" in tags'`).

use crate::cli::context::Context;
use crate::store::{Store, tag_text};

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
    let tag = match tag_text::checked(&args.tag) {
        Ok(tag) => tag,
        // A tag with a separator, as an older memctl let in, can still be removed.
        Err(tag_text::BadTag::Separator(_)) if args.remove => args.tag.trim(),
        Err(e) => return Err(e.into()),
    };
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
