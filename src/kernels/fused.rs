//! What memctl's fused candle ops (a custom op with its own backward: `lstm_cell_op`,
//! `gru_cell_op`, `layer_norm_op`, `softmax_op`, `item_gate_op`, `scale_op`, `sam_attend_op`,
//! `head_move_op`, `spd_solve`, `nam_write_op`, `l2_normalize_op`, `outer_op`) and its fused
//! optimiser updates (`optim_update`) share: where they run, and a count of their CUDA launches.
//!
//! On the CPU they run everywhere the candle path does (evaluation, `Autograd::Candle`, the
//! tape's per-node fallback). On CUDA one runs by default once `memctl doctor --check` has
//! passed with it on a GPU ([`OnCuda::checked`], the table below); a newer one is opt-in until
//! then. `MEMCTL_CUDA_FUSED=1` runs every one on CUDA, the unchecked ones too (what `doctor
//! --check` is run with to check them); a comma-separated list changes the checked set by name:
//! `MEMCTL_CUDA_FUSED=new_kernel` adds one (to check one at a time), `MEMCTL_CUDA_FUSED=-scale`
//! leaves one out (to time what it gains); `MEMCTL_CUDA_FUSED=0` runs none (candle's own kernels,
//! to compare).

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, DType, Device, Layout, Result, Tensor, bail};

use super::real::Real;

/// One of memctl's changes to what runs on CUDA (a fused kernel, or a change to candle's), by
/// name, and whether it has passed `memctl doctor --check` on a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnCuda {
    pub name: &'static str,
    /// Checked on a GPU (which card and when: docs/performance.md, "CUDA changes"): runs by default.
    /// Otherwise compiled but not yet checked: runs only when `MEMCTL_CUDA_FUSED` asks.
    pub checked: bool,
}

// The standing of each, in one place. The first six passed `doctor --check` on an H200, alone
// and with all the others (2026-11-26); the rest on an H100 (2026-11-26 and 2026-11-27), alone
// and all together, each timed alone against the default of its day (docs/performance.md,
// "CUDA changes").
pub const LSTM_CELL: OnCuda = OnCuda { name: "lstm_cell", checked: true };
pub const LAYER_NORM: OnCuda = OnCuda { name: "layer_norm", checked: true };
/// The RMC's step 2.51 → 2.35 ms there.
pub const SOFTMAX: OnCuda = OnCuda { name: "softmax", checked: true };
/// STM A 16.26 → 15.64 ms, B 30.70 → 29.48 (alone, beside the three above).
pub const ITEM_GATE: OnCuda = OnCuda { name: "item_gate", checked: true };
/// STM B 30.70 → 24.52 ms alone (A 16.26 → 16.59; with split sums A gains too).
pub const SCALE: OnCuda = OnCuda { name: "scale", checked: true };
/// The vendored candle-core's split sums (`candle_core::cuda_backend::set_split_sums`,
/// vendor/README.md): a float sum with few outputs runs over many blocks in two passes instead
/// of one block per output. STM A 16.26 → 11.71 ms, B 30.70 → 22.49 alone.
pub const SPLIT_SUMS: OnCuda = OnCuda { name: "split_sums", checked: true };
/// The optimisers' updates, one kernel per parameter with the clamp by value inside
/// (`optim_update`), where candle's tensor operations take about seventeen.
/// Checked on the H100 (2026-11-26), alone: STM A 10.98 → 10.44 ms, B 19.59 → 18.78.
pub const OPTIMIZER: OnCuda = OnCuda { name: "optimizer", checked: true };

