//! Replaying an evaluation's forward from a CUDA graph.
//!
//! An evaluation pass runs the model's forward over the batches of a split with the weights of
//! the moment. Eagerly, on a GPU, each batch is a few thousand small launches, and when other
//! trials replay their training steps on the same GPU every launch queues behind theirs: SAM
//! Table 1's trials on an H100 evaluated 10 000 sequences in 6.5–16 s with three or four
//! training at once, a trial alone in 0.5 s (docs/performance.md, "Sweeps on one GPU"). A
//! pass's batches have one size but the last, so a graph per batch shape serves every later
//! pass ([`EvalReplay`]):
//! 1. The first batch of a shape runs eagerly on fixed input buffers, with candle's upload
//!    cache on (as a training step's warm-up does, `graph_step`).
//! 2. The second is captured and launched.
//! 3. Later ones copy their inputs into the buffers and launch the graph.
//!
//! A graph reads the weights where they live, and the optimiser updates them in place, so each
//! replay sees the current ones. What cannot be captured runs eagerly, and
//! [`EvalReplay::status`] says why. `device::tuning::EVAL_GRAPH` switches it (on by default);
//! `doctor --check` compares three evaluations of each model, the third replayed, with the
//! CPU's.

use candle_core::{DType, Device, Result, Tensor};

use super::graph_step::{Graph, capture, with_upload_cache};
use crate::compile::Cell;

/// How a trial's evaluations run, and the graphs of the batch shapes met so far.
pub(super) struct EvalReplay {
    /// Why evaluations run eagerly, when they do.
    off: Option<&'static str>,
    shapes: Vec<(Shape, Stage)>,
}

/// What a captured forward is specific to.
#[derive(PartialEq)]
struct Shape {
    dims: Vec<usize>,
    dtype: DType,
    scored: Vec<usize>,
}

enum Stage {
    /// The shape's first batch ran eagerly; the next is captured.
    WarmedUp(Buffers),
    Captured(Buffers, Graph),
    /// The capture failed (why); this shape runs eagerly.
    Failed(String),
}

/// The forward's input and output at fixed device addresses, which a graph reads and writes.
struct Buffers {
    inputs: Tensor,
    outputs: Tensor,
}

impl EvalReplay {
    pub(super) fn for_device(device: &Device, dtype: DType) -> EvalReplay {
        let off = if !device.is_cuda() {
            Some("not on a CUDA device")
        } else if !crate::kernels::cuda::switches::on_cuda(crate::device::tuning::CUDA_GRAPHS) {
            Some("cuda_graphs is off")
        } else if !crate::kernels::cuda::switches::used_on(device, dtype, crate::device::tuning::EVAL_GRAPH) {
            Some("eval_graph is off")
        } else {
            None
        };
        EvalReplay { off, shapes: vec![] }
    }

    /// Replay asked for wherever the trial runs: off a GPU every capture fails, which tests the
    /// way back to eager evaluation.
    #[cfg(test)]
    pub(super) fn forced() -> EvalReplay {
        EvalReplay { off: None, shapes: vec![] }
    }

