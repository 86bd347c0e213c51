//! `c, h = lstmCell(c, h, x)`: one LSTM step, PyTorch's `nn.LSTMCell` (gate order i, f, g, o).
//!
//! `[i f g o] = W x + b_ih + U h + b_hh`; `c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g)`; `h' = σ(o) ⊙ tanh(c')`.
//! Shapes: `c, h: [H]`, `x: [n]` → `c': [H]`, `h': [H]`. Init U(±1/√H) as PyTorch.

use candle_core::{D, Tensor};

use crate::kernels::cpu::dense::{Transposed, forward_slices};
use crate::kernels::cpu::lstm::{lstm_backward, lstm_forward};
use crate::kernels::cpu::{real::Real, view};
use crate::kernels::cuda::layers::lstm_cell;
use crate::prims::prelude::*;

primitive! {
    LstmCell = "lstmCell",
    "one LSTM step (c, h) → (c', h'), PyTorch's LSTMCell",
    args: [tensor("c"), tensor("h"), tensor("x")],
    examples: [[("c", t(&[3])), ("h", t(&[3])), ("x", t(&[2]))], [("c", t(&[4])), ("h", t(&[4])), ("x", t(&[3]))]],
    outputs: ["c", "h"],
    op: |config| LstmOp { config, wih_t: Transposed::default(), whh_t: Transposed::default() },
}

pub(super) struct Config {
    pub(super) hidden: usize,
    /// `W, b_ih` on the input and `U, b_hh` on the hidden state, each `→ 4H` (gates i, f, g, o).
    pub(super) input: Dense,
    pub(super) recurrent: Dense,
}

pub(super) fn configure(args: &Args) -> Result<(Config, Inferred), PrimError> {
    let c = args.shape_of_rank("c", 1, "a cell state vector")?;
    let hidden = c[0];
    let h = args.shape("h")?;
    if h != &vec![hidden] {
        return Err(PrimError::shape("h", &[hidden], h, "(like the cell state `c`)"));
    }
    let x = args.shape_of_rank("x", 1, "an input vector")?;
    let n = x[0];
    // PyTorch's LSTMCell: w_ih, b_ih, w_hh, b_hh → 4H, each U(±1/√H).
    let mut params = ParamList::new();
    let (input, recurrent) = params.rnn_cell(4, hidden, n);
    let flops = (2 * 4 * hidden * (n + hidden) + 20 * hidden) as u64;
    let out = Ty::Tensor(vec![hidden]);
    Ok((Config { hidden, input, recurrent }, Inferred::new(vec![out.clone(), out], params.into_decls(), flops)))
}

pub(super) struct LstmOp {
    pub(super) config: Config,
    pub(super) wih_t: Transposed,
    pub(super) whh_t: Transposed,
}

/// What the training forward keeps: the activated gates `[σi, σf, tanh g, σo]` `[B, 4H]` and
/// `tanh c'` `[B, H]`.
pub(super) struct Activations {
    gates: Tensor,
    tanh_c: Tensor,
}

impl WithProducts for LstmOp {
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let Config { hidden: n, input, recurrent } = &self.config;
        let [c, h, x] = op::inputs("lstmCell", inputs)?;
        let gates = products
            .dense(x, input.weight.of(params), Some(input.bias.of(params)))?
            .broadcast_add(&products.dense(h, recurrent.weight.of(params), Some(recurrent.bias.of(params)))?)?;
        if crate::kernels::cuda::switches::used_for(&gates, lstm_cell::LSTM_CELL) {
            // One kernel each for c' and h', forward and backward (kernels::cuda::layers::lstm_cell).
            let (c_next, h_next) = lstm_cell::cell(&gates, c)?;
            return Ok(vec![c_next, h_next]);
        }
        let gate = |i: usize| gates.narrow(D::Minus1, i * n, *n);
        let (i, f, g, o) = (gate(0)?, gate(1)?, gate(2)?, gate(3)?);
        let sig = candle_nn::ops::sigmoid;
        let c_next = sig(&f)?.broadcast_mul(c)?.add(&sig(&i)?.mul(&g.tanh()?)?)?;
        let h_next = sig(&o)?.mul(&c_next.tanh()?)?;
        Ok(vec![c_next, h_next])
    }
}

impl SlicedBackward for LstmOp {
    type Saved = Activations;

    fn forward_typed<T: Real>(
        &self,
        inputs: &[&Tensor],
        params: &[&Tensor],
    ) -> candle_core::Result<(Vec<Tensor>, Self::Saved)> {
        let [c, h, x] = op::inputs("lstmCell", inputs)?;
        let Config { hidden: hd, input, .. } = &self.config;
        let (batch, n) = (x.dim(0)?, x.dim(1)?);
        let xr = view::Read::new(x)?;
        let wih_t = self.wih_t.of(input.weight.of(params))?;
        let (wih, bih) = (view::Read::new(&wih_t)?, view::Read::new(input.bias.of(params))?);
        let gates = forward_slices(xr.slice::<T>()?, batch, wih.slice::<T>()?, Some(bih.slice::<T>()?), n, 4 * hd);
        self.cell_forward(gates, c, h, params)
    }

