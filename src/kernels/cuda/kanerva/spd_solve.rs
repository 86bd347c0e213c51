//! Batched solve `X = A⁻¹ B` for symmetric positive definite `A`, differentiable.
//!
//! candle 0.11 has no linear solve, so this is a [`CustomOp2`]: the forward factorises each
//! `A = L Lᵀ` (Cholesky, in f64 whatever the tensor's dtype) and does two triangular solves;
//! the backward is the standard one for a symmetric system,
//! `grad_B = A⁻¹ grad_X` (two more triangular solves with the factors kept from the forward)
//! and `grad_A = −½ (grad_B Xᵀ + X grad_Bᵀ)`.
//! The forward reads only the lower triangle of `A`; the symmetrised `grad_A` is the gradient
//! for every symmetric perturbation of `A`, which is what callers produce (e.g. `RᵀR + λI`).
//!
//! Shapes: `A: [..., n, n]`, `B: [..., n, r]` → `[..., n, r]`; the leading axes are a batch,
//! handled as one op (the factorisations run in parallel on the CPU thread pool).
//! On CUDA the op is one kernel, a block per system (`cuda/spd_solve.cu`, the same
//! factorisation and substitutions), where its switch runs it (`SPD_SOLVE`); its
//! backward solves again (the factors stay on the device only for the kernel's life).
//! Elsewhere [`spd_solve`] falls back to [`spd_solve_composed`]: Gauss–Jordan elimination in
//! plain tensor ops, which candle differentiates on any device, some ten kernels a column
//! forward and three times as many backward. A test checks that the two agree.
//!
//! Not a `FusedKernel` (`cuda::kernel`): the CPU op keeps its forward's Cholesky factors for its
//! backward (state per application), refuses a matrix that is not positive definite with an
//! error where the kernel writes NaN, and the kernel takes a global f64 workspace besides its
//! output where a block's shared memory is too small.

use std::sync::OnceLock;

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, D, DType, Layout, Result, Shape, Tensor, WithDType, bail};
use rayon::prelude::*;

use crate::kernels::cpu::cholesky::{cholesky_into, cholesky_solve_in_place};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// PKM (k = 4) 12.16 → 3.92 ms a step (H100, 2026-11-26).
pub const SPD_SOLVE: Switch = Switch::on("spd_solve");
inventory::submit! { SPD_SOLVE }

/// `X = A⁻¹ B` for a batch of SPD matrices `A: [..., n, n]` and right-hand sides `B: [..., n, r]`.
pub fn spd_solve(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (ad, bd) = (a.dims(), b.dims());
    if ad.len() < 2 || bd.len() != ad.len() || ad[ad.len() - 1] != ad[ad.len() - 2] {
        bail!("spd_solve: A must be [..., n, n] and B [..., n, r] of the same rank, got {:?} and {:?}", ad, bd);
    }
    let n = ad[ad.len() - 1];
    let lead = &ad[..ad.len() - 2];
    if &bd[..bd.len() - 2] != lead || bd[bd.len() - 2] != n {
        bail!("spd_solve: A {:?} and B {:?} do not match", ad, bd);
    }
    let r = bd[bd.len() - 1];
    let batch: usize = lead.iter().product();
    let a3 = a.reshape((batch, n, n))?.contiguous()?;
    let b3 = b.reshape((batch, n, r))?.contiguous()?;
    let x = if crate::kernels::cuda::switches::used_for(a, SPD_SOLVE) {
        a3.apply_op2(&b3, SpdSolve::default())?
    } else {
        spd_solve_composed(&a3, &b3)?
    };
    x.reshape(bd)
}

/// `X = A⁻¹ B` for `A: [batch, n, n]` (SPD) and `B: [batch, n, r]`, in plain tensor ops:
/// Gauss–Jordan elimination on `[A | B]` without pivoting (stable for SPD matrices), one
/// column per iteration. O(batch · n² (n + r)) like the Cholesky path, but n small ops instead
/// of one fused kernel: the device-generic fallback and the fused op's reference.
pub fn spd_solve_composed(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (n, r) = (a.dim(1)?, b.dim(2)?);
    let mut m = Tensor::cat(&[a, b], 2)?; // [batch, n, n + r]
    for k in 0..n {
        let row = m.narrow(1, k, 1)?;
        let row = row.broadcast_div(&row.narrow(2, k, 1)?)?; // pivot row scaled to a 1 on the diagonal
        let col = m.narrow(2, k, 1)?; // [batch, n, 1]
        // Eliminate column k from every row (row k becomes 0), then put the scaled row back.
        let onehot: Vec<f32> = (0..n).map(|i| if i == k { 1.0 } else { 0.0 }).collect();
        let e_k = Tensor::from_vec(onehot, (1, n, 1), m.device())?.to_dtype(m.dtype())?;
        m = m.broadcast_sub(&col.broadcast_mul(&row)?)?.broadcast_add(&e_k.broadcast_mul(&row)?)?;
    }
    m.narrow(2, n, r)
}

