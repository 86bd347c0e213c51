//! `gruCell(h, x)`: one GRU step, PyTorch's `nn.GRUCell` (gate order r, z, n) — NAM-TM's
//! controller (see `headMove` for why memctl's controller is unidirectional).
//!
//! `[r_i z_i n_i] = W_ih x + b_ih`, `[r_h z_h n_h] = W_hh h + b_hh`;
//! `r = σ(r_i + r_h)`, `z = σ(z_i + z_h)`, `n = tanh(n_i + r ⊙ n_h)`, `h' = (1 − z) ⊙ n + z ⊙ h`.
//! Shapes: `h: [H]`, `x: [n]` → `[H]`. Parameters `w_ih: [3H, n]`, `w_hh: [3H, H]`,
//! `b_ih, b_hh: [3H]` (PyTorch's layout, `3H(n + H) + 6H` numbers), init U(±1/√H) as PyTorch.

use candle_core::{D, Tensor};

use super::define::primitive;
use super::*;
use crate::kernels::dense::dense;

primitive! {
    GruCell = "gruCell",
    "one GRU step h → h', PyTorch's GRUCell (gates r, z, n)",
    args: [tensor("h"), tensor("x")],
    examples: [[("h", t(&[3])), ("x", t(&[2]))]],
}

fn configure(args: &Args) -> Result<(GruOp, Inferred), PrimError> {
    let h = args.shape_of_rank("h", 1, "a hidden state vector")?;
    let hidden = h[0];
    let x = args.shape_of_rank("x", 1, "an input vector")?;
    let n = x[0];
    // PyTorch's GRUCell initialises every weight and bias U(±1/√H).
    let init = Init::Uniform(1.0 / (hidden as f64).sqrt());
    let mut params = ParamList::new();
    let input = Dense {
        weight: params.push("w_ih", vec![3 * hidden, n], init.clone()),
        bias: params.push("b_ih", vec![3 * hidden], init.clone()),
    };
    let recurrent = Dense {
        weight: params.push("w_hh", vec![3 * hidden, hidden], init.clone()),
        bias: params.push("b_hh", vec![3 * hidden], init),
    };
    let flops = (2 * 3 * hidden * (n + hidden) + 16 * hidden) as u64;
    let op = GruOp { hidden, input, recurrent };
    Ok((op, Inferred::new(vec![Ty::Tensor(vec![hidden])], params.into_decls(), flops)))
}

struct GruOp {
    hidden: usize,
    /// `W_ih, b_ih` on the input and `W_hh, b_hh` on the state, each `→ 3H` (gates r, z, n).
    input: Dense,
    recurrent: Dense,
}

impl Op for GruOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [h, x] = op::inputs("gruCell", inputs)?;
        let gi = dense(x, self.input.weight.of(params), Some(self.input.bias.of(params)))?;
        let gh = dense(h, self.recurrent.weight.of(params), Some(self.recurrent.bias.of(params)))?;
        let n = self.hidden;
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

#[cfg(test)]
mod tests {
    use super::super::testing::*;

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
