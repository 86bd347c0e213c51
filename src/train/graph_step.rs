//! Replaying a training step from a CUDA graph.
//!
//! On a GPU a memctl step is a few thousand small kernels (the recurrent forward at every
//! time step, candle's backward, clipping, the optimiser), and launching them one by one
//! from the host costs far more than running them: STM config A took 90.7 ms a step on an
//! H100. A CUDA graph records the launches of one step once; every later step is one launch.
//!
//! How a trial gets there ([`Replay`]):
//! 1. The first step runs eagerly on persistent input buffers, with candle's host-to-device
//!    cache on: kernels load, and the small uploads a kernel needs (layouts) are cached.
//! 2. The second step is captured on the trial thread's stream, then launched.
//! 3. Every later step copies its batch into the same buffers, does the optimiser's
//!    host-side bookkeeping ([`Optimizer::prepare`](super::optim::Optimizer::prepare)) and
//!    launches the graph. The loss comes back through a one-element buffer.
//!
//! What cannot be captured (a read back to the host inside the step, an upload the cache
//! does not hold) fails the capture cleanly: the trial goes on eagerly, and
//! [`Stepper::replay_status`](super::Stepper::replay_status) says why. A batch of other
//! shapes than the captured one runs eagerly. `MEMCTL_CUDA=-cuda_graphs` turns replay off (for
//! comparisons; `device::tuning::CUDA_GRAPHS`).
//!
//! One difference from the eager step: a replayed step updates the parameters even when its
//! loss is not finite (the graph cannot branch on it). The trial fails at that step either way.

use candle_core::{DType, Device, Result, Tensor};

use super::{Autograd, Stepper, clip, loss};

/// Where a trial's step stands with graph replay.
pub(super) enum Replay {
    /// Steps run eagerly: why.
    Off(&'static str),
    /// A capture failed; steps run eagerly.
    Failed(String),
    /// The next step is the eager warm-up.
    Cold,
    /// Warmed up; the next step is captured.
    WarmedUp(Buffers),
    /// Steps are replayed.
    Captured(Buffers, Graph),
}

impl Replay {
    pub(super) fn for_device(device: &Device, autograd: Autograd) -> Replay {
        if !device.is_cuda() {
            Replay::Off("not on a CUDA device")
        } else if autograd != Autograd::Candle {
            Replay::Off("the step is not candle's autograd")
        } else if !crate::kernels::cuda::switches::on_cuda(crate::device::tuning::CUDA_GRAPHS) {
            Replay::Off("cuda_graphs is off")
        } else {
            Replay::Cold
        }
    }

    /// One line for `memctl bench` and the logs.
    pub(super) fn status(&self) -> String {
        match self {
            Replay::Off(why) => format!("eager ({why})"),
            Replay::Failed(why) => format!("eager (the CUDA graph capture failed: {why})"),
            Replay::Cold | Replay::WarmedUp(_) => "eager (not captured yet)".into(),
            Replay::Captured(_, graph) => format!("replayed from a CUDA graph of {} nodes", graph.nodes()),
        }
    }
}

/// The step's inputs, outputs and loss at fixed device addresses: a captured graph reads
/// and writes these addresses at every replay.
pub(super) struct Buffers {
    pub(super) inputs: Tensor,
    pub(super) targets: Tensor,
    pub(super) scored: Vec<usize>,
    /// `[1]`, f32.
    pub(super) loss: Tensor,
}

impl Buffers {
    pub(super) fn new(inputs: &Tensor, targets: &Tensor, scored: &[usize]) -> Result<Buffers> {
        // `copy` allocates: the buffers must not share memory with the batch.
        Ok(Buffers {
            inputs: inputs.contiguous()?.copy()?,
            targets: targets.contiguous()?.copy()?,
            scored: scored.to_vec(),
            loss: Tensor::zeros(1, DType::F32, inputs.device())?,
        })
    }

    pub(super) fn holds(&self, inputs: &Tensor, targets: &Tensor, scored: &[usize]) -> bool {
        let same = |a: &Tensor, b: &Tensor| a.dims() == b.dims() && a.dtype() == b.dtype();
        same(&self.inputs, inputs) && same(&self.targets, targets) && self.scored == scored
    }

    pub(super) fn fill(&self, inputs: &Tensor, targets: &Tensor) -> Result<()> {
        self.inputs.slice_set(&inputs.contiguous()?, 0, 0)?;
        self.targets.slice_set(&targets.contiguous()?, 0, 0)
    }

