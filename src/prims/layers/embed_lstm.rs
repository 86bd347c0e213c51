//! `lstmCell(c, h, embed(token, w))` as one op for training (`fusion`): the token embedding
//! folded into the LSTM's input weights.
//!
//! The input half of the gates is `E[token] W_ihᵀ + b_ih`, a row of the table
//! `P = E W_ihᵀ + b_ih` (`[V, 4H]`). When the vocabulary is small against the batch, the
//! fused forward computes `P` once per training step (cached by the weights, which stay the
//! same tensors for a whole step) and gathers rows of it, instead of one `[B, w] · [w, 4H]`
//! product per time step. The backward scatters the pre-activation gradients into their
//! tokens' rows of `Ḡ` (`[V, 4H]`), summed over the time steps, and the parameter gradients
//! follow from it once per step: `d E = Ḡ W_ih`, `d W_ih = Ḡᵀ E`
//! ([`ParamGrad::deferred_product`]). For associative retrieval's LSTM (V = 37, w = 32,
//! H = 128, B = 32, 17 steps) that removes about a fifth of the step's multiply-adds.
//! With a large vocabulary it gathers `E`'s rows and runs the cell as `lstmCell` does.
//!
//! Parameters: the embedding table, then `lstmCell`'s. Inputs: `c`, `h` and the token ids.

use std::sync::{Arc, Mutex};

use candle_core::{Tensor, TensorId};

use super::lstm_cell::{self, Activations, LstmOp};
use crate::kernels::cpu::dense::{Transposed, column_sums_into, forward_slices};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

/// Fold when the vocabulary has at most this many tokens per example of the batch (of the
/// part one thread trains): the table costs `V` rows of products once per training step
/// forward and `2V` backward, the products it replaces `3B` rows at every time step, so it
/// pays from `V < B · steps`; memctl's sequences have 8 steps or more.
const FOLD_TOKENS_PER_ROW: usize = 8;

pub(super) struct EmbedLstm {
    pub(super) vocab: usize,
    pub(super) width: usize,
    pub(super) cell: LstmOp,
    /// `P = E W_ihᵀ + b_ih` and the ids of the tensors it was computed from.
    table: Mutex<Option<([TensorId; 3], Tensor)>>,
    /// Tests force one way or the other.
    fold: Option<bool>,
}

/// What the training forward keeps: the cell's activations, the token ids as rows, and
/// whether it folded.
pub(super) struct Saved {
    cell: Activations,
    ids: Vec<usize>,
    folded: bool,
}

/// The fused op for `embed(token, w)` (or `embedding`) feeding `lstmCell`'s `x`; `None` for
/// an `embed` of vectors (a dense layer, not a table).
pub(in crate::prims) fn build(embed: &Args, cell: &Args) -> Result<Option<Arc<dyn FusedOp>>, PrimError> {
    let Ty::Tokens(vocab) = *embed.ty("x")? else { return Ok(None) };
    let width = embed.size("size")?;
    let (config, _) = lstm_cell::configure(cell)?;
    let cell = LstmOp { config, wih_t: Transposed::default(), whh_t: Transposed::default() };
    Ok(Some(Arc::new(EmbedLstm::new(vocab, width, cell))))
}

impl EmbedLstm {
    pub(super) fn new(vocab: usize, width: usize, cell: LstmOp) -> EmbedLstm {
        EmbedLstm { vocab, width, cell, table: Mutex::new(None), fold: None }
    }

    fn folds(&self, batch: usize) -> bool {
        self.fold.unwrap_or(self.vocab <= FOLD_TOKENS_PER_ROW * batch)
    }

