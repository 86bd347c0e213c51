//! `tanh(x)` as one candle op whose backward reads its output, for the device-generic path
//! (candle's autograd: the GPU): `d x = g (1 − y²)` in one kernel, where candle's backward of
//! `tanh` is four (a square, an affine map, a product and a subtraction), each a pass over the
//! tensor. STM's gated write takes `tanh(M)` of its memory at every time step, RMC's gate of
//! its memory and its new rows, OPA of its pair products.
//!
//! Where it runs is its switch's rule (`kernels::cuda::switches`: the CPU always; on CUDA by its
//! standing, [`TANH`]); the CUDA kernels are `src/kernels/cuda/layers/tanh.cu`.

use candle_core::{Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries, two_passes};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// Off until a GPU measures the steps it acts on with and without it.
pub const TANH: Switch = Switch::awaits_gpu(
    "tanh",
    "STM A's and B's step, alone and 16 packed, with and without it (`bench specs/bench/stm.mem stm_a --device cuda`)",
);
inventory::submit! { TANH }

/// `tanh(x)`, as one fused op where its switch runs it (and the kernel's int counts it), else
/// candle's.
pub fn tanh(x: &Tensor) -> Result<Tensor> {
    let fits = x.device().is_cpu() || i32::try_from(x.elem_count()).is_ok();
    if fits && crate::kernels::cuda::switches::used_for(x, TANH) {
        return Fused(Tanh::Forward).apply(&[x]);
    }
    x.tanh()
}

two_passes! {
    /// The two passes: `x → tanh(x)` and, for its backward, `(y, g) → g (1 − y²)`.
    pub enum Tanh
}

impl FusedKernel for Tanh {
    /// The elements.
    type Sizes = usize;

    entries! { TANH: Tanh::Forward => "tanh_fwd", Tanh::Backward => "tanh_bwd" }

    /// `x`; backward `y` and `g` of one shape.
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, usize)> {
        match (self, operands) {
            (Tanh::Forward, &[x]) => Ok((x.shape().clone(), x.shape().elem_count())),
            (Tanh::Backward, &[y, g]) if y.dims() == g.dims() => Ok((y.shape().clone(), y.shape().elem_count())),
            _ => bail!(
                "the fused tanh: operands {:?} for {}",
                operands.iter().map(|l| l.dims()).collect::<Vec<_>>(),
                self.entry()
            ),
        }
    }

    /// The forward in f64, rounded: smooth and monotone as CUDA's `tanhf`, where the CPU
    /// tape's fast `f32` tanh switches formulas at |x| = 0.625 and magnifies a last-bit
    /// difference in its input (a pack's products round otherwise than a trial's alone).
    fn cpu<T: Real>(&self, _n: usize, operands: &[&[T]]) -> Vec<T> {
        match self {
            Tanh::Forward => operands[0].iter().map(|&v| T::from_f64(v.to_f64().tanh())).collect(),
            Tanh::Backward => operands[0].iter().zip(operands[1]).map(|(&y, &g)| g * (T::one() - y * y)).collect(),
        }
    }

    /// Grid-stride blocks of 256 threads, at most 65 535; `n` as the kernel's int.
    fn launch(&self, n: usize) -> Result<Launch> {
        let blocks = n.div_ceil(256).clamp(1, 65_535) as u32;
        Launch::with_ints(self.entry(), LaunchShape::blocks_of_256(blocks), &[n])
    }

    /// The backward reads the forward's output.
    fn backward(&self, _operands: &[&Tensor], y: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let Tanh::Forward = self else { bail!("the fused tanh's backward has no gradient of its own") };
        Ok(vec![Some(Fused(Tanh::Backward).apply_no_bwd(&[y, &grad.contiguous()?])?)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    #[test]
    fn the_fused_tanh_and_its_gradient_equal_candle_ops_and_autograd() -> Result<()> {
        let x = var(&[3, 5, 7], 2.0)?;
        assert_fused_matches(&[&x], &[tanh(&x)?], &[x.tanh()?], 1e-12)
    }
}
