//! The building half of a primitive ([`Lower`]: the op for a checked call) and the runtime
//! half ([`Op`]: one checked call, run on a batch with candle).

use std::sync::Arc;

use candle_core::{Result, Tensor};

use super::backward::TrainOp;
use crate::kernels::blocks::layer_norm::layer_norm;
use crate::kernels::blocks::lookup::{lookup, lookup_packed};
use crate::kernels::cpu::dense::{dense, dense_packed};
use crate::signature::{Args, PrimError, Primitive};

/// The building half of a primitive: the op that runs a checked call.
pub trait Lower: Primitive {
    /// The op for one call, whose arguments [`Primitive::infer`] accepted.
    fn lower(&self, args: &Args) -> std::result::Result<Arc<dyn Op>, PrimError>;
}

/// Runs one call. `inputs` are the present tensor arguments in signature order, each with a
/// leading batch dimension (which may be 1 for values shared by the whole batch, such as a
/// learned scalar); `params` are the call site's parameters in declared order (an op reads
/// them through the [`Slot`](crate::signature::Slot)s its configuration kept). Any device: this is the
/// formulation every device runs, and the one candle's autograd differentiates.
pub trait Op: Send + Sync {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<Vec<Tensor>>;

    /// The op's own reverse mode, if it has one (see [`ManualBackward`](super::ManualBackward));
    /// without it, training differentiates [`Op::forward`] with candle's autograd.
    fn manual(&self) -> Option<&dyn TrainOp> {
        None
    }

    /// The op over a whole pack of trials in one go, if it has such a form (see
    /// [`PackedForward`]); without it a pack runs [`Op::forward`] once per trial, with each
    /// trial's parameters on its rows.
    fn packed(&self) -> Option<&dyn PackedForward> {
        None
    }
}

/// An op's form for a pack of trials (`compile::packed_run`): one product over the trial axis
/// where the pack would otherwise run the op once per trial (on a GPU, a launch per trial).
pub trait PackedForward {
    /// `inputs` hold every trial's rows, one trial after another (`[P·R, ...]`, trial `p`'s at
    /// `p·R..(p+1)·R`), and `params` each parameter stacked over the trials (`[P, ...]`, in
    /// declared order); the outputs are laid out as the inputs, trial `p`'s rows computed
    /// with trial `p`'s parameters alone.
    fn forward_packed(&self, inputs: &[&Tensor], params: &[&Tensor], pack: Pack) -> Result<Vec<Tensor>>;
}

/// The layout of a pack's rows: `trials` trials of `rows` rows each, one trial after another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pack {
    pub trials: usize,
    pub rows: usize,
}

/// An op's outputs, as its forward returns them.
pub type Outputs = Result<Vec<Tensor>>;

/// How an op's parameters meet its rows: one trial's parameters on all rows ([`Alone`]), or a
/// pack's, each parameter stacked over the trials and each trial's on its own rows ([`Pack`]).
pub trait Products {
    /// The dense product `v Wᵀ + b` on the last axis of `v` (`kernels::cpu::dense::dense`
    /// alone; `dense_packed` for a pack, one product batched over the trial axis).
    fn dense(&self, v: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor>;

    /// A parameter every row of a trial shares (a scalar bias, a learned number) as a value per
    /// row: `[1, ...]` alone, which broadcasting spreads over the batch; `[P·R, ...]` for a pack,
    /// trial `p`'s value on each of its rows.
    fn per_row(&self, param: &Tensor) -> Result<Tensor>;

    /// The layer norm over the last axis of `x`, with the affine map of gain `w` and bias `b`
    /// (`kernels::blocks::layer_norm`; for a pack, every trial's rows in one go, each with its
    /// own gain and bias).
    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor>;

    /// The rows of `table` by token `ids` (`kernels::blocks::lookup`; for a pack, each trial's
    /// ids read its own table), as one-hot products where `one_hot`.
    fn lookup(&self, table: &Tensor, ids: &Tensor, one_hot: bool) -> Result<Tensor>;
}

/// One trial's parameters on all rows.
pub struct Alone;

impl Products for Alone {
    fn dense(&self, v: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
        dense(v, w, b)
    }

    fn per_row(&self, param: &Tensor) -> Result<Tensor> {
        param.unsqueeze(0)
    }

    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
        layer_norm(x, w, b)
    }

    fn lookup(&self, table: &Tensor, ids: &Tensor, one_hot: bool) -> Result<Tensor> {
        lookup(table, ids, one_hot)
    }
}

impl Products for Pack {
    fn dense(&self, v: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
        dense_packed(v, w, b, self.trials)
    }

    fn per_row(&self, param: &Tensor) -> Result<Tensor> {
        let mut spread = param.dims().to_vec();
        spread.insert(1, self.rows);
        let mut rows = param.dims().to_vec();
        rows[0] *= self.rows;
        param.unsqueeze(1)?.broadcast_as(spread)?.contiguous()?.reshape(rows)
    }

    /// Each trial's rows are one block, with its row of the stacked gain and bias `[P, width]`.
    fn layer_norm(&self, x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
        layer_norm(x, w, b)
    }

