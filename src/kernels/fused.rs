//! What memctl's fused candle ops (a custom op with its own backward: `lstm_cell_op`,
//! `layer_norm_op`) share: where they run, and a count of their CUDA launches.
//!
//! On the CPU they run everywhere the candle path does (evaluation, `Autograd::Candle`, the
//! tape's per-node fallback). On CUDA a kernel runs by default once `memctl doctor --check` has
//! passed with it on a GPU ([`OnCuda::Checked`]); a newer one is opt-in until then.
//! `MEMCTL_CUDA_FUSED=1` runs every fused kernel on CUDA, the unchecked ones too (what
//! `doctor --check` is run with to check them); `MEMCTL_CUDA_FUSED=0` runs none (candle's own
//! kernels, to compare).

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, DType, Device, Layout, Result, Tensor, bail};

use super::real::Real;

/// Whether a fused kernel has passed `memctl doctor --check` on a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnCuda {
    /// Checked on a GPU (which build and which card: docs/performance.md): runs by default.
    Checked,
    /// Compiled but not yet checked on a GPU: runs only with `MEMCTL_CUDA_FUSED=1`.
    Unchecked,
}

/// Which fused kernels run on CUDA, from `MEMCTL_CUDA_FUSED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CudaFused {
    /// `0`: none.
    None,
    /// Unset (or any other value): the checked ones.
    Checked,
    /// `1`: all.
    All,
}

/// Whether the candle path uses the fused op standing `on_cuda` for `t`: on the CPU always; on
/// CUDA (f32 only) by `MEMCTL_CUDA_FUSED` (the module's header); never on other devices.
pub fn used_for(t: &Tensor, on_cuda: OnCuda) -> bool {
    match t.device() {
        Device::Cpu => true,
        Device::Cuda(_) => t.dtype() == DType::F32 && cuda_uses(on_cuda),
        _ => false,
    }
}

/// Whether CUDA runs a kernel (or a change to candle's) standing `on_cuda`, by `MEMCTL_CUDA_FUSED`.
pub fn cuda_uses(on_cuda: OnCuda) -> bool {
    CUDA_FUSED.runs(on_cuda)
}

/// The vendored candle-core's split sums (`candle_core::cuda_backend::set_split_sums`,
/// vendor/README.md): a float sum with few outputs runs over many blocks in two passes instead
/// of one block per output. Compiled, not yet checked on a GPU.
pub const SPLIT_SUMS_ON_CUDA: OnCuda = OnCuda::Unchecked;

/// `MEMCTL_CUDA_FUSED`, read once: `used_for` runs for every op of every eager time step.
static CUDA_FUSED: LazyLock<CudaFused> =
    LazyLock::new(|| CudaFused::from_setting(std::env::var_os("MEMCTL_CUDA_FUSED").as_deref()));

impl CudaFused {
    fn from_setting(value: Option<&std::ffi::OsStr>) -> CudaFused {
        match value {
            Some(v) if v == "0" => CudaFused::None,
            Some(v) if v == "1" => CudaFused::All,
            _ => CudaFused::Checked,
        }
    }

    fn runs(self, on_cuda: OnCuda) -> bool {
        match self {
            CudaFused::None => false,
            CudaFused::Checked => on_cuda == OnCuda::Checked,
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
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn memctl_cuda_fused_runs_none_the_checked_or_all() {
        let runs = |v: Option<&str>, on: OnCuda| CudaFused::from_setting(v.map(OsStr::new)).runs(on);
        for on in [OnCuda::Checked, OnCuda::Unchecked] {
            assert!(!runs(Some("0"), on));
            assert!(runs(Some("1"), on));
        }
        for unset_or_other in [None, Some(""), Some("yes")] {
            assert!(runs(unset_or_other, OnCuda::Checked));
            assert!(!runs(unset_or_other, OnCuda::Unchecked));
        }
    }
}
