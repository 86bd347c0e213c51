//! `namWR(M, k, v, pw, pe, heads = 1)`: the NAM write primitive (NAM paper §3.1).
//!
//! `WR(M, k, v, pw, pe) = M + pw · v kᵀ − pe · M k kᵀ` with a unit key: memctl applies
//! `k ← μ(k)` itself (L2 normalisation, eps 1e-12 as `F.normalize`), so a spec passes raw
//! projections, as LSAM's `WR(M, μ(k), v, pw, pw)` (§3.2). With `pw = pe = p` this is the
//! delta rule `M + p (v − M k) kᵀ`, and Theorem 3.1 holds: after `WR(M, k, v, 1, 1)`,
//! `RD(M', k, 1) = v`.
//!
//! Shapes (value × key, as the paper's `M ∈ R^{dv×dk}`):
//! - `heads = 1`: `M: [dv, dk]`, `k: [dk]`, `v: [dv]`;
//! - `heads = H`: `M: [H, dv/H, dk/H]` (one matrix per head, as the authors' LSAM state
//!   `B × H × dh × dh`), `k: [dk]` and `v: [dv]` split into `H` contiguous chunks (or given as
//!   `[H, dk/H]`, `[H, dv/H]`), `μ` applied per head;
//! - `pw`, `pe`: one probability per head `[H]`, or one scalar `[]` for every head.
//!
//! Output: the new memory, shaped like `M`. All heads and examples are one batched matmul
//! (`M k`) and one broadcast outer product; `O(dv·dk/H)` per example.
//! No squashing is applied to `pw`, `pe`: the spec passes probabilities (`sigmoid(..)`).

use candle_core::Tensor;

use super::heads::{check_per_head, per_head, split_size, to_heads};
use crate::kernels::blocks::nam::{batch_of, expand_batch, l2_normalize, write};
use crate::kernels::cpu::nam_manual::{normalize, normalize_backward, write_backward, write_forward};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

/// Checks `M` against `heads` and returns `(dv/H, dk/H)`.
pub(crate) fn memory_dims(args: &Args, heads: usize) -> Result<(usize, usize), PrimError> {
    let m = args.shape("M")?;
    match m[..] {
        [dv, dk] if heads == 1 => Ok((dv, dk)),
        [h, dv, dk] if h == heads => Ok((dv, dk)),
        _ => {
            let kind = PrimErrorKind::PerHead { what: "a memory", heads, layout: HeadLayout::Memory, found: m.clone() };
            let error = PrimError::new(kind).on("M");
            Err(if heads == 1 { error } else { error.hint(Hint::MemoryState { heads }) })
        }
    }
}

/// Checks that the vector `name` splits into `heads` chunks of `size` (the memory's axis).
pub(crate) fn check_split(
    args: &Args,
    name: &'static str,
    heads: usize,
    size: usize,
    what: &'static str,
) -> Result<(), PrimError> {
    let dh = split_size(args, name, heads, what)?;
    if dh != size {
        return Err(PrimError::new(PrimErrorKind::PerHeadSize { what, per_head: dh, axis: size })
            .on(name)
            .hint(Hint::HeadsShape { heads, size }));
    }
    Ok(())
}

primitive! {
    NamWr = "namWR",
    "NAM write M' = M + pw·v kᵀ − pe·M k kᵀ with k ← μ(k), per head (NAM §3.1)",
    args: [tensor("M"), tensor("k"), tensor("v"), tensor("pw"), tensor("pe"), int_or("heads", 1)],
    examples: [
        [("M", t(&[3, 4])), ("k", t(&[4])), ("v", t(&[3])), ("pw", t(&[])), ("pe", t(&[]))],
        [("M", t(&[2, 2, 3])), ("k", t(&[6])), ("v", t(&[4])), ("pw", t(&[2])), ("pe", t(&[2])), ("heads", int(2))],
    ],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let heads = args.size("heads")?;
    let (dv, dk) = memory_dims(args, heads)?;
    check_split(args, "k", heads, dk, "key")?;
    check_split(args, "v", heads, dv, "value")?;
    check_per_head(args, "pw", heads)?;
    check_per_head(args, "pe", heads)?;
    let out = args.shape("M")?.clone();
    let flops = (heads * (4 * dv * dk + 3 * dv + 3 * dk)) as u64;
    Ok((NamWrOp { heads }, Inferred::new(vec![Ty::Tensor(out)], vec![], flops)))
}