    fn lookup(&self, table: &Tensor, ids: &Tensor, one_hot: bool) -> Result<Tensor> {
        lookup_packed(table, ids, one_hot)
    }
}

/// An op whose parameters enter only through [`Products`] (every op that takes weights),
/// written once over them: it runs alone with [`Alone`], and for a pack with
/// [`Pack`], one op for every trial (its [`Op`] and [`PackedForward`] come with it). Its manual
/// backward is its own.
pub trait WithProducts: TrainOp + Send + Sync {
    /// The op's outputs, its parameters applied through `products`.
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs;
}

impl<T: WithProducts> Op for T {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<Vec<Tensor>> {
        self.with_products(inputs, params, &Alone)
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }

    fn packed(&self) -> Option<&dyn PackedForward> {
        Some(self)
    }
}

impl<T: WithProducts> PackedForward for T {
    fn forward_packed(&self, inputs: &[&Tensor], params: &[&Tensor], pack: Pack) -> Result<Vec<Tensor>> {
        self.with_products(inputs, params, &pack)
    }
}

/// The tensors of a call's inputs, exactly `N` of them (an op's own arity, fixed by its
/// configuration; a different count is a bug in memctl, reported as an error).
pub fn inputs<'a, const N: usize>(op: &str, inputs: &[&'a Tensor]) -> Result<[&'a Tensor; N]> {
    <[&Tensor; N]>::try_from(inputs).map_err(|_| {
        candle_core::Error::Msg(format!("internal: `{op}` expects {N} tensor inputs, got {}", inputs.len()))
    })
}

/// The tensors of a call's inputs: `N` of them, then its optional last input where the call has
/// it (`optional`); as for [`inputs`], a different count is a bug in memctl.
pub fn inputs_and_optional<'a, const N: usize>(
    op: &str,
    tensors: &[&'a Tensor],
    optional: bool,
) -> Result<([&'a Tensor; N], Option<&'a Tensor>)> {
    let given = N + usize::from(optional);
    if tensors.len() != given {
        candle_core::bail!("internal: `{op}` expects {given} tensor inputs, got {}", tensors.len());
    }
    Ok((inputs(op, &tensors[..N])?, tensors.get(N).copied()))
}

/// A fused op: it runs (`Op`) and has its own reverse mode (`TrainOp`), which is why it exists
/// (`prims::fusion` pairs the calls that run as one).
pub trait FusedOp: Op + TrainOp {}

impl<T: Op + TrainOp> FusedOp for T {}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::{Alone, Pack, Products, inputs_and_optional};

    /// `n` distinct numbers shaped `dims`.
    fn numbers(dims: &[usize], from: f32) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::arange(from, from + n as f32, &Device::Cpu).unwrap().reshape(dims).unwrap().sin().unwrap()
    }

    #[test]
    fn an_optional_input_is_the_one_after_the_required_ones() {
        let (a, b) = (numbers(&[1], 0.0), numbers(&[1], 1.0));
        let ([first], last) = inputs_and_optional::<1>("op", &[&a, &b], true).unwrap();
        assert!(std::ptr::eq(first, &a) && last.is_some_and(|t| std::ptr::eq(t, &b)));
        assert!(inputs_and_optional::<1>("op", &[&a], false).unwrap().1.is_none());
        assert!(inputs_and_optional::<1>("op", &[&a], true).is_err(), "the optional input is missing");
        assert!(inputs_and_optional::<1>("op", &[&a, &b], false).is_err(), "one input too many");
    }

    #[test]
    fn a_pack_s_value_per_row_is_each_trial_s_value_on_its_rows() {
        let pack = Pack { trials: 2, rows: 3 };
        let stacked = numbers(&[2, 2], 0.0);
        let rows = pack.per_row(&stacked).unwrap().to_vec2::<f32>().unwrap();
        for (r, row) in rows.iter().enumerate() {
            let own = Alone.per_row(&stacked.get(r / pack.rows).unwrap()).unwrap();
            assert_eq!(row, &own.to_vec2::<f32>().unwrap()[0], "row {r}");
        }
    }

    #[test]
    fn a_pack_s_layer_norm_maps_each_trial_s_rows_by_its_own_gain_and_bias() {
        let pack = Pack { trials: 2, rows: 3 };
        let (x, w, b) = (numbers(&[6, 4, 5], 1.0), numbers(&[2, 5], 2.0), numbers(&[2, 5], 3.0));
        let packed = pack.layer_norm(&x, &w, &b).unwrap();
        for p in 0..pack.trials {
            let rows = |t: &Tensor| t.narrow(0, p * pack.rows, pack.rows).unwrap();
            let (w, b) = (w.get(p).unwrap(), b.get(p).unwrap());
            let alone = Alone.layer_norm(&rows(&x), &w, &b).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let own = rows(&packed).flatten_all().unwrap().to_vec1::<f32>().unwrap();
            for (a, o) in alone.iter().zip(&own) {
                assert!((a - o).abs() <= 1e-6, "trial {p}: {a} alone, {o} packed");
            }
        }
    }
}
