//! `memctl doctor --check`'s check of the batched SPD solve (`kernels::cuda::kanerva::spd_solve`)
//! on a device: solutions and both gradients against the solve in f64 on the CPU.
//!
//! The model check (`check_pkm`) solves systems of one size only. These reach the sizes the
//! paper specs use (PKM's `m / k` of 8 and 32 columns, one right-hand side), several
//! right-hand sides, a system of one, and one too large for a CUDA block's shared memory (the
//! kernel's global-memory workspace).

use candle_core::{D, DType, Device, Result, Tensor, Var};

use super::sums_check::pseudo_random;
use crate::kernels::cuda::kanerva::spd_solve::spd_solve;

/// Each case: systems in the batch, `n` (the matrix's size), `r` (right-hand sides).
pub(super) const CASES: &[(usize, usize, usize)] = &[(96, 8, 1), (24, 32, 1), (5, 3, 4), (3, 1, 2), (4, 80, 3)];

/// The largest difference over every case of the solution and the gradients of `A` and `B`
/// (under a loss that weighs the solution's elements at random), each relative to the largest
/// magnitude of its reference, and how many cases ran.
pub fn check(device: &Device) -> Result<(f64, usize)> {
    check_with(device, spd_solve)
}

/// [`check`] of the solver `solve` (on `device`, f32) against `spd_solve` in f64 on the CPU.
fn check_with(device: &Device, solve: Solver) -> Result<(f64, usize)> {
    let mut worst = 0f64;
    for (case, &(batch, n, r)) in CASES.iter().enumerate() {
        let seed = 100 * (case as u64 + 1);
        let p = Tensor::from_vec(pseudo_random(batch * n * n, seed), (batch, n, n), &Device::Cpu)?;
        // P Pᵀ / n + I: symmetric, eigenvalues at least 1, so f32 loses little.
        let eye = Tensor::eye(n, DType::F32, &Device::Cpu)?.unsqueeze(0)?;
        let a = (p.matmul(&p.t()?)? / n as f64)?.broadcast_add(&eye)?;
        let b = Tensor::from_vec(pseudo_random(batch * n * r, seed + 1), (batch, n, r), &Device::Cpu)?;
        let weights = Tensor::from_vec(pseudo_random(batch * n * r, seed + 2), (batch, n, r), &Device::Cpu)?;
        let on_device = solve_with_gradients(solve, &a, &b, &weights, device)?;
        let to_f64 = |t: &Tensor| t.to_dtype(DType::F64);
        let reference = solve_with_gradients(spd_solve, &to_f64(&a)?, &to_f64(&b)?, &to_f64(&weights)?, &Device::Cpu)?;
        for (got, want) in on_device.iter().zip(&reference) {
            let scale = want.abs()?.max_all()?.to_scalar::<f64>()?.max(f64::MIN_POSITIVE);
            let difference = (to_f64(got)?.to_device(&Device::Cpu)? - want)?.abs()?.max_all()?.to_scalar::<f64>()?;
            let relative = difference / scale;
            worst = if relative.is_nan() { f64::NAN } else { worst.max(relative) };
        }
    }
    Ok((worst, CASES.len()))
}

/// A batched solve `X = A⁻¹ B` of `[batch, n, n]` and `[batch, n, r]`.
type Solver = fn(&Tensor, &Tensor) -> Result<Tensor>;

/// `X = A⁻¹ B` by `solve` on `device` and the gradients of `Σ weights ⊙ X` for `A`
/// (symmetrised, as the op gives it) and `B`.
fn solve_with_gradients(
    solve: Solver,
    a: &Tensor,
    b: &Tensor,
    weights: &Tensor,
    device: &Device,
) -> Result<[Tensor; 3]> {
    let a = Var::from_tensor(&a.to_device(device)?)?;
    let b = Var::from_tensor(&b.to_device(device)?)?;
    let x = solve(a.as_tensor(), b.as_tensor())?;
    let grads = (&x * weights.to_device(device)?)?.sum_all()?.backward()?;
    let missing = || candle_core::Error::Msg("spd_solve: no gradient".into());
    let grad_a = grads.get(a.as_tensor()).ok_or_else(missing)?;
    // Only the symmetric part of A's gradient is defined (the op reads one triangle).
    let grad_a = ((grad_a + grad_a.transpose(D::Minus2, D::Minus1)?)? * 0.5)?;
    let grad_b = grads.get(b.as_tensor()).ok_or_else(missing)?.clone();
    Ok([x, grad_a, grad_b])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU without the fused solve (`spd_solve` unchecked or off) runs the composed
    /// Gauss–Jordan elimination in f32: the check's cases are well conditioned enough that it
    /// passes too, so a failure there names a wrong kernel, not the method. (A wrong solver
    /// fails: the check of one that drops the last right-hand side's row is far off.)
    #[test]
    fn the_composed_fallback_passes_the_check_in_f32_and_a_wrong_solver_fails_it() -> Result<()> {
        use crate::kernels::cuda::kanerva::spd_solve::spd_solve_composed;
        let (worst, _) = check_with(&Device::Cpu, spd_solve_composed)?;
        assert!(worst <= super::super::device_check::TOLERANCE, "composed: largest relative difference {worst}");
        fn wrong(a: &Tensor, b: &Tensor) -> Result<Tensor> {
            let x = spd_solve(a, b)?;
            let n = x.dim(1)?;
            Tensor::cat(&[x.narrow(1, 0, n - 1)?, x.narrow(1, n - 1, 1)?.zeros_like()?], 1)
        }
        let (worst, _) = check_with(&Device::Cpu, wrong)?;
        assert!(worst > 1e-2, "a wrong solver passed with {worst}");
        Ok(())
    }

    /// The check's own solve and gradients, on a case worked by hand: `A = [[2, 1], [1, 2]]`,
    /// `A⁻¹ = [[2, −1], [−1, 2]] / 3`, `b = [1, 0]`, weights all ones.
    #[test]
    fn the_check_solves_and_differentiates_a_hand_case() -> Result<()> {
        let dev = Device::Cpu;
        let a = Tensor::new(&[[[2.0f64, 1.0], [1.0, 2.0]]], &dev)?;
        let b = Tensor::new(&[[[1.0f64], [0.0]]], &dev)?;
        let weights = Tensor::ones((1, 2, 1), DType::F64, &dev)?;
        let [x, grad_a, grad_b] = solve_with_gradients(spd_solve, &a, &b, &weights, &dev)?;
        let close = |t: &Tensor, want: &[f64]| -> Result<()> {
            let got = t.flatten_all()?.to_vec1::<f64>()?;
            assert!(got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-12), "{got:?} against {want:?}");
            Ok(())
        };
        close(&x, &[2.0 / 3.0, -1.0 / 3.0])?;
        // d/dB of Σ X = A⁻ᵀ 1 = [1, 1] / 3; d/dA = −(A⁻ᵀ 1) Xᵀ, symmetrised.
        close(&grad_b, &[1.0 / 3.0, 1.0 / 3.0])?;
        let (g, x0, x1) = (1.0 / 3.0, 2.0 / 3.0, -1.0 / 3.0);
        close(&grad_a, &[-g * x0, -g * (x0 + x1) / 2.0, -g * (x0 + x1) / 2.0, -g * x1])?;
        Ok(())
    }
}