/// The custom op on rank-3, contiguous operands. One instance per application: it keeps the
/// Cholesky factors of its forward for the backward.
#[derive(Default)]
struct SpdSolve {
    factors: OnceLock<Vec<f64>>,
}

impl CustomOp2 for SpdSolve {
    fn name(&self) -> &'static str {
        "spd-solve"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (batch, n, _) = l1.shape().dims3()?;
        let (_, _, r) = l2.shape().dims3()?;
        let (Some((a0, a1)), Some((b0, b1))) = (l1.contiguous_offsets(), l2.contiguous_offsets()) else {
            bail!("spd-solve: operands must be contiguous");
        };
        let (out, factors) = match (s1, s2) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => {
                let (x, l) = solve_batch(&a[a0..a1], &b[b0..b1], batch, n, r)?;
                (CpuStorage::F32(x), l)
            }
            (CpuStorage::F64(a), CpuStorage::F64(b)) => {
                let (x, l) = solve_batch(&a[a0..a1], &b[b0..b1], batch, n, r)?;
                (CpuStorage::F64(x), l)
            }
            _ => bail!("spd-solve: A and B must both be f32 or both f64, got {:?} and {:?}", s1.dtype(), s2.dtype()),
        };
        let _ = self.factors.set(factors);
        Ok((out, l2.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s1: &CudaStorage, l1: &Layout, s2: &CudaStorage, l2: &Layout) -> Result<(CudaStorage, Shape)> {
        let (batch, n, _) = l1.shape().dims3()?;
        let (_, _, r) = l2.shape().dims3()?;
        if !l1.is_contiguous() || !l2.is_contiguous() {
            bail!("spd-solve: operands must be contiguous");
        }
        if s1.dtype() != DType::F32 || s2.dtype() != DType::F32 {
            bail!("spd-solve: the CUDA kernel takes f32, got {:?} and {:?}", s1.dtype(), s2.dtype());
        }
        let x = cuda::spd_solve((s1, l1), (s2, l2), batch, n, r)?;
        crate::kernels::cuda::fused::record_launch("spd_solve");
        Ok((x, l2.shape().clone()))
    }

    /// On the CPU the forward's factors solve `grad_B`; on CUDA (no factors kept) the kernel
    /// factorises again, as cheap as the two substitutions at these sizes.
    fn bwd(&self, a: &Tensor, _b: &Tensor, x: &Tensor, grad_x: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let grad_b = match self.factors.get() {
            Some(l) => {
                let (batch, n, r) = grad_x.dims3()?;
                let mut g = grad_x.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
                if n > 0 && r > 0 {
                    g.par_chunks_mut(n * r)
                        .zip(l.par_chunks(n * n))
                        .for_each(|(y, l)| cholesky_solve_in_place(l, n, y, r));
                }
                Tensor::from_vec(g, (batch, n, r), grad_x.device())?.to_dtype(grad_x.dtype())?
            }
            None => a.apply_op2_no_bwd(&grad_x.contiguous()?, &SpdSolve::default())?,
        };
        let gbx = grad_b.matmul(&x.t()?)?;
        let grad_a = ((&gbx + gbx.t()?)? * -0.5)?;
        Ok((Some(grad_a), Some(grad_b)))
    }
}