/// `samRead`'s outer product attention on its normalised projection (`sam_attend_op`), one
/// kernel each way where candle's ops, slices and transposes take some twenty-five a time
/// step. Its first two forms passed `doctor --check` on the H100 (2026-11-26) but did not
/// pay, reading `v` across a warp's lanes at a stride of `3nq` floats (with a warp per
/// gradient element: A 5.98 → 5.16 ms, B 14.43 → 17.33, B at batch 128 34.87 → 49.02). The
/// third, whose forward stages `v` in shared memory and whose backward reads `G` along its
/// rows, passed alone and beside the others on the H100 (2026-11-26) and paid on all three,
/// two rounds each: A 5.99 → 5.20 ms, B 14.56 → 14.17, B at batch 128 34.89 → 34.62. On CUDA
/// only for the shapes
/// [`sam_attend_op::fits_a_block`](super::sam_attend_op::fits_a_block) takes.
pub const SAM_ATTEND: OnCuda = OnCuda { name: "sam_attend", checked: true };

/// Each parameter's gradient summed over its time steps in one kernel per 32 steps, from
/// per-step aliases of the weights (`compile::StepWeights`, `sum_parts_op`), where candle's
/// backward adds each step's in a kernel of its own.
/// Checked on the H100 (2026-11-26), alone: STM A 10.98 → 10.07 ms, B 19.59 → 18.42; LSAM
/// 14.33 → 13.73, NAM-TM 30.24 → 29.05.
pub const STEP_GRADS: OnCuda = OnCuda { name: "step_grads", checked: true };

/// NAM-TM's head transition (`head_move_op`), one kernel each way where candle's rolls, slices,
/// products and sums take some forty a head a time step.
/// Checked on the H100 (2026-11-26), alone: NAM-TM 30.24 → 25.22 ms.
pub const HEAD_MOVE: OnCuda = OnCuda { name: "head_move", checked: true };

/// The vendored candle-core's backward of slices (`narrow`): a tensor's slices' gradients
/// assembled once, concatenated or copied into one fill of the whole
/// (`candle_core::backprop::set_lean_narrow_grads`, vendor/README.md), where candle pads each
/// with zeros (up to two fills and three copies) and adds them. Always on the CPU.
/// Checked on the H100 (2026-11-26), alone: NAM-TM 30.24 → 26.57 ms, LSAM 14.33 → 13.64, STM A
/// 10.98 → 10.75.
pub const NARROW_GRADS: OnCuda = OnCuda { name: "narrow_grads", checked: true };

/// The output head (the nodes that feed the output but no state) run once over all the
/// scored steps, stacked, instead of at each (`compile::head`): for STM some twenty kernels a
/// time step forward and backward become as many for the whole sequence. No kernel of its own,
/// candle's ops in another order.
/// Checked on the H100 (2026-11-26), alone: STM A 10.98 → 8.60 ms, B 19.59 → 17.85; LSAM
/// 14.33 → 10.21, NAM-TM 30.24 → 27.64.
pub const BATCHED_HEAD: OnCuda = OnCuda { name: "batched_head", checked: true };

/// The vendored candle-core's backward without the gradients of operands that need none
/// (`candle_core::backprop::set_skip_untracked_grads`, vendor/README.md): a batch's inputs
/// times a weight cost candle a product for the inputs' gradient, for STM three a time step.
/// Always on the CPU.
/// Checked on the H100 (2026-11-26), alone: STM A 10.98 → 10.69 ms, B 19.59 → 19.21.
pub const UNTRACKED_GRADS: OnCuda = OnCuda { name: "untracked_grads", checked: true };

/// The nodes that read only the step's input (STM's three projections of it, embeddings) run
/// once over all the time steps before the loop, each step reading its rows
/// (`compile::hoist`): for STM some twelve kernels a time step become one copy, with
/// [`NARROW_GRADS`] (without it candle pads each step's rows' gradient to the whole and adds
/// them). No kernel of its own.
/// Checked on the H100 (2026-11-26), alone: NAM-TM 30.24 → 26.88 ms, STM A 10.98 → 10.33, B
/// 19.59 → 18.85 (LSAM 14.33 → 14.68, within a few per cent of its noise).
pub const HOISTED_INPUTS: OnCuda = OnCuda { name: "hoisted_inputs", checked: true };

