//! `c, h = lstmCell(c, h, x)`: one LSTM step, PyTorch's `nn.LSTMCell` (gate order i, f, g, o).
//!
//! `[i f g o] = W x + b_ih + U h + b_hh`; `c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g)`; `h' = σ(o) ⊙ tanh(c')`.
//! Shapes: `c, h: [H]`, `x: [n]` → `c': [H]`, `h': [H]`. Init U(±1/√H) as PyTorch.

use candle_core::{D, Tensor};

use super::*;
use crate::kernels::dense::dense;

pub struct LstmCell;

static SIGNATURE: [ArgSpec; 3] = [ArgSpec::tensor("c"), ArgSpec::tensor("h"), ArgSpec::tensor("x")];

impl Primitive for LstmCell {
    fn name(&self) -> &'static str {
        "lstmCell"
    }
    fn summary(&self) -> &'static str {
        "one LSTM step (c, h) → (c', h'), PyTorch's LSTMCell"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn outputs(&self) -> &'static [&'static str] {
        &["c", "h"]
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let c = args.shape_of_rank("c", 1, "a cell state vector")?;
        let hidden = c[0];
        let h = args.shape("h")?;
        if h != &vec![hidden] {
            return Err(PrimError::shape_mismatch("h", &[hidden], h, "(like the cell state `c`)"));
        }
        let x = args.shape_of_rank("x", 1, "an input vector")?;
        let n = x[0];
        let bound = 1.0 / (hidden as f64).sqrt();
        let params = vec![
            ParamDecl::new("w_ih", vec![4 * hidden, n], Init::Uniform(bound)),
            ParamDecl::new("b_ih", vec![4 * hidden], Init::Uniform(bound)),
            ParamDecl::new("w_hh", vec![4 * hidden, hidden], Init::Uniform(bound)),
            ParamDecl::new("b_hh", vec![4 * hidden], Init::Uniform(bound)),
        ];
        let flops = (2 * 4 * hidden * (n + hidden) + 20 * hidden) as u64;
        let out = Ty::Tensor(vec![hidden]);
        Ok(Instance::new(LstmOp { hidden }, vec![out.clone(), out], params, flops))
    }
}

struct LstmOp {
    hidden: usize,
}

impl Op for LstmOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let (c, h, x) = (inputs[0], inputs[1], inputs[2]);
        let gates = dense(x, params[0], Some(params[1]))?.broadcast_add(&dense(h, params[2], Some(params[3]))?)?;
        let n = self.hidden;
        let gate = |i: usize| gates.narrow(D::Minus1, i * n, n);
        let (i, f, g, o) = (gate(0)?, gate(1)?, gate(2)?, gate(3)?);
        let sig = candle_nn::ops::sigmoid;
        let c_next = sig(&f)?.broadcast_mul(c)?.add(&sig(&i)?.mul(&g.tanh()?)?)?;
        let h_next = sig(&o)?.mul(&c_next.tanh()?)?;
        Ok(vec![c_next, h_next])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn shapes_and_gradients() {
        let args = [("c", t(&[3])), ("h", t(&[3])), ("x", t(&[2]))];
        assert_eq!(out_shapes("lstmCell", &args), vec![vec![3], vec![3]]);
        assert_eq!(param_count("lstmCell", &args), 12 * 2 + 12 + 12 * 3 + 12);
        assert!(
            error("lstmCell", &[("c", t(&[3])), ("h", t(&[4])), ("x", t(&[2]))]).contains("`h` must have shape [3]")
        );
        grad_check("lstmCell", &args);
    }
}
