//! What memctl's fused candle ops (a custom op with its own backward, one module per family
//! folder: `layers::lstm_cell`, `layers::gru_cell`, `layers::layer_norm`, `sam::item_gate`,
//! `sam::sam_attend`, `nam::head_move`, `kanerva::spd_solve`, `nam::nam_write`, …) and its fused
//! optimiser updates (`optim::optim_update`) share: a count of their CUDA launches, the CPU
//! computation's float types, and the shared memory a block may ask for. Where each runs is
//! its switch's (`kernels::cuda::switches`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Layout, Result, bail};

use crate::kernels::cpu::real::Real;

/// The dynamic shared memory a fused kernel may ask of a block: a block may take 48 KiB in all
/// without opting in to more (every GPU since compute capability 7.0), and the kernel's own
/// static shared memory comes out of that.
pub const BLOCK_SHARED_BYTES: usize = 47 * 1024;

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