/// The batched solve of the Kanerva machines' addressing (`spd_solve`), one kernel a block per
/// system (Cholesky and both substitutions), where the device-generic Gauss–Jordan elimination
/// takes some ten kernels a column forward and thirty backward: PKM's solves of 8 columns, two
/// a time step, were most of its step.
/// Checked on the H100 (2026-11-26), alone: PKM (k = 4) 12.16 → 3.92 ms.
pub const SPD_SOLVE: OnCuda = OnCuda { name: "spd_solve", checked: true };

/// NAM-TM's tape write (`nam_write_op`, the tape), one kernel each way, a block per row, where
/// candle's ops take six kernels forward and some sixteen backward, for each of its two tapes at
/// every time step.
/// Checked on the H100 (2026-11-26), alone: NAM-TM 30.24 → 29.35 ms.
pub const TAPE_WRITE: OnCuda = OnCuda { name: "tape_write", checked: true };

/// LSAM's `namWR` (`nam_write_op`, the matrix), one kernel each way, a block per memory, where
/// candle's ops take seven kernels forward and some eighteen backward at every time step.
/// Checked on the H100 (2026-11-26), alone: LSAM 14.33 → 13.79 ms.
pub const NAM_WRITE: OnCuda = OnCuda { name: "nam_write", checked: true };

/// `gruCell`'s element-wise half (`gru_cell_op`), one kernel each way, where candle's ops take
/// ten kernels forward and some twenty-five backward at every time step (NAM-TM's controller).
/// Checked on the H100 (2026-11-26), alone: NAM-TM 30.24 → 28.00 ms.
pub const GRU_CELL: OnCuda = OnCuda { name: "gru_cell", checked: true };

/// NAM's unit keys and queries (`l2_normalize_op`), one kernel each way, a warp per row, where
/// candle's ops take five kernels forward and some ten backward (LSAM twice a time step, NAM-TM
/// once).
/// Checked on the H100 (2026-11-26), alone: LSAM 14.33 → 11.42 ms, NAM-TM 30.24 → 27.37.
pub const L2_NORMALIZE: OnCuda = OnCuda { name: "l2_normalize", checked: true };

/// The outer product (`outer_op`: STM's `vr ⊗ f2` and `itemWrite`'s written item), its
/// backward one kernel for both operands where candle's ops take two full-size products and two
/// sums.
/// Checked on the H100 (2026-11-26), alone: STM A 10.98 → 10.78 ms, B 19.59 → 19.07.
pub const OUTER: OnCuda = OnCuda { name: "outer", checked: true };

/// The device's default memory pool keeps the memory its allocations free (its release
/// threshold raised from 0 to the maximum; `device::keep_freed_memory`), where by default the
/// driver takes back every idle byte at each synchronisation. Every trial's stream allocates
/// from that pool, and every trial synchronises at each step (its loss read back), so with
/// four trials on a GPU the eager forward of one trial's evaluation re-maps memory for most
/// of its ops: a suspect for the slow evaluations of trials sharing a GPU (docs/performance.md,
/// "Sweeps on one GPU"). Numerics are untouched. On the H100 (2026-11-27) it did not pay for
/// one trial alone (SAM Table 1's three evaluation passes 504 → 503 ms, with
/// `one_hot_embedding`), so it stays opt-in.
pub const POOL_KEEP: OnCuda = OnCuda { name: "pool_keep", checked: false };

/// `embedding`'s lookup, while training, as a product of one-hot rows with the table
/// (`prims::embedding::one_hot_lookup`), for vocabularies of at most 1 024 tokens: its backward
/// is then one product, where candle's backward of `index_select` is an index-add whose threads
/// (one per column of the table) each walk every id of the batch in turn, a dependent
/// read-modify-write each: one launch of 1.14 ms in a step of NAM-TM's example on the H100
/// (2026-11-26; docs/performance.md, "Where a step's time goes"), and SAM Table 1's STM embeds
/// 29 × 128 ids a step.
/// Checked on the H100 (2026-11-27), alone: NAM-TM's example 12.26 → 11.62 ms, LSAM's 5.36 → 4.78,
/// SAM Table 1's STM (d = 96, batch 128) 20.86 → 19.75.
pub const ONE_HOT_EMBEDDING: OnCuda = OnCuda { name: "one_hot_embedding", checked: true };