/// Solves every system of the batch; `a` holds `batch` row-major `n × n` matrices, `b` holds
/// `batch` row-major `n × r` right-hand sides. Returns the solutions and the Cholesky factors.
fn solve_batch<T: WithDType>(a: &[T], b: &[T], batch: usize, n: usize, r: usize) -> Result<(Vec<T>, Vec<f64>)> {
    let mut out = vec![T::zero(); batch * n * r];
    let mut factors = vec![0.0; batch * n * n];
    if n == 0 || r == 0 {
        return Ok((out, factors));
    }
    out.par_chunks_mut(n * r).zip(factors.par_chunks_mut(n * n)).enumerate().try_for_each(
        |(i, (x, l))| -> Result<()> {
            let ai: Vec<f64> = a[i * n * n..(i + 1) * n * n].iter().map(|v| v.to_f64()).collect();
            if !cholesky_into(&ai, n, l) {
                bail!("spd-solve: matrix {i} of the batch is not positive definite");
            }
            let mut y: Vec<f64> = b[i * n * r..(i + 1) * n * r].iter().map(|v| v.to_f64()).collect();
            cholesky_solve_in_place(l, n, &mut y, r);
            for (o, v) in x.iter_mut().zip(&y) {
                *o = T::from_f64(*v);
            }
            Ok(())
        },
    )?;
    Ok((out, factors))
}

/// `λ I` of size `n`, broadcastable against `[..., n, n]`.
pub fn scaled_eye(n: usize, lambda: f64, like: &Tensor) -> Result<Tensor> {
    Tensor::eye(n, like.dtype(), like.device())? * lambda
}

/// `Aᵀ A` over the last two axes: `[..., p, n]` → `[..., n, n]`.
pub fn gram(a: &Tensor) -> Result<Tensor> {
    a.transpose(D::Minus2, D::Minus1)?.contiguous()?.matmul(a)
}

/// `spd_solve.cu`: a block per system, a warp for small systems and up to 256 threads where a
/// column or a row has more to share; the factor and right-hand sides (`n² + n r` doubles) in
/// shared memory when they fit a block's, else in a global workspace (`shared_bytes` 0 and
/// `false`).
pub fn launch_shape(batch: u32, n: usize, r: usize) -> (LaunchShape, bool) {
    let bytes = (n * n + n * r) * std::mem::size_of::<f64>();
    let use_shared = bytes <= crate::kernels::cuda::fused::BLOCK_SHARED_BYTES;
    let threads = n.max(n * r).div_ceil(32).clamp(1, 8) as u32 * 32;
    (LaunchShape { blocks: batch, threads, shared_bytes: if use_shared { bytes as u32 } else { 0 } }, use_shared)
}

/// The launch of its CUDA kernels, with the `cuda` feature.
#[cfg(feature = "cuda")]
mod cuda {
    use crate::kernels::cuda::modules::{SPD_SOLVE, launch_config};
    use candle_core::cuda_backend::WrapErr;
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    use candle_core::{CudaStorage, Layout, Result};

    /// `X = A⁻¹ B` by `spd_solve.cu`: `a` `[batch, n, n]` (SPD, lower triangle read) and `b`
    /// `[batch, n, r]`, f32, contiguous as laid out, into a new `[batch, n, r]` buffer. One block
    /// per system; its factor and right-hand sides (in f64) in shared memory where they fit,
    /// otherwise in a global workspace allocated here.
    pub(super) fn spd_solve(
        (a, la): (&CudaStorage, &Layout),
        (b, lb): (&CudaStorage, &Layout),
        batch: usize,
        n: usize,
        r: usize,
    ) -> Result<CudaStorage> {
        let per_system = n * n + n * r;
        let (Ok(n32), Ok(r32), Ok(blocks), Ok(_)) =
            (i32::try_from(n), i32::try_from(r), u32::try_from(batch), i32::try_from(per_system))
        else {
            candle_core::bail!("spd_solve: {batch} systems of {n} × {n} are more than the kernel indexes")
        };
        let dev = a.device.clone();
        // SAFETY: the kernel writes every element of every system's solution.
        let out = unsafe { dev.alloc::<f32>(batch * n * r)? };
        if batch == 0 || n == 0 || r == 0 {
            return Ok(CudaStorage::wrap_cuda_slice(out, dev));
        }
        let a_view = a.as_cuda_slice::<f32>()?.slice(la.start_offset()..la.start_offset() + batch * n * n);
        let b_view = b.as_cuda_slice::<f32>()?.slice(lb.start_offset()..lb.start_offset() + batch * n * r);
        let (shape, use_shared) = super::launch_shape(blocks, n, r);
        let func = SPD_SOLVE.function(&dev, "spd_solve_f32")?;
        let mut builder = func.builder();
        builder.arg(&a_view).arg(&b_view).arg(&out);
        // The workspace, when the block's shared memory is too small: freed on the stream after
        // the kernel (stream-ordered), so dropping it at the end of this function is safe.
        // SAFETY: the kernel writes each element of its system's share before reading it.
        let global_work = if use_shared { None } else { Some(unsafe { dev.alloc::<f64>(batch * per_system)? }) };
        let null: u64 = 0;
        match &global_work {
            Some(work) => builder.arg(work),
            None => builder.arg(&null),
        };
        let flag = i32::from(use_shared);
        builder.arg(&n32).arg(&r32).arg(&flag);
        // SAFETY: spd_solve.cu's kernel takes A, B, X, the workspace, n, r and the shared flag, in
        // this order; each block reads its system's n² + n r elements and writes its n r, and
        // touches only its own share of the workspace (batch · (n² + n r) doubles) or its shared
        // memory (`shape.shared_bytes`, requested above).
        unsafe { builder.launch(launch_config(shape)) }.w()?;
        Ok(CudaStorage::wrap_cuda_slice(out, dev))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Var};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    fn normal(rng: &mut ChaCha8Rng, dims: &[usize]) -> Tensor {
        use rand::Rng;
        let n = dims.iter().product();
        let v: Vec<f64> = (0..n).map(|_| rng.sample::<f64, _>(rand_distr::StandardNormal)).collect();
        Tensor::from_vec(v, dims, &Device::Cpu).unwrap()
    }

