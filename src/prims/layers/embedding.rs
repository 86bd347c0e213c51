//! `embedding(x, size)`: a learned vector per token id. `x: tokens(V)` → `[size]`;
//! table `[V, size]` initialised N(0, 1) like PyTorch's `nn.Embedding`.

use candle_core::Tensor;

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

impl Op for EmbeddingOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [ids] = op::inputs("embedding", inputs)?;
        let table = self.table.of(params);
        // Training on CUDA, as `device::tuning::ONE_HOT_EMBEDDING` has it.
        let one_hot = table.device().is_cuda()
            && table.track_op()
            && table.dim(0)? <= ONE_HOT_VOCABULARY
            && crate::kernels::cuda::switches::used_for(table, crate::device::tuning::ONE_HOT_EMBEDDING);
        Ok(vec![if one_hot { one_hot_lookup(table, ids)? } else { table.index_select(ids, 0)? }])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

/// The largest vocabulary whose lookups [`one_hot_lookup`] runs: its one-hot rows are
/// `[ids, vocabulary]` floats.
const ONE_HOT_VOCABULARY: usize = 1024;

/// `table[ids]` (rows of `table: [V, size]`, `ids` of any shape → `[..ids, size]`) as
/// `onehot(ids) · table`. Each row is one product with 1 and sums of products with 0, so the
/// same values (for finite tables); the table's gradient is then one product, `onehot(ids)ᵀ ·
/// g`, instead of candle's index-add (`device::tuning::ONE_HOT_EMBEDDING` says why). An id out of
/// range gives a row of zeros, where `index_select` fails: the checker bounds the ids.
pub fn one_hot_lookup(table: &Tensor, ids: &Tensor) -> candle_core::Result<Tensor> {
    let (vocab, size) = table.dims2()?;
    let classes = Tensor::arange(0u32, vocab as u32, ids.device())?.unsqueeze(0)?;
    let one_hot = ids.flatten_all()?.unsqueeze(1)?.broadcast_eq(&classes)?.to_dtype(table.dtype())?;
    let mut dims = ids.dims().to_vec();
    dims.push(size);
    one_hot.matmul(table)?.reshape(dims)
}

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

    /// The one-hot product gives `index_select`'s rows and the same gradient for the table.
    #[test]
    fn a_lookup_by_one_hot_product_equals_index_select_values_and_gradients() -> candle_core::Result<()> {
        use candle_core::{Device, Tensor, Var};
        let table = Var::from_tensor(&Tensor::randn(0f64, 1.0, (7, 3), &Device::Cpu)?)?;
        let ids = Tensor::new(&[[3u32, 0, 6], [3, 3, 1]], &Device::Cpu)?;
        let weights = Tensor::randn(0f64, 1.0, (2, 3, 3), &Device::Cpu)?;
        let plain = table.index_select(&ids.flatten_all()?, 0)?.reshape((2, 3, 3))?;
        let product = super::one_hot_lookup(table.as_tensor(), &ids)?;
        assert_eq!(product.dims(), &[2, 3, 3]);
        assert_eq!(plain.flatten_all()?.to_vec1::<f64>()?, product.flatten_all()?.to_vec1::<f64>()?);
        let gradient = |out: &Tensor| -> candle_core::Result<Vec<f64>> {
            let grads = (out * &weights)?.sum_all()?.backward()?;
            grads.get(table.as_tensor()).expect("the table's gradient").flatten_all()?.to_vec1()
        };
        let (a, b) = (gradient(&plain)?, gradient(&product)?);
        // Token 3 thrice, 5 never: the rows of the gradient are sums over each token's uses.
        assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-12), "{a:?} against {b:?}");
        assert!(b[5 * 3..6 * 3].iter().all(|&v| v == 0.0));
        Ok(())
    }

    #[test]
    fn shapes() {
        assert_eq!(out_shapes("embedding", &[("x", tokens(7)), ("size", int(3))]), vec![vec![3]]);
        assert_eq!(param_count("embedding", &[("x", tokens(7)), ("size", int(3))]), 21);
        assert!(error("embedding", &[("x", t(&[4])), ("size", int(3))]).contains("float tensor"));
    }
}