/// `head_move`'s backward with a warp per row (`head_move_bwd_warps`), its lanes along the row's
/// cells: coalesced loads and stores and warp sums, where `head_move_bwd` gives each row one
/// thread that walks it alone (32.6 µs a launch for NAM-TM's example on the H100, 6.9 % of an
/// eager step's kernel time).
/// Checked on the H100 (2026-11-27), alone: NAM-TM's example 12.24 → 10.26 ms.
pub const HEAD_MOVE_WARPS: OnCuda = OnCuda { name: "head_move_warps", checked: true };

/// `kanervaUpdate`'s write after the addressing (`kanerva_write_op`): one kernel each way
/// (a block per example and machine forward, per example backward), where candle's ops take some twelve kernels forward and twenty-five
/// backward a time step.
/// Checked on the H100 (2026-11-27), alone: PKM (k = 4) 2.78 → 2.17 ms.
pub const KANERVA_WRITE: OnCuda = OnCuda { name: "kanerva_write", checked: true };

/// The addressing and readout of `kanervaRead` and `kanervaUpdate` (`kanerva_address_op`):
/// two kernels each way, where candle's ops take some thirteen kernels forward and twenty-five
/// backward (a Gram matrix, a transpose, the solve, the weights, the readout). The first has a
/// block per example and machine (96 for PKM's batch of 24 and k = 4), its Gram matrix and
/// Cholesky factor in f64 shared by the block's threads and its triangular solves by a warp
/// (the backward's two side by side); the second, a warp per example, sums the machines' shares
/// in order. Not yet timed on a GPU. The version before, a block per example that took its
/// machines in turn and gave each solve one thread, agreed with the CPU on the H100
/// (`doctor --check`, 2026-11-27) but did not pay: PKM (k = 4) 2.77 → 3.12 ms alone.
pub const KANERVA_ADDRESS: OnCuda = OnCuda { name: "kanerva_address", checked: false };

/// `tapeWrite`'s backward with the tape's cells split among the block's warps
/// (`tape_write_bwd_split`), where `tape_write_bwd` gives each tape one warp that walks every
/// cell alone (NAM-TM's 32 features: 22.9 µs a launch for its example on the H100, 7.6 % of an
/// eager step's kernel time).
/// Checked on the H100 (2026-11-27), alone: NAM-TM's example 12.23 → 11.54 ms.
pub const TAPE_WRITE_SPLIT: OnCuda = OnCuda { name: "tape_write_split", checked: true };

/// An evaluation's forward replayed from a CUDA graph, one per batch shape
/// (`train::graph_eval`), where it ran eagerly: thousands of launches a pass that queue behind
/// the other trials' replayed steps when several share a GPU (SAM Table 1 on an H100: 6.5–16 s
/// per 10 000 sequences evaluated, against 0.5 s for a trial alone; docs/performance.md,
/// "Sweeps on one GPU").
/// Not yet run on a GPU.
pub const EVAL_GRAPH: OnCuda = OnCuda { name: "eval_graph", checked: false };

/// candle's kernel modules and memctl's loaded from the machine code (SASS) built for the card
/// beside their PTX (vendor/README.md, "machine code beside the PTX";
/// `candle_core::cuda_backend::set_prebuilt_sass`), where the driver compiled each module's
/// PTX at its first load: `ptxas` takes 9 s for candle's `binary` module alone on one core,
/// and the first trial on a fresh H100 machine started its first launch 6.5 s after opening
/// the device (153 ms once the driver's cache held them). A card of another architecture gets
/// the PTX. Not yet run on a GPU.
pub const PREBUILT_SASS: OnCuda = OnCuda { name: "prebuilt_sass", checked: false };

