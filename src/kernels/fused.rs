//! What memctl's fused candle ops (a custom op with its own backward: `lstm_cell_op`,
//! `layer_norm_op`) share: where they run, and a count of their CUDA launches.
//!
//! On the CPU they run everywhere the candle path does (evaluation, `Autograd::Candle`, the
//! tape's per-node fallback). On CUDA they run only when `MEMCTL_CUDA_FUSED=1`, until `memctl
//! doctor --check` has passed with them on a GPU; until then the default there is candle's
//! own kernels.

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, DType, Device, Layout, Result, Tensor, bail};

use super::real::Real;

/// Whether the candle path uses memctl's fused ops for `t`: on the CPU always; on CUDA (f32
/// only) when `MEMCTL_CUDA_FUSED=1`; never on other devices.
pub fn used_for(t: &Tensor) -> bool {
    match t.device() {
        Device::Cpu => true,
        Device::Cuda(_) => t.dtype() == DType::F32 && *CUDA_OPTED_IN,
        _ => false,
    }
}

/// `MEMCTL_CUDA_FUSED=1`, read once: `used_for` runs for every op of every eager time step.
static CUDA_OPTED_IN: LazyLock<bool> =
    LazyLock::new(|| std::env::var_os("MEMCTL_CUDA_FUSED").is_some_and(|v| v == "1"));

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