    /// `P = E W_ihᵀ + b_ih`, computed once for these weights.
    fn table<T: Real>(&self, e: &Tensor, cell_params: &[&Tensor]) -> candle_core::Result<Tensor> {
        let input = self.cell.config.input;
        let (w, b) = (input.weight.of(cell_params), input.bias.of(cell_params));
        let ids = [e.id(), w.id(), b.id()];
        let mut cached = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, p)) = cached.as_ref()
            && *at == ids
        {
            return Ok(p.clone());
        }
        let gates = 4 * self.cell.config.hidden;
        let wt = self.cell.wih_t.of(w)?;
        let (er, wr, br) = (view::Read::new(e)?, view::Read::new(&wt)?, view::Read::new(b)?);
        let p =
            forward_slices(er.slice::<T>()?, self.vocab, wr.slice::<T>()?, Some(br.slice::<T>()?), self.width, gates);
        let p = view::tensor(p, (self.vocab, gates))?;
        *cached = Some((ids, p.clone()));
        Ok(p)
    }

    fn train_forward<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Saved> {
        let [c, h, ids] = op::inputs("embed+lstmCell", inputs)?;
        let (e, cell_params) = table_and_cell(params)?;
        let ids = token_rows(ids, self.vocab)?;
        let folded = self.folds(ids.len());
        let gates = if folded {
            let p = self.table::<T>(e, cell_params)?;
            gather::<T>(&p, &ids)?
        } else {
            let input = self.cell.config.input;
            let wt = self.cell.wih_t.of(input.weight.of(cell_params))?;
            let (wr, br) = (view::Read::new(&wt)?, view::Read::new(input.bias.of(cell_params))?);
            let x = gather::<T>(e, &ids)?;
            let gates = 4 * self.cell.config.hidden;
            forward_slices(&x, ids.len(), wr.slice::<T>()?, Some(br.slice::<T>()?), self.width, gates)
        };
        let (outs, cell) = self.cell.cell_forward(gates, c, h, cell_params)?;
        Ok((outs, Saved { cell, ids, folded }))
    }

    fn train_backward<T: Real>(&self, bw: &Backward<'_, Saved>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let (e, cell_params) = table_and_cell(bw.params)?;
        let Some((e_grad, cell_grads)) = param_grads.split_first_mut() else {
            candle_core::bail!("embed+lstmCell: no parameter gradients")
        };
        let cell_bw = Backward {
            inputs: bw.inputs,
            params: cell_params,
            outputs: bw.outputs,
            saved: &bw.saved.cell,
            grads: bw.grads,
            needs: bw.needs,
        };
        let (gpre, gc_prev, gh_prev) = self.cell.cell_backward::<T>(&cell_bw, cell_grads)?;
        let ids = &bw.saved.ids;
        let input = self.cell.config.input;
        let gates = 4 * self.cell.config.hidden;
        if bw.saved.folded {
            // Ḡ[token] += gpre: `d E += Ḡ W_ih` and `d W_ih += Ḡᵀ E`, taken once per step.
            let w = input.weight.of(cell_params);
            let by_token = e_grad.deferred_product::<T>(w, self.vocab, gates, false)?;
            scatter_rows(by_token, ids, &gpre, gates);
            let by_token = input.weight.of_mut(cell_grads).deferred_product::<T>(e, self.vocab, gates, true)?;
            scatter_rows(by_token, ids, &gpre, gates);
            column_sums_into(&gpre, gates, input.bias.of_mut(cell_grads).slice_mut::<T>(gates)?);
        } else {
            let x = gather::<T>(e, ids)?;
            let gx = cell_bw.dense_backward(input, &gpre, &x, true, cell_grads)?;
            if let Some(gx) = gx {
                scatter_rows(e_grad.slice_mut::<T>(self.vocab * self.width)?, ids, &gx, self.width);
            }
        }
        bw.input_grads([Some(gc_prev), gh_prev, None])
    }
}

