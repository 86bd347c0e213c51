//! `embedding(x, size)`: a learned vector per token id. `x: tokens(V)` → `[size]`;
//! table `[V, size]` initialised N(0, 1) like PyTorch's `nn.Embedding`.

use candle_core::{D, Tensor};

use crate::kernels::cpu::view;
use crate::prims::prelude::*;

primitive! {
    Embedding = "embedding",
    "a learned vector per token id",
    args: [tensor("x"), int("size")],
    examples: [[("x", tokens(3)), ("size", int(2))], [("x", tokens(2)), ("size", int(3))]],
}

fn configure(args: &Args) -> Result<(EmbeddingOp, Inferred), PrimError> {
    let Ty::Tokens(vocab) = *args.ty("x")? else {
        return Err(PrimError::new(PrimErrorKind::FloatNotTokens).on("x").hint(Hint::UseLinear));
    };
    let size = args.size("size")?;
    let mut params = ParamList::new();
    let table = params.push("table", vec![vocab, size], Init::Normal(1.0));
    Ok((EmbeddingOp { table }, Inferred::new(vec![Ty::Tensor(vec![size])], params.into_decls(), size as u64)))
}

struct EmbeddingOp {
    /// `[V, size]`: row `i` is token `i`'s vector.
    table: Slot,
}

impl WithProducts for EmbeddingOp {
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let [ids] = op::inputs("embedding", inputs)?;
        let table = self.table.of(params);
        // Training on CUDA, as `device::tuning::ONE_HOT_EMBEDDING` has it.
        let one_hot = table.device().is_cuda()
            && table.track_op()
            && table.dim(D::Minus2)? <= ONE_HOT_VOCABULARY
            && crate::kernels::cuda::switches::used_for(table, crate::device::tuning::ONE_HOT_EMBEDDING);
        Ok(vec![products.lookup(table, ids, one_hot)?])
    }
}

/// The largest vocabulary whose lookups run as one-hot products (`kernels::blocks::lookup`):
/// its one-hot rows are `[ids, vocabulary]` floats.
const ONE_HOT_VOCABULARY: usize = 1024;

impl ManualBackward for EmbeddingOp {
    type Saved = ();

    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<()> {
        Ok((vec![self.forward(inputs, params)?.remove(0).contiguous()?], ()))
    }

    /// Each example's output gradient is added to its token's row.
    fn backward(&self, b: &Backward<'_, ()>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let Some(g) = &b.grads[0] else { return Ok(vec![None]) };
        let (vocab, size) = self.table.of(b.params).dims2()?;
        let [ids] = b.inputs_of()?;
        let ids: Vec<u32> = ids.flatten_all()?.to_vec1()?;
        with_real!(g.dtype(), T => {
            let rows: Vec<T> = view::values(g)?;
            let table = self.table.of_mut(param_grads).slice_mut::<T>(vocab * size)?;
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
    use crate::prims::contract::testing::*;

    #[test]
    fn shapes() {
        assert_eq!(out_shapes("embedding", &[("x", tokens(7)), ("size", int(3))]), vec![vec![3]]);
        assert_eq!(param_count("embedding", &[("x", tokens(7)), ("size", int(3))]), 21);
        assert!(error("embedding", &[("x", t(&[4])), ("size", int(3))]).contains("float tensor"));
    }
}
