//! `y = x Wᵀ + b` over the last axis of `x`, for any number of leading axes.

use std::sync::Mutex;

use candle_core::{Result, Tensor, TensorId};

use super::gemm::{Mat, MatMut, Par, matmul, matmul_new};
use super::real::Real;

/// `x`: `[..., fan_in]`, `w`: `[fan_out, fan_in]`, `b`: `[fan_out]` → `[..., fan_out]`.
/// The leading axes are folded into one so that the product is a single GEMM.
pub fn dense(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let dims = x.dims();
    let fan_in = *dims.last().unwrap_or(&1);
    let rows: usize = dims[..dims.len().saturating_sub(1)].iter().product();
    let (fan_out, _) = w.dims2()?;
    let y = x.reshape((rows, fan_in))?.matmul(&w.t()?)?;
    let y = match b {
        Some(b) => y.broadcast_add(b)?,
        None => y,
    };
    let mut out_dims = dims[..dims.len().saturating_sub(1)].to_vec();
    out_dims.push(fan_out);
    y.reshape(out_dims)
}

/// [`dense`] for a pack of `trials` trials in one batched product: `x` `[P·R..., fan_in]`
/// (trial `p`'s rows at `p·R..`), `w` `[P, fan_out, fan_in]`, `b` `[P, fan_out]`, each trial's
/// rows through its own weight and bias.
pub fn dense_packed(x: &Tensor, w: &Tensor, b: Option<&Tensor>, trials: usize) -> Result<Tensor> {
    let dims = x.dims();
    let fan_in = *dims.last().unwrap_or(&1);
    let rows: usize = dims[..dims.len().saturating_sub(1)].iter().product();
    let (_, fan_out, _) = w.dims3()?;
    if trials == 0 || !rows.is_multiple_of(trials) {
        candle_core::bail!("internal: a pack of {trials} trials over {rows} rows");
    }
    let y = x.reshape((trials, rows / trials, fan_in))?.matmul(&w.transpose(1, 2)?)?;
    let y = match b {
        Some(b) => y.broadcast_add(&b.unsqueeze(1)?)?,
        None => y,
    };
    let mut out_dims = dims[..dims.len().saturating_sub(1)].to_vec();
    out_dims.push(fan_out);
    y.reshape(out_dims)
}

/// A weight's transpose `wᵀ` (`[fan_in, fan_out]`, contiguous), kept by the op that uses it
/// for as long as the weight tensor is the same (one training step: the tape passes the same
/// detached weights to every time step). The product `x wᵀ` with `wᵀ` laid out row-major
/// runs up to 1.6× faster than through a transposed view (the gemm crate repacks the view
/// at every call; measured on STM's `distill`, [256 × 9216] · [9216 × 96]).
///
/// A weight of an earlier step is never asked for again, so the cache keeps only as many
/// transposes as there are weights in use at once: one for a trial alone, one per trial for a
/// pack (whose trials the op serves in turn). It learns that number from what comes back: a
/// weight asked for again after others (those are in use too), or after it was let go (one
/// more is). The least recently used go beyond it, so a long run holds a bounded few.
#[derive(Default)]
pub struct Transposed(Mutex<TransposeCache>);

#[derive(Default)]
struct TransposeCache {
    calls: u64,
    /// How many weights are in use at once, as seen so far.
    in_use: usize,
    /// `(weight, its transpose, the call that last asked for it)`.
    kept: Vec<(TensorId, Tensor, u64)>,
    /// Weights let go lately, to notice one asked for again (`in_use` was too small).
    let_go: std::collections::VecDeque<TensorId>,
}