    pub(super) fn loss_value(&self) -> Result<f64> {
        self.loss.to_dtype(DType::F64)?.get(0)?.to_scalar::<f64>()
    }
}

impl Stepper {
    /// The step on `batch` when it can be replayed or is on its way there; `None`: run it
    /// eagerly.
    pub(super) fn replayed_step(&mut self, batch: &crate::tasks::Batch) -> Result<Option<f64>> {
        if matches!(self.replay, Replay::Off(_) | Replay::Failed(_)) {
            return Ok(None);
        }
        let inputs = &self.inputs_of(batch)?;
        let (targets, scored) = (&batch.targets, &batch.scored[..]);
        match std::mem::replace(&mut self.replay, Replay::Cold) {
            Replay::Cold => {
                let buffers = Buffers::new(inputs, targets, scored)?;
                self.opt.prepare()?;
                with_upload_cache(inputs.device(), || self.device_step(&buffers))?;
                let value = buffers.loss_value()?;
                self.replay = Replay::WarmedUp(buffers);
                Ok(Some(value))
            }
            Replay::WarmedUp(buffers) if buffers.holds(inputs, targets, scored) => {
                buffers.fill(inputs, targets)?;
                self.opt.prepare()?;
                match self.capture_step(&buffers) {
                    Ok(graph) => {
                        graph.launch()?;
                        let value = buffers.loss_value()?;
                        self.replay = Replay::Captured(buffers, graph);
                        Ok(Some(value))
                    }
                    Err(why) => {
                        // Nothing ran during the capture; the step runs now, eagerly.
                        self.device_step(&buffers)?;
                        self.replay = Replay::Failed(why.to_string());
                        Ok(Some(buffers.loss_value()?))
                    }
                }
            }
            Replay::Captured(buffers, graph) if buffers.holds(inputs, targets, scored) => {
                buffers.fill(inputs, targets)?;
                self.opt.prepare()?;
                graph.launch()?;
                let value = buffers.loss_value()?;
                self.replay = Replay::Captured(buffers, graph);
                Ok(Some(value))
            }
            other => {
                self.replay = other;
                Ok(None)
            }
        }
    }

    /// Forward, loss, backward, clipping and update on `b`, launching device work only: no
    /// value comes back to the host, so that the launches can be captured.
    fn device_step(&mut self, b: &Buffers) -> Result<()> {
        let (logits, weights) = self.cell.run_for_gradients(&b.inputs, &b.scored)?;
        let loss = loss::loss(self.target, &logits, &b.targets)?;
        b.loss.slice_set(&loss.to_dtype(DType::F32)?.reshape(1)?, 0, 0)?;
        let mut grads = weights.gradients_of(&loss)?;
        let clamp = clip::before_update(&mut grads, self.config.clip_value, self.config.clip_norm, true)?;
        self.opt.update(&grads, clamp)
    }

    /// Records the launches of one [`Stepper::device_step`] on `b` into a graph.
    fn capture_step(&mut self, b: &Buffers) -> Result<Graph> {
        let device = b.loss.device().clone();
        capture(&device, "step", || self.device_step(b))
    }

    /// Whether steps are replayed from a CUDA graph, and if not, why.
    pub fn replay_status(&self) -> String {
        self.replay.status()
    }

    /// Whether steps are replayed from a CUDA graph.
    pub fn replays(&self) -> bool {
        matches!(self.replay, Replay::Captured(..))
    }

    #[cfg(test)]
    pub(super) fn force_replay(&mut self) {
        self.replay = Replay::Cold;
    }
}

/// Records the device work that `record` launches on the calling thread's stream into a graph
/// (`what` names it for `MEMCTL_CUDA=graph_profile`). Nothing runs during a capture; a
/// failed one leaves the stream as it was.
#[cfg(feature = "cuda")]
pub(super) fn capture(device: &Device, what: &str, record: impl FnOnce() -> Result<()>) -> Result<Graph> {
    use candle_core::cuda::cudarc::driver::sys;
    let device = device.as_cuda_device()?.clone();
    let stream = device.cuda_stream();
    let _cache = device.enable_cuda_graph_htod_cache();
    // Thread-local: other trials' threads may allocate and launch meanwhile.
    let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    stream.begin_capture(mode).map_err(candle_core::Error::wrap)?;
    let recorded = record();
    // End the capture whatever happened, or the stream stays in capture mode.
    let ended = stream.end_capture(sys::CUgraphInstantiate_flags(0));
    if let Err(e) = recorded {
        // Frees of a broken capture fail in `Drop`, where cudarc keeps the error for the
        // next call on the context to report; the eager work that follows must not get it.
        let _ = stream.context().check_err();
        return Err(e);
    }
    match ended.map_err(candle_core::Error::wrap)? {
        Some(graph) => {
            graph.upload().map_err(candle_core::Error::wrap)?;
            if crate::kernels::cuda::switches::on_cuda(crate::device::tuning::GRAPH_PROFILE) {
                let lines: Vec<String> = super::graph_profile::histogram(graph.cu_graph())
                    .into_iter()
                    .take(40)
                    .map(|(label, n)| format!("{n:>7}  {label}"))
                    .collect();
                eprintln!("captured {what}, nodes by kernel:\n{}", lines.join("\n"));
            }
            Ok(Graph(graph))
        }
        None => candle_core::bail!("the capture recorded no work"),
    }
}

#[cfg(not(feature = "cuda"))]
pub(super) fn capture(_: &Device, _: &str, _: impl FnOnce() -> Result<()>) -> Result<Graph> {
    candle_core::bail!("this memctl was built without CUDA")
}

/// A captured step.
#[cfg(feature = "cuda")]
pub(super) struct Graph(candle_core::cuda::cudarc::driver::CudaGraph);

// SAFETY: the graph is launched only through `&mut Stepper`, never from two threads at
// once, and on the per-thread stream of whichever thread holds the stepper, after that
// thread copied the batch on the same stream; cudarc binds the context before launching.
#[cfg(feature = "cuda")]
unsafe impl Send for Graph {}
#[cfg(feature = "cuda")]
unsafe impl Sync for Graph {}

#[cfg(feature = "cuda")]
impl Graph {
    pub(super) fn launch(&self) -> Result<()> {
        self.0.launch().map_err(candle_core::Error::wrap)
    }

