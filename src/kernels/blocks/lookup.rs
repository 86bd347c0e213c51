//! A table's rows by token id (`embedding`'s lookup): for one table, or for a pack's tables
//! stacked over the trials, each trial's ids reading its own table.

use candle_core::{Result, Tensor};

/// `table[ids]`: the rows of `table` (`[V, size]`) by `ids` (any shape), `[..ids, size]`; as
/// `onehot(ids) · table` where `one_hot` (see [`one_hot_rows`]), else by `index_select`.
pub fn lookup(table: &Tensor, ids: &Tensor, one_hot: bool) -> Result<Tensor> {
    let (vocab, size) = table.dims2()?;
    let rows = match one_hot {
        true => one_hot_rows(ids, vocab, table)?.matmul(table)?,
        false => table.index_select(&ids.flatten_all()?, 0)?,
    };
    rows.reshape(with_last(ids, size))
}

/// [`lookup`] for a pack of `P` trials: `tables` `[P, V, size]`, `ids` trial `p`'s at the `p`-th
/// of `P` equal parts of its leading axis, each read from its trial's table in one op.
pub fn lookup_packed(tables: &Tensor, ids: &Tensor, one_hot: bool) -> Result<Tensor> {
    let (trials, vocab, size) = tables.dims3()?;
    let n = ids.elem_count() / trials.max(1);
    if n * trials != ids.elem_count() {
        candle_core::bail!("internal: {:?} ids for a pack of {trials} tables", ids.dims());
    }
    let rows = match one_hot {
        true => one_hot_rows(ids, vocab, tables)?.reshape((trials, n, vocab))?.matmul(tables)?,
        false => {
            // Trial `p`'s ids index rows `p·V..(p+1)·V` of the tables laid end to end. One offset
            // per trial is uploaded, the same at every step: a CUDA graph's capture finds it in
            // candle's upload cache, which holds small uploads only.
            let offsets: Vec<u32> = (0..trials).map(|p| (p * vocab) as u32).collect();
            let offsets = Tensor::from_vec(offsets, (trials, 1), ids.device())?.to_dtype(ids.dtype())?;
            let ids = ids.reshape((trials, n))?.broadcast_add(&offsets)?.flatten_all()?;
            tables.reshape((trials * vocab, size))?.index_select(&ids, 0)?
        }
    };
    rows.reshape(with_last(ids, size))
}

/// `ids` flattened as one-hot rows `[ids, V]` in `like`'s float type. Each row of the product
/// with a table is one product with 1 and sums of products with 0, so the row itself (for
/// finite tables); the table's gradient is then one product, `onehot(ids)ᵀ · g`, instead of
/// candle's index-add (`device::tuning::ONE_HOT_EMBEDDING` says why). An id out of range gives
/// a row of zeros, where `index_select` fails: the checker bounds the ids.
fn one_hot_rows(ids: &Tensor, vocab: usize, like: &Tensor) -> Result<Tensor> {
    let classes = Tensor::arange(0u32, vocab as u32, ids.device())?.unsqueeze(0)?;
    ids.flatten_all()?.unsqueeze(1)?.broadcast_eq(&classes)?.to_dtype(like.dtype())
}

/// `ids`' shape with `size` appended.
fn with_last(ids: &Tensor, size: usize) -> Vec<usize> {
    let mut dims = ids.dims().to_vec();
    dims.push(size);
    dims
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor, Var};

    use super::{lookup, lookup_packed};

    /// The one-hot product gives `index_select`'s rows and the same gradient for the table.
    #[test]
    fn a_lookup_by_one_hot_product_equals_index_select_values_and_gradients() -> candle_core::Result<()> {
        let table = Var::from_tensor(&Tensor::randn(0f64, 1.0, (7, 3), &Device::Cpu)?)?;
        let ids = Tensor::new(&[[3u32, 0, 6], [3, 3, 1]], &Device::Cpu)?;
        let weights = Tensor::randn(0f64, 1.0, (2, 3, 3), &Device::Cpu)?;
        let plain = lookup(table.as_tensor(), &ids, false)?;
        let product = lookup(table.as_tensor(), &ids, true)?;
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
    fn a_pack_s_lookup_reads_each_trial_s_ids_from_its_own_table() -> candle_core::Result<()> {
        let tables = Tensor::randn(0f64, 1.0, (2, 5, 3), &Device::Cpu)?;
        let ids = Tensor::new(&[[4u32, 0], [2, 2], [1, 3], [0, 4]], &Device::Cpu)?; // 2 rows per trial
        for one_hot in [false, true] {
            let packed = lookup_packed(&tables, &ids, one_hot)?;
            assert_eq!(packed.dims(), &[4, 2, 3]);
            for p in 0..2 {
                let alone = lookup(&tables.get(p)?, &ids.narrow(0, 2 * p, 2)?, one_hot)?;
                let own = packed.narrow(0, 2 * p, 2)?;
                assert_eq!(own.flatten_all()?.to_vec1::<f64>()?, alone.flatten_all()?.to_vec1::<f64>()?, "trial {p}");
            }
        }
        Ok(())
    }
}