impl Transposed {
    /// `w`'s transpose (computed on the first call for this tensor).
    pub fn of(&self, w: &Tensor) -> Result<Tensor> {
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        cache.calls += 1;
        let now = cache.calls;
        if let Some(at) = cache.kept.iter().position(|(id, ..)| *id == w.id()) {
            let last = cache.kept[at].2;
            let used_since = cache.kept.iter().filter(|(.., l)| *l > last).count();
            cache.in_use = cache.in_use.max(used_since + 1);
            cache.kept[at].2 = now;
            return Ok(cache.kept[at].1.clone());
        }
        if cache.let_go.contains(&w.id()) {
            cache.in_use = cache.in_use.max(cache.kept.len() + 1);
        }
        let wt = match (w.device(), w.dtype()) {
            (candle_core::Device::Cpu, candle_core::DType::F32) => transpose::<f32>(w)?,
            (candle_core::Device::Cpu, candle_core::DType::F64) => transpose::<f64>(w)?,
            _ => w.t()?.contiguous()?,
        };
        cache.kept.push((w.id(), wt.clone(), now));
        let keep = cache.in_use.max(1);
        if cache.kept.len() > keep {
            cache.kept.sort_by_key(|(.., last)| std::cmp::Reverse(*last));
            let gone: Vec<TensorId> = cache.kept.drain(keep..).map(|(id, ..)| id).collect();
            cache.let_go.extend(gone);
            let excess = cache.let_go.len().saturating_sub(LET_GO_REMEMBERED);
            cache.let_go.drain(..excess);
        }
        Ok(wt)
    }

    /// How many transposes are kept.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).kept.len()
    }
}

/// How many weights let go a cache remembers: more than the trials of any pack.
const LET_GO_REMEMBERED: usize = 256;

/// `wᵀ` of a CPU matrix, copied in square tiles so that both the reads and the writes stay
/// within a few cache lines (candle's strided copy goes element by element: 2 % of an LSTM
/// step for its two weights).
fn transpose<T: Real>(w: &Tensor) -> Result<Tensor> {
    const TILE: usize = 16;
    let (rows, cols) = w.dims2()?;
    let wr = super::view::Read::new(w)?;
    let src = wr.slice::<T>()?;
    let mut out = vec![T::zero(); rows * cols];
    for i0 in (0..rows).step_by(TILE) {
        for j0 in (0..cols).step_by(TILE) {
            for i in i0..(i0 + TILE).min(rows) {
                for j in j0..(j0 + TILE).min(cols) {
                    out[j * rows + i] = src[i * cols + j];
                }
            }
        }
    }
    super::view::tensor(out, (cols, rows))
}

/// The dense layer on plain slices for the manual backward passes: `x` `[rows, fan_in]`,
/// `wt` the weight transposed, `[fan_in, fan_out]` (see [`Transposed`]), `b` `[fan_out]` →
/// `y = x wᵀ + b`, `[rows, fan_out]`.
pub fn forward_slices<T: Real>(
    x: &[T],
    rows: usize,
    wt: &[T],
    b: Option<&[T]>,
    fan_in: usize,
    fan_out: usize,
) -> Vec<T> {
    let Some(b) = b else {
        return matmul_new(Mat::new(x, rows, fan_in), Mat::new(wt, fan_in, fan_out), Par::Pool);
    };
    let mut y = Vec::with_capacity(rows * fan_out);
    for _ in 0..rows {
        y.extend_from_slice(&b[..fan_out]);
    }
    matmul(
        MatMut::new(&mut y, rows, fan_out),
        Mat::new(x, rows, fan_in),
        Mat::new(wt, fan_in, fan_out),
        true,
        Par::Pool,
    );
    y
}

/// The backward of [`forward_slices`] given `gy = d loss / d y` `[rows, fan_out]`: adds
/// `gyᵀ x` to `gw` and the column sums of `gy` to `gb`, and returns `gx = gy w` if `want_x`.
#[allow(clippy::too_many_arguments)]
pub fn backward_slices<T: Real>(
    gy: &[T],
    x: &[T],
    rows: usize,
    w: &[T],
    fan_in: usize,
    fan_out: usize,
    gw: Option<&mut [T]>,
    gb: Option<&mut [T]>,
    want_x: bool,
) -> Option<Vec<T>> {
    if let Some(gw) = gw {
        matmul(
            MatMut::new(gw, fan_out, fan_in),
            Mat::new(gy, rows, fan_out).t(),
            Mat::new(x, rows, fan_in),
            true,
            Par::Pool,
        );
    }
    if let Some(gb) = gb {
        column_sums_into(gy, fan_out, gb);
    }
    want_x.then(|| matmul_new(Mat::new(gy, rows, fan_out), Mat::new(w, fan_out, fan_in), Par::Pool))
}