    /// `P Pᵀ + I`: symmetric positive definite, a smooth function of `P`.
    fn spd(p: &Tensor) -> Tensor {
        let n = p.dim(D::Minus1).unwrap();
        p.matmul(&p.t().unwrap()).unwrap().broadcast_add(&scaled_eye(n, 1.0, p).unwrap()).unwrap()
    }

    #[test]
    fn solution_satisfies_the_system_and_matches_a_direct_solution() {
        // Hand case: A = [[4, 2], [2, 3]], b = [2, 1]: det 8, A⁻¹ b = [3·2 − 2·1, −2·2 + 4·1] / 8.
        let dev = Device::Cpu;
        let a = Tensor::new(&[[[4.0f64, 2.0], [2.0, 3.0]]], &dev).unwrap();
        let b = Tensor::new(&[[[2.0f64], [1.0]]], &dev).unwrap();
        let x = spd_solve(&a, &b).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
        assert!((x[0] - 0.5).abs() < 1e-14 && x[1].abs() < 1e-14, "{x:?}");

        // Random batch [2, 3] of 5×5 systems with 4 right-hand sides: A X = B.
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let a = spd(&normal(&mut rng, &[2, 3, 5, 5]));
        let b = normal(&mut rng, &[2, 3, 5, 4]);
        let x = spd_solve(&a, &b).unwrap();
        assert_eq!(x.dims(), &[2, 3, 5, 4]);
        let residual = (a.matmul(&x).unwrap() - &b).unwrap().abs().unwrap().max_all().unwrap();
        assert!(residual.to_scalar::<f64>().unwrap() < 1e-12);

        // f32 agrees with f64 to f32 precision.
        let x32 = spd_solve(&a.to_dtype(DType::F32).unwrap(), &b.to_dtype(DType::F32).unwrap()).unwrap();
        let diff = (x32.to_dtype(DType::F64).unwrap() - &x).unwrap().abs().unwrap().max_all().unwrap();
        assert!(diff.to_scalar::<f64>().unwrap() < 1e-4);
    }