struct NamWrOp {
    heads: usize,
}

impl Op for NamWrOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [m, k, v, pw, pe] = op::inputs("namWR", inputs)?;
        let batch = batch_of(&[m, k])?;
        let dims = m.dims().to_vec();
        let m4 = match m.rank() {
            3 => m.unsqueeze(1)?, // [B, dv, dk] → [B, 1, dv, dk]
            _ => m.clone(),
        };
        let m4 = expand_batch(&m4, batch)?;
        let k = expand_batch(&l2_normalize(&to_heads(k, self.heads)?)?, batch)?;
        let v = to_heads(v, self.heads)?;
        let out = write(&m4, &k, &v, &per_head(pw)?, &per_head(pe)?)?;
        let mut out_dims = dims;
        out_dims[0] = batch;
        Ok(vec![out.reshape(out_dims)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

/// The layout of one call on slices: `B` examples of `H` memories `[dv, dk]` each, and how
/// many `pw`/`pe` values an example has (1, shared by its heads, or `H`).
#[derive(Clone, Copy)]
pub(super) struct Blocks {
    pub batch: usize,
    pub heads: usize,
    pub dv: usize,
    pub dk: usize,
}

impl Blocks {
    /// The layout of `m` (`[B, dv, dk]` or `[B, H, dv, dk]`).
    pub fn of(m: &Tensor, heads: usize) -> candle_core::Result<Blocks> {
        let dims = m.dims();
        let (dv, dk) = (dims[dims.len() - 2], dims[dims.len() - 1]);
        Ok(Blocks { batch: dims[0], heads, dv, dk })
    }

    /// The index of example `b`'s head `h` in a per-head probability with `n` values per
    /// example.
    pub fn prob(&self, p_len: usize, b: usize, h: usize) -> usize {
        let per = p_len / self.batch;
        b * per + if per == 1 { 0 } else { h }
    }
}

/// What the write's training forward keeps: the unit keys, their norms and `M k`.
struct WriteSaved {
    unit: Tensor,
    norms: Tensor,
    mk: Tensor,
}

impl SlicedBackward for NamWrOp {
    type Saved = WriteSaved;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> Forward<Self::Saved> {
        let [m, k, v, pw, pe] = op::inputs("namWR", inputs)?;
        let l = Blocks::of(m, self.heads)?;
        let (mr, kr, vr, pwr, per) =
            (view::Read::new(m)?, view::Read::new(k)?, view::Read::new(v)?, view::Read::new(pw)?, view::Read::new(pe)?);
        let (ms, ks, vs) = (mr.slice::<T>()?, kr.slice::<T>()?, vr.slice::<T>()?);
        let (pws, pes) = (pwr.slice::<T>()?, per.slice::<T>()?);
        let blocks = l.batch * l.heads;
        let (mut unit, mut norms) = (vec![T::zero(); blocks * l.dk], vec![T::zero(); blocks]);
        let mut mk = vec![T::zero(); blocks * l.dv];
        // SAFETY: the blocks (b, h) tile the memory, and the kernel writes each block whole.
        let out = unsafe {
            view::written(ms.len(), |out| {
                for b in 0..l.batch {
                    for h in 0..l.heads {
                        let i = b * l.heads + h;
                        let (mm, u) = (i * l.dv * l.dk, &mut unit[i * l.dk..][..l.dk]);
                        norms[i] = normalize(&ks[i * l.dk..][..l.dk], u);
                        let (pw, pe) = (pws[l.prob(pws.len(), b, h)], pes[l.prob(pes.len(), b, h)]);
                        let (mb, ob) = (&ms[mm..][..l.dv * l.dk], &mut out[mm..][..l.dv * l.dk]);
                        write_forward(mb, u, &vs[i * l.dv..][..l.dv], pw, pe, &mut mk[i * l.dv..][..l.dv], ob);
                    }
                }
            })
        };
        let saved = WriteSaved {
            unit: view::tensor(unit, blocks * l.dk)?,
            norms: view::tensor(norms, blocks)?,
            mk: view::tensor(mk, blocks * l.dv)?,
        };
        Ok((vec![view::tensor(out, m.dims())?], saved))
    }

    fn backward_typed<T: Real>(&self, bw: &Backward<'_, Self::Saved>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let [m, _, v, pw, pe] = bw.inputs_of()?;
        let l = Blocks::of(m, self.heads)?;
        let g = bw.grad_or_zeros(0)?;
        let (gr, mr, vr, pwr, per) = (
            view::Read::new(&g)?,
            view::Read::new(m)?,
            view::Read::new(v)?,
            view::Read::new(pw)?,
            view::Read::new(pe)?,
        );
        let (ur, nr, mkr) =
            (view::Read::new(&bw.saved.unit)?, view::Read::new(&bw.saved.norms)?, view::Read::new(&bw.saved.mk)?);
        let (gs, ms, vs, pws, pes) =
            (gr.slice::<T>()?, mr.slice::<T>()?, vr.slice::<T>()?, pwr.slice::<T>()?, per.slice::<T>()?);
        let (unit, norms, mks) = (ur.slice::<T>()?, nr.slice::<T>()?, mkr.slice::<T>()?);
        let (mut gk, mut gv) = (vec![T::zero(); unit.len()], vec![T::zero(); mks.len()]);
        let (mut gpw, mut gpe) = (vec![T::zero(); pws.len()], vec![T::zero(); pes.len()]);
        let mut g_unit = vec![T::zero(); l.dk];
        // SAFETY: the blocks (b, h) tile the memory, and the kernel writes each block of `gm` whole.
        let gm = unsafe {
            view::written(ms.len(), |gm| {
                for b in 0..l.batch {
                    for h in 0..l.heads {
                        let i = b * l.heads + h;
                        let (mm, n) = (i * l.dv * l.dk, l.dv * l.dk);
                        let (u, dv) = (&unit[i * l.dk..][..l.dk], i * l.dv..(i + 1) * l.dv);
                        let (jw, je) = (l.prob(pws.len(), b, h), l.prob(pes.len(), b, h));
                        let (dpw, dpe) = write_backward(
                            &ms[mm..][..n],
                            u,
                            &vs[dv.clone()],
                            &mks[dv.clone()],
                            pws[jw],
                            pes[je],
                            &gs[mm..][..n],
                            &mut gm[mm..][..n],
                            &mut gv[dv],
                            &mut g_unit,
                        );
                        gpw[jw] += dpw;
                        gpe[je] += dpe;
                        normalize_backward(u, norms[i], &g_unit, &mut gk[i * l.dk..][..l.dk]);
                    }
                }
            })
        };
        bw.input_grads([Some(gm), Some(gk), Some(gv), Some(gpw), Some(gpe)])
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor};

    use crate::prims::contract::testing::*;

    #[test]
    fn shapes_and_errors() {
        let one = [("M", t(&[3, 4])), ("k", t(&[4])), ("v", t(&[3])), ("pw", t(&[])), ("pe", t(&[]))];
        assert_eq!(out_shapes("namWR", &one), vec![vec![3, 4]]);
        assert_eq!(param_count("namWR", &one), 0);
        let two = [
            ("M", t(&[2, 3, 4])),
            ("k", t(&[8])),
            ("v", t(&[2, 3])),
            ("pw", t(&[2])),
            ("pe", t(&[])),
            ("heads", int(2)),
        ];
        assert_eq!(out_shapes("namWR", &two), vec![vec![2, 3, 4]]);
        let mut bad = two.clone();
        bad[1] = ("k", t(&[6]));
        assert!(error("namWR", &bad).contains("`k` (key) has 3 elements per head"));
        bad = two.clone();
        bad[0] = ("M", t(&[3, 4]));
        assert!(error("namWR", &bad).contains("one matrix per head [2, dv/2, dk/2]"));
        bad = two.clone();
        bad[3] = ("pw", t(&[3]));
        assert!(error("namWR", &bad).contains("`pw` must be one scalar per head [2]"));
        bad = two.clone();
        bad[2] = ("v", t(&[7]));
        assert!(error("namWR", &bad).contains("do not split into 2 heads"));
    }

    /// Runs a configured op on batched f64 tensors.
    pub(crate) fn apply(name: &str, args: &[(&'static str, TArg)], inputs: &[&Tensor]) -> Tensor {
        let inst = fitting(name, args);
        inst.op.forward(inputs, &[]).unwrap().remove(0)
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f64>().unwrap()
    }

    fn randn(dims: &[usize], seed: u64) -> Tensor {
        use rand::SeedableRng;
        use rand_distr::Distribution;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let n = dims.iter().product();
        let v: Vec<f64> = (0..n).map(|_| rand_distr::StandardNormal.sample(&mut rng)).collect();
        Tensor::from_vec(v, dims, &Device::Cpu).unwrap()
    }

    fn ones(dims: &[usize]) -> Tensor {
        Tensor::ones(dims, DType::F64, &Device::Cpu).unwrap()
    }

    #[test]
    fn theorem_3_1_reading_the_written_key_returns_the_value() {
        // Random non-unit key, random non-zero memory; batch 3; f64.
        let (dv, dk) = (5, 7);
        let wr = [("M", t(&[dv, dk])), ("k", t(&[dk])), ("v", t(&[dv])), ("pw", t(&[])), ("pe", t(&[]))];
        let rd = [("M", t(&[dv, dk])), ("q", t(&[dk])), ("pr", t(&[]))];
        let (m, k, v) = (randn(&[3, dv, dk], 1), randn(&[3, dk], 2), randn(&[3, dv], 3));
        let m2 = apply("namWR", &wr, &[&m, &k, &v, &ones(&[1]), &ones(&[1])]);
        let read = apply("namRD", &rd, &[&m2, &k, &ones(&[1])]);
        assert!(max_diff(&read, &v) < 1e-12, "RD(WR(M, k, v, 1, 1), k, 1) ≠ v: {}", max_diff(&read, &v));
        // The old memory did not hold v under k (the test is not vacuous).
        let before = apply("namRD", &rd, &[&m, &k, &ones(&[1])]);
        assert!(max_diff(&before, &v) > 0.1);
    }

    #[test]
    fn lemma_3_2_and_theorem_3_3_orthonormal_keys_store_a_sequence() {
        // S = 4 orthonormal keys in R^6 (columns of a Q from Gram–Schmidt), M⁰ = 0.
        let (s, dk, dv) = (4, 6, 3);
        let raw = randn(&[dk, dk], 9).to_vec2::<f64>().unwrap();
        let mut keys: Vec<Vec<f64>> = vec![];
        for r in raw.iter().take(s) {
            let mut u = r.clone();
            for q in &keys {
                let dot: f64 = u.iter().zip(q).map(|(a, b)| a * b).sum();
                u.iter_mut().zip(q).for_each(|(a, b)| *a -= dot * b);
            }
            let n = u.iter().map(|a| a * a).sum::<f64>().sqrt();
            keys.push(u.iter().map(|a| a / n).collect());
        }
        let values = randn(&[s, dv], 10);
        let wr = [("M", t(&[dv, dk])), ("k", t(&[dk])), ("v", t(&[dv])), ("pw", t(&[])), ("pe", t(&[]))];
        let rd = [("M", t(&[dv, dk])), ("q", t(&[dk])), ("pr", t(&[]))];
        let dev = Device::Cpu;
        let mut m = Tensor::zeros((1, dv, dk), DType::F64, &dev).unwrap();
        let mut sum = m.clone();
        for (i, key) in keys.iter().enumerate() {
            let k = Tensor::from_vec(key.clone(), (1, dk), &dev).unwrap();
            let v = values.get(i).unwrap().unsqueeze(0).unwrap();
            m = apply("namWR", &wr, &[&m, &k, &v, &ones(&[1]), &ones(&[1])]);
            sum = (sum + v.unsqueeze(2).unwrap().broadcast_mul(&k.unsqueeze(1).unwrap()).unwrap()).unwrap();
        }
        // Lemma 3.2: M^(S) = Σ v_i k_iᵀ.
        assert!(max_diff(&m, &sum) < 1e-12);
        // Theorem 3.3: every stored value reads back.
        for (i, key) in keys.iter().enumerate() {
            let k = Tensor::from_vec(key.clone(), (1, dk), &dev).unwrap();
            let r = apply("namRD", &rd, &[&m, &k, &ones(&[1])]);
            let v = values.get(i).unwrap().unsqueeze(0).unwrap();
            assert!(max_diff(&r, &v) < 1e-12, "value {i} did not read back");
        }
    }

    #[test]
    fn multi_head_equals_independent_single_head_memories() {
        let (h, dvh, dkh, b) = (3, 2, 4, 2);
        let wr_h = [
            ("M", t(&[h, dvh, dkh])),
            ("k", t(&[h * dkh])),
            ("v", t(&[h * dvh])),
            ("pw", t(&[h])),
            ("pe", t(&[h])),
            ("heads", int(h as i64)),
        ];
        let wr_1 = [("M", t(&[dvh, dkh])), ("k", t(&[dkh])), ("v", t(&[dvh])), ("pw", t(&[])), ("pe", t(&[]))];
        let rd_h = [("M", t(&[h, dvh, dkh])), ("q", t(&[h * dkh])), ("pr", t(&[h])), ("heads", int(h as i64))];
        let rd_1 = [("M", t(&[dvh, dkh])), ("q", t(&[dkh])), ("pr", t(&[]))];
        let (m, k, v, q) =
            (randn(&[b, h, dvh, dkh], 1), randn(&[b, h * dkh], 2), randn(&[b, h * dvh], 3), randn(&[b, h * dkh], 4));
        let (pw, pe, pr) = (randn(&[b, h], 5), randn(&[b, h], 6), randn(&[b, h], 7));
        let m2 = apply("namWR", &wr_h, &[&m, &k, &v, &pw, &pe]);
        let r = apply("namRD", &rd_h, &[&m2, &q, &pr]);
        for i in 0..h {
            let mi = m.narrow(1, i, 1).unwrap().squeeze(1).unwrap();
            let ki = k.narrow(1, i * dkh, dkh).unwrap();
            let vi = v.narrow(1, i * dvh, dvh).unwrap();
            let col = |x: &Tensor| x.narrow(1, i, 1).unwrap().squeeze(1).unwrap();
            let mi2 = apply("namWR", &wr_1, &[&mi, &ki, &vi, &col(&pw), &col(&pe)]);
            assert!(max_diff(&mi2, &m2.narrow(1, i, 1).unwrap().squeeze(1).unwrap()) < 1e-12, "head {i} memory");
            let qi = q.narrow(1, i * dkh, dkh).unwrap();
            let ri = apply("namRD", &rd_1, &[&mi2, &qi, &col(&pr)]);
            assert!(max_diff(&ri, &r.narrow(1, i * dvh, dvh).unwrap()) < 1e-12, "head {i} read");
        }
    }

    #[test]
    fn shared_probabilities_and_broadcast_states_work() {
        // A memory broadcast from one example (as an `identity`/`learned` state) and scalar
        // probabilities with batch axis 1 (as `scalar(..)`).
        let m = randn(&[1, 2, 3], 1).broadcast_as((4, 2, 3)).unwrap();
        let (k, v) = (randn(&[4, 3], 2), randn(&[4, 2], 3));
        let p = Tensor::new(&[0.5f64], &Device::Cpu).unwrap();
        let wr = [("M", t(&[2, 3])), ("k", t(&[3])), ("v", t(&[2])), ("pw", t(&[])), ("pe", t(&[]))];
        let out = apply("namWR", &wr, &[&m, &k, &v, &p, &p]);
        assert_eq!(out.dims(), &[4, 2, 3]);
    }
}