    fn backward_typed<T: Real>(&self, bw: &Backward<'_, Self::Saved>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let [_, _, x] = bw.inputs_of()?;
        let (gpre, gc_prev, gh_prev) = self.cell_backward::<T>(bw, param_grads)?;
        let xr = view::Read::new(x)?;
        let gx = bw.dense_backward(self.config.input, &gpre, xr.slice::<T>()?, bw.needs[2], param_grads)?;
        bw.input_grads([Some(gc_prev), gh_prev, gx])
    }
}

/// The cell's two halves, shared with the fused `embed → lstmCell` (`embed_lstm`), which
/// computes the input half `x W_ihᵀ + b_ih` its own way.
impl LstmOp {
    /// The step from the input half of the gates' pre-activations (`[B, 4H]`): adds the
    /// recurrent half and activates. Outputs `[c', h']`.
    pub(super) fn cell_forward<T: Real>(
        &self,
        mut gates: Vec<T>,
        c: &Tensor,
        h: &Tensor,
        params: &[&Tensor],
    ) -> candle_core::Result<(Vec<Tensor>, Activations)> {
        let Config { hidden: hd, recurrent, .. } = &self.config;
        let hd = *hd;
        let batch = c.dim(0)?;
        let (cr, hr) = (view::Read::new(c)?, view::Read::new(h)?);
        let whh_t = self.whh_t.of(recurrent.weight.of(params))?;
        let (whh, bhh) = (view::Read::new(&whh_t)?, view::Read::new(recurrent.bias.of(params))?);
        let gh = forward_slices(hr.slice::<T>()?, batch, whh.slice::<T>()?, Some(bhh.slice::<T>()?), hd, 4 * hd);
        let mut c_next = vec![T::zero(); batch * hd];
        let mut h_next = vec![T::zero(); batch * hd];
        let mut tc = vec![T::zero(); batch * hd];
        lstm_forward(&mut gates, &gh, cr.slice::<T>()?, hd, &mut c_next, &mut tc, &mut h_next);
        let saved =
            Activations { gates: view::tensor(gates, (batch, 4 * hd))?, tanh_c: view::tensor(tc, (batch, hd))? };
        Ok((vec![view::tensor(c_next, (batch, hd))?, view::tensor(h_next, (batch, hd))?], saved))
    }

    /// The backward through the activations and the recurrent half (whose parameters' gradients
    /// it adds): the pre-activation gradients `[B, 4H]`, and those of `c` and of `h` (if needed).
    #[allow(clippy::type_complexity)]
    pub(super) fn cell_backward<T: Real>(
        &self,
        bw: &Backward<'_, Activations>,
        param_grads: &mut [ParamGrad],
    ) -> candle_core::Result<(Vec<T>, Vec<T>, Option<Vec<T>>)> {
        let hd = self.config.hidden;
        let (c, h) = (&bw.inputs[0], &bw.inputs[1]);
        let batch = c.dim(0)?;
        let (gc, gh) = (bw.grad_or_zeros(0)?, bw.grad_or_zeros(1)?);
        let (gcr, ghr, cr) = (view::Read::new(&gc)?, view::Read::new(&gh)?, view::Read::new(c)?);
        let (gtr, tcr) = (view::Read::new(&bw.saved.gates)?, view::Read::new(&bw.saved.tanh_c)?);
        let (gc, gh, c, gates, tc) =
            (gcr.slice::<T>()?, ghr.slice::<T>()?, cr.slice::<T>()?, gtr.slice::<T>()?, tcr.slice::<T>()?);
        // Pre-activation gradients [gi, gf, gg, go] and d loss / d c.
        let mut gpre = vec![T::zero(); batch * 4 * hd];
        let mut gc_prev = vec![T::zero(); batch * hd];
        lstm_backward(gates, tc, c, gc, gh, hd, &mut gpre, &mut gc_prev);
        let hr = view::Read::new(h)?;
        let gh_prev = bw.dense_backward(self.config.recurrent, &gpre, hr.slice::<T>()?, bw.needs[1], param_grads)?;
        Ok((gpre, gc_prev, gh_prev))
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn shapes() {
        let args = [("c", t(&[3])), ("h", t(&[3])), ("x", t(&[2]))];
        assert_eq!(out_shapes("lstmCell", &args), vec![vec![3], vec![3]]);
        assert_eq!(param_count("lstmCell", &args), 12 * 2 + 12 + 12 * 3 + 12);
        assert!(
            error("lstmCell", &[("c", t(&[3])), ("h", t(&[4])), ("x", t(&[2]))]).contains("`h` must have shape [3]")
        );
    }
}
