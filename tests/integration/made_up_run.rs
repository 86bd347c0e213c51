//! A finished run record with plausible values and no curves or metrics, for the stores that
//! tests (`synthetic`) and the store benchmarks (`benches/support/synthetic_runs.rs`, which
//! includes this file) make up. Callers override what they vary with `..made_up_run(…)`.

use memctl::check::TrialConfig;
use memctl::store::{Environment, RunRecord, Status, StoredConfig};

pub fn made_up_run(id: u64, config: &TrialConfig, spec_path: &str, spec_text: &str) -> RunRecord {
    let started_at = 1_738_281_600.0 + id as f64 * 3600.0;
    RunRecord {
        record_version: memctl::store::record::RECORD_VERSION,
        id,
        trial_key: format!("trial{id}"),
        status: Status::Done,
        config: StoredConfig::of(config),
        spec_path: spec_path.into(),
        spec_text: spec_text.into(),
        spec_hash: "h".into(),
        environment: Environment {
            hostname: "test".into(),
            cpus: 1,
            threads: 1,
            device: "cpu".into(),
            ..Default::default()
        },
        started_at,
        ended_at: Some(started_at + 60.0),
        curves: Default::default(),
        final_metrics: Default::default(),
        steps_run: 30,
        steps_to_converge: None,
        epochs_to_converge: None,
        stop_reason: "steps".into(),
        param_count: 100,
        flops_per_step: 1000,
        wall_seconds: 60.0,
        train_seconds: 50.0,
        eval_seconds: 10.0,
        error: None,
        tags: vec![],
        progress: None,
        pruned: None,
    }
}
