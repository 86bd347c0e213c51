//! `memctl tasks NAME --sample`: one generated training sequence, step by step — what a model
//! of the task reads at each step and, at the scored steps, what it must answer.

use candle_core::{DType, Device, Tensor};

use crate::tasks::{Batch, TaskKind};

/// Prints one training sequence of `kind` with its default options, from data seed `seed`.
pub fn print(kind: &dyn TaskKind, seed: u64) -> anyhow::Result<()> {
    let defaults: Option<Vec<_>> = kind.signature().iter().map(|s| s.default.value()).collect();
    let Some(defaults) = defaults else {
        anyhow::bail!("`{}` reads its data from files: it has no sample without them", kind.name());
    };
    let task = kind.instantiate(&defaults).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut data = task.data(seed, &Device::Cpu)?;
    let batch = data.train_batch(1)?;
    let (inputs, targets) = (steps(&batch.inputs)?, steps(&batch.targets)?);
    println!(
        "{} with its default options, data seed {seed}: {} steps, {} scored (input, then the target at a scored step)",
        kind.name(),
        inputs.len(),
        batch.scored.len()
    );
    let width = inputs.iter().map(String::len).max().unwrap_or(0).max("input".len());
    println!("{:>5}  {:<width$}  target", "step", "input");
    for (t, input) in inputs.iter().enumerate() {
        let target = scored_target(&batch, &targets, t).unwrap_or_default();
        println!("{t:>5}  {input:<width$}  {target}");
    }
    Ok(())
}

/// Each time step of a one-sequence tensor as text: a token id (`[T, 1]`), or a vector
/// (`[T, 1, n]`), its whole numbers without decimals.
fn steps(t: &Tensor) -> candle_core::Result<Vec<String>> {
    if t.rank() == 2 {
        return Ok(t.to_dtype(DType::U32)?.to_vec2::<u32>()?.into_iter().map(|row| row[0].to_string()).collect());
    }
    let rows = t.to_dtype(DType::F32)?.to_vec3::<f32>()?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let v: Vec<String> =
                row[0].iter().map(|x| if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x:.3}") }).collect();
            v.join(" ")
        })
        .collect())
}

/// The target at time step `t`, if `t` is scored.
fn scored_target(batch: &Batch, targets: &[String], t: usize) -> Option<String> {
    let i = batch.scored.iter().position(|&s| s == t)?;
    targets.get(i).cloned()
}
