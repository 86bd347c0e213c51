//! `gruCell(h, x)`: one GRU step, PyTorch's `nn.GRUCell` (gate order r, z, n) — NAM-TM's
//! controller (see `headMove` for why memctl's controller is unidirectional).
//!
//! `[r_i z_i n_i] = W_ih x + b_ih`, `[r_h z_h n_h] = W_hh h + b_hh`;
//! `r = σ(r_i + r_h)`, `z = σ(z_i + z_h)`, `n = tanh(n_i + r ⊙ n_h)`, `h' = (1 − z) ⊙ n + z ⊙ h`.
//! Shapes: `h: [H]`, `x: [n]` → `[H]`. Parameters `w_ih: [3H, n]`, `w_hh: [3H, H]`,
//! `b_ih, b_hh: [3H]` (PyTorch's layout, `3H(n + H) + 6H` numbers), init U(±1/√H) as PyTorch.

use candle_core::{D, Tensor};

use crate::kernels::cpu::dense::{Transposed, forward_slices};
use crate::kernels::cpu::gru::{gru_backward, gru_forward};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    GruCell = "gruCell",
    "one GRU step h → h', PyTorch's GRUCell (gates r, z, n)",
    args: [tensor("h"), tensor("x")],
    examples: [[("h", t(&[3])), ("x", t(&[2]))]],
    op: |config| GruOp { config, wih_t: Transposed::default(), whh_t: Transposed::default() },
}

fn configure(args: &Args) -> Result<(Config, Inferred), PrimError> {
    let h = args.shape_of_rank("h", 1, "a hidden state vector")?;
    let hidden = h[0];
    let x = args.shape_of_rank("x", 1, "an input vector")?;
    let n = x[0];
    let mut params = ParamList::new();
    let (input, recurrent) = params.rnn_cell(3, hidden, n);
    let flops = (2 * 3 * hidden * (n + hidden) + 16 * hidden) as u64;
    let config = Config { hidden, input, recurrent };
    Ok((config, Inferred::new(vec![Ty::Tensor(vec![hidden])], params.into_decls(), flops)))
}

struct Config {
    hidden: usize,
    /// `W_ih, b_ih` on the input and `W_hh, b_hh` on the state, each `→ 3H` (gates r, z, n).
    input: Dense,
    recurrent: Dense,
}

struct GruOp {
    config: Config,
    wih_t: Transposed,
    whh_t: Transposed,
}

impl WithProducts for GruOp {
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let Config { hidden: n, input, recurrent } = &self.config;
        let [h, x] = op::inputs("gruCell", inputs)?;
        let gi = products.dense(x, input.weight.of(params), Some(input.bias.of(params)))?;
        let gh = products.dense(h, recurrent.weight.of(params), Some(recurrent.bias.of(params)))?;
        if crate::kernels::cuda::switches::used_for(&gi, crate::kernels::cuda::layers::gru_cell::GRU_CELL) {
            return Ok(vec![crate::kernels::cuda::layers::gru_cell::gru_cell(&gi, &gh, h)?]);
        }
        let n = *n;
        let part = |g: &Tensor, i: usize| g.narrow(D::Minus1, i * n, n);
        let sig = candle_nn::ops::sigmoid;
        let r = sig(&part(&gi, 0)?.broadcast_add(&part(&gh, 0)?)?)?;
        let z = sig(&part(&gi, 1)?.broadcast_add(&part(&gh, 1)?)?)?;
        let cand = part(&gi, 2)?.broadcast_add(&r.broadcast_mul(&part(&gh, 2)?)?)?.tanh()?;
        // h' = (1 − z) ⊙ n + z ⊙ h = n + z ⊙ (h − n)
        let h_next = cand.broadcast_add(&z.broadcast_mul(&h.broadcast_sub(&cand)?)?)?;
        Ok(vec![h_next])
    }
}

