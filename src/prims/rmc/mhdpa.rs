//! `mhdpa(M, x, heads, head_size, key_size = 0, attention_mlp_layers = 2, blocks = 1)`: the
//! attention half of the Relational Memory Core (RMC paper Eq. 1–2, Fig. 1).
//!
//! Shapes: `M: [N, D]`, `x: [D]` with `D = heads · head_size` → `M̃: [N, D]`.
//! `x` must already be projected to the memory size by the spec (`linear(x, D)`, as Sonnet's
//! `Linear(mem_size)` on the flattened input); the same projected row feeds `rmcGate`.
//!
//! Per block, on the `N + 1` rows of `Y = [M; x]` (Eq. 2):
//! - `[q k v] = LN(W Y + b)` on every row, split per head (head-major, `key_size` for `q`, `k`,
//!   `head_size` for `v`), `q ← q / √key_size`;
//! - `A_h = softmax(q_h k_hᵀ) v_h` over the `N + 1` key rows, heads concatenated (Eq. 1);
//! - `Y ← LN(Y + A)`, then `Y ← LN(Y + MLP(Y))` with a row-wise MLP.
//!
//! Finally the input row is dropped. Follows the official Sonnet code, not the L0SG port
//! (docs/models.md, RMC): **all `N + 1` rows are queries** (the paper's Eq. 2 takes queries from
//! `M` only); every layer norm is **per row** over the feature axis (eps 1e-5); the MLP has
//! `attention_mlp_layers` **distinct** `D → D` layers with ReLU between them and **none after
//! the last**; with `blocks > 1` each block has its own qkv layer and layer norms while the MLP
//! is shared, and the input row is carried (attended) through all blocks and dropped only at
//! the end — so `blocks = 2` is not the same as calling `mhdpa` twice. Linear layers use
//! PyTorch's default init (U(±1/√fan_in)) like every memctl primitive; Sonnet uses a truncated
//! normal with zero bias. `key_size = 0` means `key_size = head_size` (Sonnet's default).

use candle_core::{D, Tensor};

use crate::kernels::cpu::dense::Transposed;
use crate::prims::prelude::*;

#[path = "mhdpa_train.rs"]
mod train;

primitive! {
    Mhdpa = "mhdpa",
    "RMC multi-head dot product attention over [M; x], residual MLP and layer norms (RMC Eq. 1-2, Sonnet form)",
    args: [
        tensor("M"), tensor("x"), int("heads"), int("head_size"), int_or("key_size", 0),
        int_or("attention_mlp_layers", 2), int_or("blocks", 1),
    ],
    op: MhdpaOp::new,
}

fn examples() -> Vec<Example> {
    use crate::signature::example_args::*;
    let args = |n: usize, heads: i64, head_size: i64| {
        let d = (heads * head_size) as usize;
        vec![("M", t(&[n, d])), ("x", t(&[d])), ("heads", int(heads)), ("head_size", int(head_size))]
    };
    let mut two_blocks = args(2, 1, 3);
    two_blocks.extend([("blocks", int(2)), ("key_size", int(2)), ("attention_mlp_layers", int(1))]);
    vec![Example::new(args(2, 2, 2)), Example::new(two_blocks)]
}

/// The shape of the attention: `heads` heads with keys (and queries) of `key_size` and
/// values of `head_size`.
#[derive(Clone, Copy, Debug)]
struct Heads {
    heads: usize,
    key_size: usize,
    head_size: usize,
}

/// One attention block's parameters: the `qkv` projection with its layer norm, and the layer
/// norms after the attention and after the MLP.
struct Block {
    qkv: Dense,
    qkv_ln: Norm,
    attn_ln: Norm,
    mlp_ln: Norm,
}

struct Config {
    /// Memory slots.
    n: usize,
    heads: Heads,
    blocks: Vec<Block>,
    /// The attention MLP, shared by every block.
    mlp: Vec<Dense>,
}