/// `acc[j] += Σ_r m[r, j]` for a row-major `m` with `cols` columns.
pub fn column_sums_into<T: Real>(m: &[T], cols: usize, acc: &mut [T]) {
    let acc = &mut acc[..cols];
    for row in m.chunks_exact(cols) {
        for (a, v) in acc.iter_mut().zip(row) {
            *a += *v;
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor};

    use super::Transposed;

    #[test]
    fn a_packed_product_gives_each_trial_its_own_weights_product() {
        let device = Device::Cpu;
        let (trials, batch, fan_in, fan_out) = (3, 4, 5, 2);
        let x = Tensor::randn(0f32, 1., (trials * batch, 2, fan_in), &device).unwrap();
        let w = Tensor::randn(0f32, 1., (trials, fan_out, fan_in), &device).unwrap();
        let b = Tensor::randn(0f32, 1., (trials, fan_out), &device).unwrap();
        let packed = super::dense_packed(&x, &w, Some(&b), trials).unwrap();
        assert_eq!(packed.dims(), [trials * batch, 2, fan_out]);
        for p in 0..trials {
            let own = x.narrow(0, p * batch, batch).unwrap();
            let alone = super::dense(&own, &w.get(p).unwrap(), Some(&b.get(p).unwrap())).unwrap();
            let got = packed.narrow(0, p * batch, batch).unwrap();
            let diff = (got - alone).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
            assert!(diff < 1e-5, "trial {p}: the packed product differs by {diff}");
        }
    }

    #[test]
    fn transposes_like_candle_whatever_the_tiling() {
        for (rows, cols) in [(1, 1), (3, 40), (17, 16), (33, 5)] {
            let w = Tensor::arange(0f32, (rows * cols) as f32, &Device::Cpu).unwrap().reshape((rows, cols)).unwrap();
            let want: Vec<Vec<f32>> = w.t().unwrap().to_vec2().unwrap();
            let cache = Transposed::default();
            assert_eq!(cache.of(&w).unwrap().to_vec2::<f32>().unwrap(), want, "{rows}×{cols}");
            assert_eq!(cache.of(&w.to_dtype(candle_core::DType::F64).unwrap()).unwrap().dims(), [cols, rows]);
        }
    }

    /// A fresh weight per step for each of `trials` trials, each asked for `calls` times a step
    /// in turn, for 300 steps: the transposes kept at the end (never more than `trials`) and how
    /// many transposes the last 100 steps computed.
    fn steps(trials: usize, calls: usize) -> (usize, usize) {
        let cache = Transposed::default();
        let (mut seen, mut transposed) = (std::collections::HashSet::new(), 0);
        for step in 0..300 {
            let weights: Vec<Tensor> =
                (0..trials).map(|_| Tensor::ones((3, 2), DType::F32, &Device::Cpu).unwrap()).collect();
            for _ in 0..calls {
                for w in &weights {
                    let wt = cache.of(w).unwrap();
                    if seen.insert(wt.id()) && step >= 200 {
                        transposed += 1;
                    }
                }
            }
            assert!(cache.kept() <= trials, "{} transposes kept for {trials} trials", cache.kept());
        }
        (cache.kept(), transposed)
    }

    #[test]
    fn a_long_run_keeps_one_transpose_per_weight_in_use_and_transposes_each_once() {
        // An op asked once a step (a batched output head) or at every time step, alone and for a
        // pack of three.
        assert_eq!(steps(1, 1), (1, 100));
        assert_eq!(steps(1, 20), (1, 100));
        assert_eq!(steps(3, 1).1, 300);
        assert_eq!(steps(3, 20), (3, 300));
    }
}