    pub(super) fn nodes(&self) -> usize {
        super::graph_profile::node_count(self.0.cu_graph())
    }
}

/// No graph exists in a build without CUDA.
#[cfg(not(feature = "cuda"))]
pub(super) enum Graph {}

#[cfg(not(feature = "cuda"))]
impl Graph {
    pub(super) fn launch(&self) -> Result<()> {
        match *self {}
    }

    pub(super) fn nodes(&self) -> usize {
        match *self {}
    }
}

/// Runs `f` with candle's host-to-device cache on (CUDA only): small uploads, such as the
/// layouts kernels take, are kept by content and reused, so that a capture finds them.
#[cfg(feature = "cuda")]
pub(super) fn with_upload_cache<R>(device: &Device, f: impl FnOnce() -> R) -> R {
    let _cache = match device {
        Device::Cuda(d) => Some(d.enable_cuda_graph_htod_cache()),
        _ => None,
    };
    f()
}

#[cfg(not(feature = "cuda"))]
pub(super) fn with_upload_cache<R>(_: &Device, f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A model of an LSTM cell, a gated item memory and a SAM read, and its experiment.
    pub(in crate::train) const SPEC: &str = r#"
task tiny = assocRetrieval(pairs = 2, train = 64, validation = 32, test = 32)

model mix(d = 8, nq = 2) {
  state c = zeros(d)
  state h = zeros(d)
  state M = learned(d, d)
  step token {
    c, h = lstmCell(c, h, embed(token, 8))
    M = itemWrite(M, h, gated = true)
    out linear(mlp(distill(samRead(M, nq = nq), nr = d, size = 16), [16]), output_size)
  }
}

experiment tiny_mix {
  task tiny
  model mix
  train { optimizer = adam(lr = 1e-2), batch = 16, steps = 6, clip_norm = 0.5 }
}
"#;

    /// The first trial of `spec`, its CPU stepper (with `replay` applied, if any: a forced
    /// graph replay), its data, and the data's first training batch.
    pub(in crate::train) fn on_cpu(
        spec: &str,
        replay: Option<impl FnOnce(&mut Stepper)>,
    ) -> (crate::check::Trial, Stepper, Box<dyn crate::tasks::TaskData>, crate::tasks::Batch) {
        let trial = crate::check::checked_text(spec).experiments[0].trials[0].clone();
        let mut stepper = Stepper::with(&trial, &Device::Cpu, DType::F32, Autograd::Candle).unwrap();
        if let Some(replay) = replay {
            replay(&mut stepper);
        }
        let mut data = trial.task.data(super::super::data_seed(trial.config.seed), &Device::Cpu).unwrap();
        let batch = data.train_batch(trial.config.train.batch).unwrap();
        (trial, stepper, data, batch)
    }

    /// Off a GPU the capture fails, so this runs the warm-up step and the fallback the way a
    /// GPU would: the losses must be those of the plain eager step (clipping by norm on the
    /// device rounds slightly differently from the host's f64 sum).
    #[test]
    fn the_warm_up_and_a_failed_capture_train_like_the_eager_step() {
        let losses = |replay: bool| {
            let (_, mut stepper, _, batch) = on_cpu(SPEC, replay.then_some(Stepper::force_replay));
            let losses: Vec<f64> = (0..5).map(|_| stepper.step(&batch).unwrap()).collect();
            (losses, stepper.replay_status())
        };
        let ((eager, eager_status), (replayed, replay_status)) = (losses(false), losses(true));
        assert_eq!(eager_status, "eager (not on a CUDA device)");
        assert!(replay_status.starts_with("eager (the CUDA graph capture failed"), "{replay_status}");
        assert_eq!(eager[..1], replayed[..1], "the first loss comes before any update");
        for (e, r) in eager.iter().zip(&replayed) {
            assert!((e - r).abs() <= 1e-5 * e.abs(), "eager {eager:?} against replayed {replayed:?}");
        }
        assert!(eager[4] < eager[0], "the fixed batch was not learned: {eager:?}");
    }
}