fn configure(args: &Args) -> Result<(Config, Inferred), PrimError> {
    let m = args.shape_of_rank("M", 2, "a memory [slots, size]")?;
    let (n, d) = (m[0], m[1]);
    let heads = args.size("heads")?;
    let head_size = args.size("head_size")?;
    if heads * head_size != d {
        return Err(PrimError::new(PrimErrorKind::HeadSizes { d, heads, head_size }).on("M").hint(Hint::RmcSize));
    }
    let x = args.shape("x")?;
    if x != &vec![d] {
        return Err(PrimError::shape("x", &[d], x, "(one row of the memory)").hint(Hint::ProjectInput { d }));
    }
    let key_size = match args.value("key_size")?.as_int() {
        Some(0) => head_size,
        _ => args.size("key_size")?,
    };
    let layers = args.size("attention_mlp_layers")?;
    let block_count = args.size("blocks")?;
    let qkv = heads * (2 * key_size + head_size);
    let rows = n + 1;
    let mut params = ParamList::new();
    let blocks = (0..block_count)
        .map(|b| Block {
            qkv: params.dense(&format!("block{b}.qkv"), d, qkv),
            qkv_ln: params.norm(&format!("block{b}.qkv_ln"), qkv),
            attn_ln: params.norm(&format!("block{b}.attn_ln"), d),
            mlp_ln: params.norm(&format!("block{b}.mlp_ln"), d),
        })
        .collect();
    let mlp = (0..layers).map(|l| params.dense(&format!("mlp.layer{l}"), d, d)).collect();
    let per_block = 2 * rows * d * qkv
        + 8 * rows * qkv
        + 2 * heads * rows * rows * (key_size + head_size)
        + 5 * heads * rows * rows
        + layers * 2 * rows * d * d
        + 20 * rows * d;
    let config = Config { n, heads: Heads { heads, key_size, head_size }, blocks, mlp };
    // Each block's attention weights, [heads, N + 1, N + 1], kept for the backward: of the
    // order N², where the outputs are N × d.
    let attention = block_count * heads * rows * rows;
    let inferred = Inferred::new(vec![Ty::Tensor(vec![n, d])], params.into_decls(), (block_count * per_block) as u64)
        .saving(attention as u64);
    Ok((config, inferred))
}

struct MhdpaOp {
    config: Config,
    /// The weights' transposes for the training forward, per block's `qkv` and per MLP layer.
    qkv_t: Vec<Transposed>,
    mlp_t: Vec<Transposed>,
}

impl MhdpaOp {
    fn new(config: Config) -> MhdpaOp {
        let qkv_t = config.blocks.iter().map(|_| Transposed::default()).collect();
        let mlp_t = config.mlp.iter().map(|_| Transposed::default()).collect();
        MhdpaOp { config, qkv_t, mlp_t }
    }
}

impl WithProducts for MhdpaOp {
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let Config { n, heads, blocks, mlp } = &self.config;
        let [m, x] = op::inputs("mhdpa", inputs)?;
        let batch = m.dim(0)?.max(x.dim(0)?);
        let d = heads.heads * heads.head_size;
        let m = m.broadcast_as((batch, *n, d))?;
        let x = x.broadcast_as((batch, d))?.unsqueeze(1)?;
        let mut y = Tensor::cat(&[&m, &x], 1)?; // [B, N+1, D]
        let norm = |t: &Tensor, ln: &Norm| products.layer_norm(t, ln.weight.of(params), ln.bias.of(params));
        for block in blocks {
            let qkv = norm(
                &products.dense(&y, block.qkv.weight.of(params), Some(block.qkv.bias.of(params)))?,
                &block.qkv_ln,
            )?;
            let (attended, _) = attend(*heads, &qkv)?;
            y = norm(&(y + attended)?, &block.attn_ln)?;
            let mut h = y.clone();
            for (l, layer) in mlp.iter().enumerate() {
                h = products.dense(&h, layer.weight.of(params), Some(layer.bias.of(params)))?;
                if l + 1 < mlp.len() {
                    h = h.relu()?;
                }
            }
            y = norm(&(y + h)?, &block.mlp_ln)?;
        }
        Ok(vec![y.narrow(1, 0, *n)?])
    }
}