    /// `L Lᵀ = A` with `L` lower triangular, reading only `A`'s lower triangle, whatever `l`
    /// held before.
    #[test]
    fn the_factor_is_lower_triangular_and_reproduces_the_matrix() {
        for n in [1, 2, 5, 13] {
            let b: Vec<f64> = (0..n * n).map(|i| ((i * 7 + 3) as f64 * 0.37).sin()).collect();
            let mut a = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    a[i * n + j] =
                        (0..n).map(|k| b[i * n + k] * b[j * n + k]).sum::<f64>() + if i == j { 0.5 } else { 0.0 };
                }
            }
            let mut upper_garbage = a.clone();
            (0..n).for_each(|i| (i + 1..n).for_each(|j| upper_garbage[i * n + j] = 1e3));
            let mut l = vec![f64::NAN; n * n];
            assert!(cholesky_into(&upper_garbage, n, &mut l));
            for i in 0..n {
                for j in 0..n {
                    if j > i {
                        assert_eq!(l[i * n + j], 0.0, "n = {n}: upper entry ({i}, {j})");
                    }
                    let llt: f64 = (0..n).map(|k| l[i * n + k] * l[j * n + k]).sum();
                    assert!((llt - a[i * n + j]).abs() < 1e-12 * a[i * n + i].max(1.0), "n = {n}: ({i}, {j})");
                }
            }
        }
    }

    #[test]
    fn rejects_a_matrix_that_is_not_positive_definite() {
        let dev = Device::Cpu;
        let a = Tensor::new(&[[[1.0f64, 2.0], [2.0, 1.0]]], &dev).unwrap();
        let b = Tensor::new(&[[[1.0f64], [1.0]]], &dev).unwrap();
        let err = spd_solve(&a, &b).unwrap_err().to_string();
        assert!(err.contains("not positive definite"), "{err}");
    }

    #[test]
    fn gradients_match_finite_differences() {
        // loss = Σ W ⊙ solve(P Pᵀ + I, B): check d/dP (through the symmetric A) and d/dB.
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let p = Var::from_tensor(&normal(&mut rng, &[2, 4, 4])).unwrap();
        let b = Var::from_tensor(&normal(&mut rng, &[2, 4, 3])).unwrap();
        let w = normal(&mut rng, &[2, 4, 3]);
        let loss =
            |p: &Tensor, b: &Tensor| -> Tensor { (spd_solve(&spd(p), b).unwrap() * &w).unwrap().sum_all().unwrap() };
        let grads = loss(p.as_tensor(), b.as_tensor()).backward().unwrap();
        let h = 1e-6;
        for (var, is_p) in [(&p, true), (&b, false)] {
            let analytic = grads.get(var.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
            let base = var.as_tensor().flatten_all().unwrap().to_vec1::<f64>().unwrap();
            for c in 0..base.len() {
                let mut numeric = 0.0;
                for delta in [h, -h] {
                    let mut v = base.clone();
                    v[c] += delta;
                    let t = Tensor::from_vec(v, var.dims(), &Device::Cpu).unwrap();
                    let l = if is_p { loss(&t, b.as_tensor()) } else { loss(p.as_tensor(), &t) };
                    numeric += l.to_scalar::<f64>().unwrap() * delta.signum() / (2.0 * h);
                }
                let a = analytic[c];
                assert!(
                    (a - numeric).abs() <= 1e-6 + 1e-5 * a.abs().max(numeric.abs()),
                    "d loss / d {}[{c}]: autograd {a}, finite differences {numeric}",
                    if is_p { "P" } else { "B" }
                );
            }
        }
    }
}

#[cfg(test)]
mod composed_tests {
    use super::*;
    use candle_core::{Device, Var};

    /// The device-generic fallback computes the same solution and gradients as the fused op.
    #[test]
    fn composed_form_agrees_with_the_fused_op() -> Result<()> {
        let dev = Device::Cpu;
        let p = Tensor::randn(0f64, 1.0, (3, 4, 4), &dev)?;
        let eye = Tensor::eye(4, DType::F64, &dev)?.unsqueeze(0)?;
        let a = Var::from_tensor(&(p.matmul(&p.t()?)?.broadcast_add(&eye)?))?;
        let b = Var::from_tensor(&Tensor::randn(0f64, 1.0, (3, 4, 2), &dev)?)?;
        let w = Tensor::randn(0f64, 1.0, (3, 4, 2), &dev)?;
        let fused = a.as_tensor().apply_op2(b.as_tensor(), SpdSolve::default())?;
        let composed = spd_solve_composed(a.as_tensor(), b.as_tensor())?;
        let diff = (&fused - &composed)?.abs()?.max_all()?.to_scalar::<f64>()?;
        assert!(diff < 1e-10, "solutions differ by {diff}");
        let g_fused = (fused * &w)?.sum_all()?.backward()?;
        let g_comp = (composed * &w)?.sum_all()?.backward()?;
        // The fused op returns the symmetrised gradient for A: compare symmetric parts.
        let sym = |t: &Tensor| -> Result<Tensor> { (t + t.transpose(1, 2)?)? * 0.5 };
        let (ga, gb) = (g_fused.get(a.as_tensor()).unwrap(), g_fused.get(b.as_tensor()).unwrap());
        let (ca, cb) = (g_comp.get(a.as_tensor()).unwrap(), g_comp.get(b.as_tensor()).unwrap());
        let da = (sym(ga)? - sym(ca)?)?.abs()?.max_all()?.to_scalar::<f64>()?;
        let db = (gb - cb)?.abs()?.max_all()?.to_scalar::<f64>()?;
        assert!(da < 1e-9 && db < 1e-9, "gradients differ by {da} (A) and {db} (B)");
        Ok(())
    }
}