impl Op for EmbedLstm {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [c, h, ids] = op::inputs("embed+lstmCell", inputs)?;
        let (e, cell_params) = table_and_cell(params)?;
        self.cell.forward(&[c, h, &e.index_select(ids, 0)?], cell_params)
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl ManualBackward for EmbedLstm {
    type Saved = Saved;

    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Saved> {
        with_real!(table_and_cell(params)?.0.dtype(), T => self.train_forward::<T>(inputs, params))
    }

    fn backward(&self, b: &Backward<'_, Saved>, param_grads: &mut [ParamGrad]) -> InputGrads {
        with_real!(table_and_cell(b.params)?.0.dtype(), T => self.train_backward::<T>(b, param_grads))
    }
}

/// The parameters, as laid out: the embedding table, then `lstmCell`'s.
fn table_and_cell<'a>(params: &'a [&'a Tensor]) -> candle_core::Result<(&'a Tensor, &'a [&'a Tensor])> {
    match params.split_first() {
        Some((table, cell)) => Ok((table, cell)),
        None => candle_core::bail!("embed+lstmCell: no parameters"),
    }
}

/// The token ids as row indices, each checked against the vocabulary.
fn token_rows(ids: &Tensor, vocab: usize) -> candle_core::Result<Vec<usize>> {
    let ids: Vec<u32> = ids.flatten_all()?.to_vec1()?;
    ids.into_iter()
        .map(|id| match id as usize {
            id if id < vocab => Ok(id),
            id => candle_core::bail!("token id {id} out of range for a vocabulary of {vocab}"),
        })
        .collect()
}

/// Rows `ids` of the matrix `m`, one after another.
fn gather<T: Real>(m: &Tensor, ids: &[usize]) -> candle_core::Result<Vec<T>> {
    let cols = m.dim(1)?;
    let mr = view::Read::new(m)?;
    let m = mr.slice::<T>()?;
    let mut out = Vec::with_capacity(ids.len() * cols);
    for &id in ids {
        out.extend_from_slice(&m[id * cols..][..cols]);
    }
    Ok(out)
}

/// `acc[ids[r]] += rows[r]` for rows of `cols` elements.
fn scatter_rows<T: Real>(acc: &mut [T], ids: &[usize], rows: &[T], cols: usize) {
    for (&id, row) in ids.iter().zip(rows.chunks_exact(cols)) {
        for (a, &v) in acc[id * cols..][..cols].iter_mut().zip(row) {
            *a += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::*;
    use crate::prims::contract::testing::*;

    fn fused(vocab: usize, width: usize, hidden: usize, fold: bool) -> EmbedLstm {
        let args = bind(&lstm_cell::LstmCell, &[("c", t(&[hidden])), ("h", t(&[hidden])), ("x", t(&[width]))]);
        let (config, _) = lstm_cell::configure(&args).unwrap();
        let cell = LstmOp { config, wih_t: Transposed::default(), whh_t: Transposed::default() };
        EmbedLstm { fold: Some(fold), ..EmbedLstm::new(vocab, width, cell) }
    }

    /// Both ways (table folded, and rows of `E`) against the composition under candle's
    /// autograd and finite differences, in f64.
    #[test]
    fn matches_embedding_then_lstm_cell() {
        let (vocab, width, hidden, batch) = (5, 3, 4, 3);
        for fold in [true, false] {
            let op = fused(vocab, width, hidden, fold);
            let ids = Tensor::new(&[4u32, 0, 4][..batch], &Device::Cpu).unwrap();
            let params = [
                vec![vocab, width],
                vec![4 * hidden, width],
                vec![4 * hidden],
                vec![4 * hidden, hidden],
                vec![4 * hidden],
            ];
            manual_backward_check_inputs(
                "embed+lstmCell",
                &op,
                vec![random_input(&[batch, hidden], 1), random_input(&[batch, hidden], 2), ids],
                &params,
            );
        }
    }

    #[test]
    fn folds_only_a_vocabulary_small_against_the_batch() {
        let op = EmbedLstm { fold: None, ..fused(64, 3, 4, true) };
        assert!(op.folds(8));
        assert!(!op.folds(7));
    }
}