    /// `cell`'s outputs at the `scored` steps of `inputs` with its current weights, detached:
    /// what `Cell::run` gives.
    pub(super) fn forward(&mut self, cell: &Cell, inputs: &Tensor, scored: &[usize]) -> Result<Tensor> {
        let eager = || cell.run(&cell.weights(false), inputs, scored);
        if self.off.is_some() {
            return eager();
        }
        let shape = Shape { dims: inputs.dims().to_vec(), dtype: inputs.dtype(), scored: scored.to_vec() };
        let Some(i) = self.shapes.iter().position(|(s, _)| *s == shape) else {
            // `copy` allocates: the buffers must not share memory with the batch.
            let buffered = inputs.contiguous()?.copy()?;
            let outputs = with_upload_cache(inputs.device(), || cell.run(&cell.weights(false), &buffered, scored))?;
            let buffers = Buffers { inputs: buffered, outputs: outputs.contiguous()?.copy()? };
            self.shapes.push((shape, Stage::WarmedUp(buffers)));
            return Ok(outputs);
        };
        let stage = &mut self.shapes[i].1;
        match std::mem::replace(stage, Stage::Failed(String::new())) {
            Stage::Failed(why) => {
                *stage = Stage::Failed(why);
                eager()
            }
            Stage::Captured(buffers, graph) => {
                buffers.inputs.slice_set(&inputs.contiguous()?, 0, 0)?;
                graph.launch()?;
                let outputs = buffers.outputs.copy();
                *stage = Stage::Captured(buffers, graph);
                outputs
            }
            Stage::WarmedUp(buffers) => {
                buffers.inputs.slice_set(&inputs.contiguous()?, 0, 0)?;
                let recorded = capture(inputs.device(), "evaluation", || {
                    let outputs = cell.run(&cell.weights(false), &buffers.inputs, scored)?;
                    buffers.outputs.slice_set(&outputs.contiguous()?, 0, 0)
                });
                match recorded {
                    Ok(graph) => {
                        graph.launch()?;
                        let outputs = buffers.outputs.copy();
                        *stage = Stage::Captured(buffers, graph);
                        outputs
                    }
                    // Nothing ran during the capture; the batch runs now, eagerly.
                    Err(why) => {
                        *stage = Stage::Failed(why.to_string());
                        eager()
                    }
                }
            }
        }
    }

    /// One line for `memctl bench` and `doctor --check`.
    pub(super) fn status(&self) -> String {
        if let Some(why) = self.off {
            return format!("eager ({why})");
        }
        let failed = self.shapes.iter().find_map(|(_, s)| match s {
            Stage::Failed(why) => Some(why),
            _ => None,
        });
        if let Some(why) = failed {
            return format!("eager (the CUDA graph capture failed: {why})");
        }
        let nodes: Vec<String> = self
            .shapes
            .iter()
            .filter_map(|(_, s)| match s {
                Stage::Captured(_, graph) => Some(graph.nodes().to_string()),
                _ => None,
            })
            .collect();
        match nodes.len() {
            0 => "eager (not captured yet)".into(),
            _ => format!("replayed from CUDA graphs of {} nodes", nodes.join(" and ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::graph_step::tests::on_cpu;
    use super::super::{Stepper, evaluate};
    use crate::tasks::Split;

    const SPEC: &str = concat!(
        crate::check::test_specs::tiny_lstm!("mix", "d"),
        r#"task tiny = assocRetrieval(pairs = 2, train = 64, validation = 30, test = 32)
experiment tiny_mix {
  task tiny
  model mix
  train { optimizer = adam(lr = 1e-2), batch = 16, steps = 6 }
}
"#
    );

    /// Off a GPU every capture fails, so this runs the warm-up and the fallback of both batch
    /// shapes (three batches of 8 and one of 6) the way a GPU would: every evaluation must give
    /// the eager forward's metrics.
    #[test]
    fn the_warm_up_and_a_failed_capture_evaluate_like_the_eager_forward() {
        let evaluations = |replay: bool| {
            let (trial, mut stepper, data, batch) = on_cpu(SPEC, replay.then_some(Stepper::force_eval_replay));
            let mut metrics = vec![];
            for _ in 0..3 {
                // Each evaluation reads the weights as trained so far.
                stepper.step(&batch).unwrap();
                metrics.push(evaluate(&stepper, data.as_ref(), Split::Validation, 8, None, &trial).unwrap());
            }
            (metrics, stepper.eval_replay_status())
        };
        let ((eager, eager_status), (replayed, replay_status)) = (evaluations(false), evaluations(true));
        assert_eq!(eager_status, "eager (not on a CUDA device)");
        assert!(replay_status.starts_with("eager (the CUDA graph capture failed"), "{replay_status}");
        assert_eq!(eager, replayed);
        assert_ne!(eager[0], eager[2], "the evaluations did not see the trained weights");
    }
}