impl SlicedBackward for GruOp {
    type Saved = Tensor;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Self::Saved> {
        let [h, x] = op::inputs("gruCell", inputs)?;
        let Config { hidden: hd, input, recurrent } = &self.config;
        let hd = *hd;
        let (batch, n) = (x.dim(0)?, x.dim(1)?);
        let (wih_t, whh_t) = (self.wih_t.of(input.weight.of(params))?, self.whh_t.of(recurrent.weight.of(params))?);
        let (wih, whh) = (view::Read::new(&wih_t)?, view::Read::new(&whh_t)?);
        let (bih, bhh) = (view::Read::new(input.bias.of(params))?, view::Read::new(recurrent.bias.of(params))?);
        let (hr, xr) = (view::Read::new(h)?, view::Read::new(x)?);
        let (hs, xs) = (hr.slice::<T>()?, xr.slice::<T>()?);
        let gi = forward_slices(xs, batch, wih.slice::<T>()?, Some(bih.slice::<T>()?), n, 3 * hd);
        let gh = forward_slices(hs, batch, whh.slice::<T>()?, Some(bhh.slice::<T>()?), hd, 3 * hd);
        let (mut saved, mut h_next) = (vec![T::zero(); batch * 4 * hd], vec![T::zero(); batch * hd]);
        gru_forward(&gi, &gh, hs, hd, &mut saved, &mut h_next);
        Ok((vec![view::tensor(h_next, (batch, hd))?], view::tensor(saved, (batch, 4 * hd))?))
    }

    fn backward_typed<T: Real>(&self, bw: &Backward<'_, Self::Saved>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let Config { hidden: hd, input, recurrent } = &self.config;
        let hd = *hd;
        let [h, x] = bw.inputs_of()?;
        let batch = x.dim(0)?;
        let g = bw.grad_or_zeros(0)?;
        let (gr, sr, hr, xr) =
            (view::Read::new(&g)?, view::Read::new(bw.saved)?, view::Read::new(h)?, view::Read::new(x)?);
        let (hs, xs) = (hr.slice::<T>()?, xr.slice::<T>()?);
        let (mut g_gi, mut g_gh) = (vec![T::zero(); batch * 3 * hd], vec![T::zero(); batch * 3 * hd]);
        let mut g_h = vec![T::zero(); batch * hd];
        gru_backward(sr.slice::<T>()?, hs, gr.slice::<T>()?, hd, &mut g_gi, &mut g_gh, &mut g_h);
        let gx = bw.dense_backward(*input, &g_gi, xs, bw.needs[1], param_grads)?;
        let g_h_rec = bw.dense_backward(*recurrent, &g_gh, hs, bw.needs[0], param_grads)?;
        if let Some(rec) = g_h_rec {
            for (a, b) in g_h.iter_mut().zip(&rec) {
                *a += *b;
            }
        }
        bw.input_grads([Some(g_h), gx])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn shapes_and_parameter_count_match_pytorch() {
        let args = [("h", t(&[4])), ("x", t(&[3]))];
        assert_eq!(out_shapes("gruCell", &args), vec![vec![4]]);
        // nn.GRUCell(3, 4): 3·4·(3 + 4) + 2·3·4 = 84 + 24 = 108.
        assert_eq!(param_count("gruCell", &args), 108);
        assert_eq!(param_count("gruCell", &[("h", t(&[128])), ("x", t(&[256]))]), 3 * 128 * (256 + 128) + 6 * 128);
        let inst = instance("gruCell", &args).unwrap();
        let shapes: Vec<_> = inst.inferred.params.iter().map(|p| (p.name.as_str(), p.shape.clone())).collect();
        assert_eq!(shapes, vec![("w_ih", vec![12, 3]), ("b_ih", vec![12]), ("w_hh", vec![12, 4]), ("b_hh", vec![12])]);
        assert!(
            inst.inferred.params.iter().all(|p| p.init == crate::graph::Init::Uniform(0.5)),
            "init must be U(±1/√H) = U(±0.5)"
        );
        assert!(error("gruCell", &[("h", t(&[2, 4])), ("x", t(&[3]))]).contains("`h` must be a hidden state vector"));
    }

    #[test]
    fn zero_weights_average_the_candidate_and_the_state() {
        // With all parameters 0 (not the init; set through a hand-built op): r = z = 1/2,
        // n = tanh(0) = 0, h' = h / 2.
        use candle_core::{Device, Tensor};
        let inst = instance("gruCell", &[("h", t(&[2])), ("x", t(&[1]))]).unwrap();
        let dev = Device::Cpu;
        let zeros: Vec<Tensor> = inst
            .inferred
            .params
            .iter()
            .map(|p| Tensor::zeros(p.shape.clone(), candle_core::DType::F64, &dev).unwrap())
            .collect();
        let h = Tensor::new(&[[2.0f64, -4.0]], &dev).unwrap();
        let x = Tensor::new(&[[1.0f64]], &dev).unwrap();
        let out = inst.op.forward(&[&h, &x], &zeros.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(out[0].to_vec2::<f64>().unwrap(), vec![vec![1.0, -2.0]]);
    }
}