/// A gated write `a + w * (b - a)` of a model's step (PKM's `R` and `V` on write steps: the
/// pattern `compile::lerp` finds) as one kernel each way (`lerp_op`), where the three
/// primitives take some six kernels with their allocations, for each of PKM's two states at
/// every time step. Not yet run on a GPU.
pub const LERP: OnCuda = OnCuda { name: "lerp", checked: false };

/// STM's `relRead` (`rel_read_op`), one kernel forward and two backward, where candle's
/// softmax, broadcast products, batched products and sums take some ten a time step. Not yet
/// run on a GPU.
pub const REL_READ: OnCuda = OnCuda { name: "rel_read", checked: false };

/// Every one, for `doctor` to list.
pub const ALL: [OnCuda; 30] = [
    LSTM_CELL,
    LAYER_NORM,
    SOFTMAX,
    ITEM_GATE,
    SCALE,
    SPLIT_SUMS,
    OPTIMIZER,
    SAM_ATTEND,
    STEP_GRADS,
    HEAD_MOVE,
    NARROW_GRADS,
    BATCHED_HEAD,
    UNTRACKED_GRADS,
    HOISTED_INPUTS,
    SPD_SOLVE,
    TAPE_WRITE,
    NAM_WRITE,
    GRU_CELL,
    L2_NORMALIZE,
    OUTER,
    POOL_KEEP,
    ONE_HOT_EMBEDDING,
    HEAD_MOVE_WARPS,
    KANERVA_WRITE,
    KANERVA_ADDRESS,
    TAPE_WRITE_SPLIT,
    EVAL_GRAPH,
    PREBUILT_SASS,
    LERP,
    REL_READ,
];

/// The dynamic shared memory a fused kernel may ask of a block: a block may take 48 KiB in all
/// without opting in to more (every GPU since compute capability 7.0), and the kernel's own
/// static shared memory comes out of that.
pub const BLOCK_SHARED_BYTES: usize = 47 * 1024;

/// Which run on CUDA, from `MEMCTL_CUDA_FUSED`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum CudaFused {
    /// `0`: none.
    None,
    /// Unset: the checked ones. A comma-separated list of names: the checked ones, with those
    /// named added and those named with a leading `-` left out; names that match none are
    /// ignored.
    Checked { also: Vec<String>, without: Vec<String> },
    /// `1`: all.
    All,
}

/// Whether the candle path uses the fused op `op` for `t`: on the CPU always; on CUDA (f32
/// only) by `MEMCTL_CUDA_FUSED` (the module's header); never on other devices.
pub fn used_for(t: &Tensor, op: OnCuda) -> bool {
    used_on(t.device(), t.dtype(), op)
}

/// [`used_for`] a tensor of `dtype` on `device`.
pub fn used_on(device: &Device, dtype: DType, op: OnCuda) -> bool {
    match device {
        Device::Cpu => true,
        Device::Cuda(_) => dtype == DType::F32 && cuda_uses(op),
        _ => false,
    }
}

/// Whether CUDA runs `op` (a kernel, or a change to candle's), by `MEMCTL_CUDA_FUSED`.
pub fn cuda_uses(op: OnCuda) -> bool {
    CUDA_FUSED.runs(op)
}

/// `MEMCTL_CUDA_FUSED`, read once: `used_for` runs for every op of every eager time step.
static CUDA_FUSED: LazyLock<CudaFused> =
    LazyLock::new(|| CudaFused::from_setting(std::env::var("MEMCTL_CUDA_FUSED").ok().as_deref()));

