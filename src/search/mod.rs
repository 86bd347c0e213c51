//! Searching a space of configurations: which configuration to try next (a [`sampler`]) and
//! whether a running trial should stop early (a [`pruner`]), both from a study's state in the
//! store ([`crate::store::study`]) and the results of its finished runs. Pure decisions: the
//! sweep runs the trials and records what is decided here.

pub mod outcome;
pub mod pruner;
pub mod sampler;
pub mod summary;

use sha2::{Digest, Sha256};

use crate::check::SearchPlan;
use crate::check::search::{Domain, PruneRule, Sampler};
use crate::store::StoredConfig;

/// A study's identity: the experiment with its searched names and seed left out, and the
/// search itself (its domains, seeds, sampler and pruner; not `trials`, so that asking for more
/// configurations continues the study). Layout and comments do not change it.
pub fn study_key(plan: &SearchPlan) -> String {
    let spec = &plan.spec;
    let mut base = plan.representatives.first().map(|t| StoredConfig::of(&t.config));
    if let Some(b) = base.as_mut() {
        for d in &spec.dims {
            b.params.remove(&d.name.name);
            b.train.remove(&d.name.name);
            b.task_options.remove(&d.name.name);
        }
        b.train.remove("device");
        b.swept.clear();
        b.seed = 0;
    }
    let dims: Vec<String> = spec.dims.iter().map(|d| format!("{}:{}", d.name.name, domain_text(&d.domain))).collect();
    let sampler = match spec.sampler {
        Sampler::Grid { order: None } => "grid".to_string(),
        Sampler::Grid { order: Some(seed) } => format!("grid({seed})"),
        Sampler::Random { seed } => format!("random({seed})"),
        Sampler::Tpe { seed, startup } => format!("tpe({seed},{startup})"),
    };
    let prune = spec.prune.as_ref().map(|p| {
        let rule = match p.rule {
            PruneRule::Asha { keep } => format!("asha({keep})"),
            PruneRule::Median => "median".to_string(),
        };
        let every = p.every.map(|n| format!(",every {n}")).unwrap_or_default();
        format!("{rule},{},{},{},{},{:?}{every}", p.metric.name, p.min_steps, p.rungs, p.factor, p.patience)
    });
    let canonical = serde_json::json!({
        "base": base,
        "dims": dims,
        "seeds": spec.seeds,
        "sampler": sampler,
        "prune": prune,
        "metric": spec.metric.as_ref().map(|m| m.name.clone()),
    });
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

fn domain_text(d: &Domain) -> String {
    match d {
        Domain::Values(v) => v.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(","),
        Domain::Uniform { low, high } => format!("uniform({low},{high})"),
        Domain::LogUniform { low, high } => format!("loguniform({low},{high})"),
        Domain::IntUniform { low, high } => format!("randint({low},{high})"),
    }
}
