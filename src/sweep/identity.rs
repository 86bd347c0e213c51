//! Trial identity: a stable hash of everything that determines a trial's result.
//!
//! Hashed: the compatibility level, the elaborated step graph's fingerprint (wiring, shapes,
//! parameters — not comments or spacing), the model's parameter values, the task and its
//! options, the training settings (except those that change how a trial runs, not what it
//! computes: the device and checkpointing), and the seed. Same identity ⇒ same
//! data and initial weights; a sweep skips trials whose identity is already `done`.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::check::Trial;
use crate::value::Value;

/// Bumped when a memctl change makes earlier results incomparable (so they re-run).
pub const COMPAT_LEVEL: u32 = 1;

pub fn trial_key(trial: &Trial) -> String {
    let mut train = serde_json::to_value(&trial.config.train).unwrap_or_default();
    if let Some(settings) = train.as_object_mut() {
        for name in crate::train_config::NOT_IN_IDENTITY.iter().filter(|n| **n != "device") {
            settings.remove(*name);
        }
        // Earlier identities hashed the device as "" (kept, so that they stay the same).
        settings.insert("device".into(), "".into());
    }
    let canonical = serde_json::json!({
        "compat": COMPAT_LEVEL,
        "graph": trial.graph.fingerprint(),
        "model": trial.config.model,
        "params": trial.config.params,
        "task": trial.config.task,
        "task_options": options_in_identity(&trial.config.task, &trial.config.task_options),
        "train": train,
        "seed": trial.config.seed,
    });
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Task options added after runs of their task were recorded, with their defaults. At its
/// default, such an option stays out of the identity, so the runs recorded before it existed
/// remain their trials' (sweeps skip them, tables show them); set to anything else, it counts
/// as every option does. A new option of an existing task gets a line here.
const ADDED_OPTIONS: &[(&str, &str, &str)] = &[("convexHull", "labels", "random"), ("tsp", "labels", "random")];

/// The task options that the identity hashes: all but the added ones at their defaults.
fn options_in_identity<'a>(task: &str, options: &'a BTreeMap<String, Value>) -> BTreeMap<&'a str, &'a Value> {
    let added_at_default = |name: &str, value: &Value| {
        ADDED_OPTIONS.iter().any(|&(t, o, default)| t == task && o == name && value.as_str() == Some(default))
    };
    options.iter().filter(|(name, value)| !added_at_default(name, value)).map(|(n, v)| (n.as_str(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn an_added_option_at_its_default_leaves_the_identity_as_before_it_existed() {
        let before = options(&[("points", Value::Int(10))]);
        let default = options(&[("points", Value::Int(10)), ("labels", Value::Str("random".into()))]);
        let code = options(&[("points", Value::Int(10)), ("labels", Value::Str("code".into()))]);
        let hashed = |task, o| serde_json::to_string(&options_in_identity(task, o)).unwrap();
        assert_eq!(hashed("tsp", &default), hashed("tsp", &before));
        assert_ne!(hashed("tsp", &code), hashed("tsp", &before), "set otherwise, it counts");
        assert_ne!(hashed("copy", &default), hashed("copy", &before), "only the task that gained the option is exempt");
    }
}