/// Multi-head attention of the rows of `qkv: [B, R, heads·(2k+v)]` (head-major) over
/// themselves: the concatenated head outputs `[B, R, heads·v]` and the attention weights
/// `[B, heads, R, R]` (each row a softmax over the `R` key rows).
fn attend(shape: Heads, qkv: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
    let (batch, rows, _) = qkv.dims3()?;
    let Heads { heads: h, key_size: k, head_size: v } = shape;
    let qkv = qkv.reshape((batch, rows, h, 2 * k + v))?.transpose(1, 2)?; // [B, H, R, 2k+v]
    let q = (qkv.narrow(D::Minus1, 0, k)?.contiguous()? * (k as f64).powf(-0.5))?;
    let keys = qkv.narrow(D::Minus1, k, k)?.transpose(2, 3)?.contiguous()?;
    let values = qkv.narrow(D::Minus1, 2 * k, v)?.contiguous()?;
    let weights = crate::kernels::cuda::layers::softmax::softmax_last(&q.matmul(&keys)?)?; // [B, H, R, R]
    let out = weights.matmul(&values)?.transpose(1, 2)?.reshape((batch, rows, h * v))?;
    Ok((out, weights))
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::*;
    use crate::prims::contract::testing::*;

    fn args(n: usize, heads: i64, head_size: i64) -> Vec<(&'static str, TArg)> {
        let d = (heads * head_size) as usize;
        vec![("M", t(&[n, d])), ("x", t(&[d])), ("heads", int(heads)), ("head_size", int(head_size))]
    }

    #[test]
    fn shapes_and_parameters() {
        // RMC Nth-farthest: 8 slots, 8 heads of 32 → D = 256.
        assert_eq!(out_shapes("mhdpa", &args(8, 8, 32)), vec![vec![8, 256]]);
        // D = 6 (2 heads of 3), key_size 3: qkv 6 → 2·9 = 18: 6·18 + 18; qkv LN 2·18;
        // two memory LNs 2·2·6; MLP 2 layers 6 → 6: 2·(36 + 6).
        let one_block = 6 * 18 + 18 + 36 + 24 + 2 * 42;
        assert_eq!(param_count("mhdpa", &args(4, 2, 3)), one_block);
        // Each extra block adds its own qkv layer and layer norms; the MLP is shared.
        let mut two = args(4, 2, 3);
        two.push(("blocks", int(2)));
        assert_eq!(param_count("mhdpa", &two), 2 * one_block - 2 * 42);
        // key_size 2: qkv 6 → 2·(2 + 2 + 3) = 14; three MLP layers.
        let mut custom = args(4, 2, 3);
        custom.extend([("key_size", int(2)), ("attention_mlp_layers", int(3))]);
        assert_eq!(param_count("mhdpa", &custom), 6 * 14 + 14 + 28 + 24 + 3 * 42);
        let bad = [("M", t(&[4, 6])), ("x", t(&[6])), ("heads", int(4)), ("head_size", int(2))];
        assert!(error("mhdpa", &bad).contains("heads · head_size = 4 · 2 = 8"));
        let bad_x = [("M", t(&[4, 6])), ("x", t(&[5])), ("heads", int(2)), ("head_size", int(3))];
        assert!(error("mhdpa", &bad_x).contains("`x` must have shape [6]"));
    }

    fn heads(heads: usize, key_size: usize, head_size: usize) -> Heads {
        Heads { heads, key_size, head_size }
    }

    #[test]
    fn attention_rows_sum_to_one() {
        let dev = Device::Cpu;
        let qkv = Tensor::randn(0.0, 2.0, (2, 4, 3 * (2 * 2 + 5)), &dev).unwrap();
        let (out, weights) = attend(heads(3, 2, 5), &qkv).unwrap();
        assert_eq!(out.dims(), &[2, 4, 15]);
        assert_eq!(weights.dims(), &[2, 3, 4, 4]);
        let sums = weights.sum(3).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
        assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-12), "{sums:?}");
        let w = weights.flatten_all().unwrap().to_vec1::<f64>().unwrap();
        assert!(w.iter().all(|&p| p > 0.0));
    }

    #[test]
    fn equal_keys_attend_uniformly_to_the_mean_value() {
        // One head, key size 1, value size 2, 3 rows; all keys 1 → every query sees the mean of
        // the values: rows [q, k, v1, v2] = [·, 1, 0, 3], [·, 1, 3, 6], [·, 1, 6, 0].
        let rows = [[5.0f64, 1.0, 0.0, 3.0], [-1.0, 1.0, 3.0, 6.0], [0.5, 1.0, 6.0, 0.0]];
        let qkv = Tensor::new(&[rows], &Device::Cpu).unwrap();
        let (out, _) = attend(heads(1, 1, 2), &qkv).unwrap();
        let out = out.flatten_all().unwrap().to_vec1::<f64>().unwrap();
        for row in out.chunks(2) {
            assert!((row[0] - 3.0).abs() < 1e-12 && (row[1] - 3.0).abs() < 1e-12, "{out:?}");
        }
        // Dot-product weights, scaled by 1/√k: keys 0 and ln 2 for a query of 1 → weights 1/3, 2/3.
        let qkv = Tensor::new(&[[[1.0f64, 0.0, 3.0], [0.0, 2f64.ln(), 6.0]]], &Device::Cpu).unwrap();
        let (out, _) = attend(heads(1, 1, 1), &qkv).unwrap();
        let first = out.flatten_all().unwrap().to_vec1::<f64>().unwrap()[0];
        assert!((first - (3.0 / 3.0 + 6.0 * 2.0 / 3.0)).abs() < 1e-12, "{first}");
    }

    #[test]
    fn output_rows_are_layer_normalised() {
        // The last op is a per-row layer norm with weight 1 and bias 0 at init.
        let data = vec![(0..24).map(|i| (i as f64 * 0.37).sin()).collect(), vec![0.3, -0.2, 0.9, 0.1, -0.5, 0.4]];
        let out = run("mhdpa", &args(4, 2, 3), &data);
        for row in out.chunks(6) {
            let mean = row.iter().sum::<f64>() / 6.0;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 6.0;
            assert!(mean.abs() < 1e-9 && (var - 1.0).abs() < 1e-3, "mean {mean}, var {var}");
        }
    }
}
