//! `embedding(x, size)`: a learned vector per token id. `x: tokens(V)` → `[size]`;
//! table `[V, size]` initialised N(0, 1) like PyTorch's `nn.Embedding`.

use candle_core::Tensor;

use super::backward::with_real;
use super::*;
use crate::kernels::view;

pub struct Embedding;

static SIGNATURE: [ArgSpec; 2] = [ArgSpec::tensor("x"), ArgSpec::value("size", Kind::Int, Default::Required)];

impl Primitive for Embedding {
    fn name(&self) -> &'static str {
        "embedding"
    }
    fn summary(&self) -> &'static str {
        "a learned vector per token id"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let Ty::Tokens(vocab) = *args.ty("x")? else {
            return Err(PrimError::new("`embedding` looks up token ids, but `x` is a float tensor")
                .on("x")
                .hint("use `linear(x, size)` on vector inputs"));
        };
        let size = args.size("size")?;
        let params = vec![ParamDecl::new("table", vec![vocab, size], Init::Normal(1.0))];
        Ok(Instance::new(EmbeddingOp, vec![Ty::Tensor(vec![size])], params, size as u64))
    }
}

struct EmbeddingOp;

impl Op for EmbeddingOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        Ok(vec![params[0].index_select(inputs[0], 0)?])
    }

    fn has_backward(&self) -> bool {
        true
    }

    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<(Vec<Tensor>, Saved)> {
        Ok((vec![self.forward(inputs, params)?[0].contiguous()?], vec![]))
    }

    /// Each example's output gradient is added to its token's row.
    fn backward(&self, b: &Backward<'_>, param_grads: &mut [ParamGrad]) -> candle_core::Result<Vec<Option<Tensor>>> {
        let Some(g) = &b.grads[0] else { return Ok(vec![None]) };
        let (vocab, size) = b.params[0].dims2()?;
        let ids: Vec<u32> = b.inputs[0].flatten_all()?.to_vec1()?;
        with_real!(g.dtype(), T => {
            let rows: Vec<T> = view::values(g)?;
            let table = param_grads[0].slice_mut::<T>(vocab * size)?;
            for (&id, row) in ids.iter().zip(rows.chunks_exact(size)) {
                let id = id as usize;
                if id >= vocab {
                    candle_core::bail!("token id {id} out of range for a vocabulary of {vocab}");
                }
                for (t, v) in table[id * size..][..size].iter_mut().zip(row) {
                    *t += *v;
                }
            }
        });
        Ok(vec![None])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn shapes_and_gradients() {
        assert_eq!(out_shapes("embedding", &[("x", tokens(7)), ("size", int(3))]), vec![vec![3]]);
        assert_eq!(param_count("embedding", &[("x", tokens(7)), ("size", int(3))]), 21);
        assert!(error("embedding", &[("x", t(&[4])), ("size", int(3))]).contains("float tensor"));
        grad_check("embedding", &[("x", tokens(3)), ("size", int(2))]);
        manual_backward_check("embedding", &[("x", tokens(2)), ("size", int(3))]);
    }
}