impl CudaFused {
    fn from_setting(value: Option<&str>) -> CudaFused {
        match value.map(str::trim) {
            Some("0") => CudaFused::None,
            Some("1") => CudaFused::All,
            Some(list) => {
                let names = list.split(',').map(str::trim).filter(|n| !n.is_empty());
                let (without, also): (Vec<&str>, Vec<&str>) = names.partition(|n| n.starts_with('-'));
                CudaFused::Checked {
                    also: also.into_iter().map(String::from).collect(),
                    without: without.into_iter().map(|n| n[1..].trim().to_string()).collect(),
                }
            }
            None => CudaFused::Checked { also: Vec::new(), without: Vec::new() },
        }
    }

    fn runs(&self, op: OnCuda) -> bool {
        match self {
            CudaFused::None => false,
            CudaFused::Checked { also, without } => {
                (op.checked || also.iter().any(|n| n == op.name)) && !without.iter().any(|n| n == op.name)
            }
            CudaFused::All => true,
        }
    }
}

/// Launches of each fused CUDA kernel in this process (one recorded into a CUDA graph counts
/// once; its replays do not), so that `doctor --check` can say which kernels its check covered.
static DEVICE_LAUNCHES: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

/// Counts one launch of `kernel`.
pub fn record_launch(kernel: &'static str) {
    *DEVICE_LAUNCHES.lock().unwrap_or_else(|e| e.into_inner()).entry(kernel).or_default() += 1;
}

/// Every fused kernel launched so far, by name, with its number of launches.
pub fn device_launches() -> Vec<(&'static str, u64)> {
    DEVICE_LAUNCHES.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, n)| (*k, *n)).collect()
}

/// Runs `f` on the CPU storage and layout of the output's gradient `g` that a fused op's
/// backward holds (a candle op takes at most three operands), checked to be laid out as the
/// output `like` (same dims, contiguous). `what` names the op in errors.
pub fn with_held_gradient_cpu<R>(
    g: &Tensor,
    like: &Layout,
    what: &str,
    f: impl FnOnce(&CpuStorage, &Layout) -> Result<R>,
) -> Result<R> {
    let (storage, layout) = g.storage_and_layout();
    let candle_core::Storage::Cpu(s) = &*storage else { bail!("{what}: operands on different devices") };
    check_held_gradient(layout, like, what)?;
    f(s, layout)
}

/// [`with_held_gradient_cpu`] on CUDA.
#[cfg(feature = "cuda")]
pub fn with_held_gradient_cuda<R>(
    g: &Tensor,
    like: &Layout,
    what: &str,
    f: impl FnOnce(&candle_core::CudaStorage, &Layout) -> Result<R>,
) -> Result<R> {
    let (storage, layout) = g.storage_and_layout();
    let candle_core::Storage::Cuda(s) = &*storage else { bail!("{what}: operands on different devices") };
    check_held_gradient(layout, like, what)?;
    f(s, layout)
}

fn check_held_gradient(g: &Layout, like: &Layout, what: &str) -> Result<()> {
    if g.dims() != like.dims() || !g.is_contiguous() {
        bail!("{what}: a gradient {:?} for an output {:?}", g.dims(), like.dims());
    }
    Ok(())
}

/// A fused op's CPU computation, written once for f32 and f64.
pub trait RealKernel {
    /// The output's elements from the operands' elements (each contiguous, as laid out).
    fn run<T: Real>(&self, operands: &[&[T]]) -> Vec<T>;
}

/// Runs `kernel` on the operands (each read from its layout's start offset, contiguous) in
/// their float type, that of the first: f32 or f64. `what` names the op in errors.
pub fn run_cpu<K: RealKernel>(kernel: &K, operands: &[(&CpuStorage, &Layout)], what: &str) -> Result<CpuStorage> {
    fn typed<T: Real, K: RealKernel>(kernel: &K, operands: &[(&CpuStorage, &Layout)], what: &str) -> Result<Vec<T>> {
        let slices = operands
            .iter()
            .map(|(s, l)| {
                let Some(all) = T::as_slice(s) else { bail!("{what}: operands of mixed types ({:?})", s.dtype()) };
                Ok(&all[l.start_offset()..l.start_offset() + l.shape().elem_count()])
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(kernel.run(&slices))
    }
    match operands.first().map(|(s, _)| s) {
        Some(CpuStorage::F32(_)) => Ok(CpuStorage::F32(typed(kernel, operands, what)?)),
        Some(CpuStorage::F64(_)) => Ok(CpuStorage::F64(typed(kernel, operands, what)?)),
        Some(other) => bail!("{what}: {:?} operands (f32 or f64 only)", other.dtype()),
        None => bail!("{what}: no operands"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memctl_cuda_fused_runs_none_the_checked_the_named_or_all() {
        let runs = |v: Option<&str>, op: OnCuda| CudaFused::from_setting(v).runs(op);
        for op in ALL {
            assert!(!runs(Some("0"), op));
            assert!(runs(Some("1"), op));
            assert_eq!(runs(None, op), op.checked);
            assert_eq!(runs(Some("no such kernel"), op), op.checked);
        }
        // A change not yet checked runs only when named (or with `1`), and naming another
        // does not run it.
        const NEW: OnCuda = OnCuda { name: "new_kernel", checked: false };
        assert!(!runs(None, NEW) && runs(Some("scale, new_kernel"), NEW) && runs(Some("1"), NEW));
        assert!(!runs(Some("scale"), NEW) && runs(Some("scale"), LAYER_NORM));
        // A leading `-` leaves one out of the checked set, and only that one.
        assert!(!runs(Some("-scale"), SCALE) && !runs(Some("new_kernel, - scale"), SCALE));
        assert!(runs(Some("-scale"), SPLIT_SUMS) && runs(Some("-scale,new_kernel"), NEW));
        let names: std::collections::BTreeSet<_> = ALL.iter().map(|op| op.name).collect();
        assert_eq!(names.len(), ALL.len(), "names are unique");
    }
}

/// What the fused ops' tests share: each compares its op with the candle ops it replaces,
/// values and candle's gradients, in f64.
#[cfg(test)]
pub(crate) mod testing {
    use candle_core::{DType, Device, Result, Tensor, Var};

    /// A variable of normal values times `scale`, f64, on the CPU.
    pub fn var(dims: &[usize], scale: f64) -> Result<Var> {
        Var::from_tensor(&(Tensor::randn(0.0, 1.0, dims, &Device::Cpu)?.to_dtype(DType::F64)? * scale)?)
    }

    /// Asserts that each of `fused` equals its counterpart in `plain` within `tolerance`, and so
    /// do the gradients of `vars` under a loss that weighs every output element at random.
    pub fn assert_fused_matches(vars: &[&Var], fused: &[Tensor], plain: &[Tensor], tolerance: f64) -> Result<()> {
        let largest = |a: &Tensor, b: &Tensor| a.sub(b)?.abs()?.max_all()?.to_scalar::<f64>();
        let mut loss_fused = Tensor::zeros((), DType::F64, &Device::Cpu)?;
        let mut loss_plain = loss_fused.clone();
        for (f, p) in fused.iter().zip(plain) {
            let diff = largest(f, p)?;
            assert!(diff < tolerance, "forward differs by {diff}");
            let weights = Tensor::randn(0.0, 1.0, f.dims(), &Device::Cpu)?.to_dtype(DType::F64)?;
            loss_fused = loss_fused.add(&f.mul(&weights)?.sum_all()?)?;
            loss_plain = loss_plain.add(&p.mul(&weights)?.sum_all()?)?;
        }
        let (gf, gp) = (loss_fused.backward()?, loss_plain.backward()?);
        for v in vars {
            let (f, p) = (gf.get(v).expect("fused gradient"), gp.get(v).expect("autograd gradient"));
            assert_eq!(f.dims(), v.dims());
            let diff = largest(f, p)?;
            assert!(diff < tolerance, "gradient differs by {diff}");
        }
        Ok(())
    }
}
