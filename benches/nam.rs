//! Times `namWR` (NAM §3.1) forward and forward + backward at the paper's sizes, f32 on CPU.
//!
//!     cargo bench --bench nam
//!
//! One call = one LSAM write step for a whole batch: `M: [B, H, d/H, d/H]`, `k, v: [B, d]`,
//! `pw, pe: [B, H]`; the backward pass computes gradients for all five inputs. Prints the
//! median over a few iterations (after one warm-up) for NAM's "tiny" model size (d = 256,
//! H = 2) and LSAM "medium" (d = 1024, H = 8), batch 32.

use std::time::Instant;

use candle_core::{DType, Device, Tensor, Var};
use memctl::graph::Ty;
use memctl::prims::get;
use memctl::signature::{ArgVal, Args};
use memctl::value::Value;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn bench(batch: usize, d: usize, heads: usize, iters: usize) -> candle_core::Result<()> {
    let prim = get("namWR").expect("namWR is registered");
    let dh = d / heads;
    let tensor = |s: Vec<usize>| ArgVal::Tensor(Ty::Tensor(s));
    let args = Args {
        signature: prim.signature(),
        values: vec![
            tensor(vec![heads, dh, dh]),
            tensor(vec![d]),
            tensor(vec![d]),
            tensor(vec![heads]),
            tensor(vec![heads]),
            ArgVal::Value(Value::Int(heads as i64)),
        ],
    };
    let op = prim.lower(&args).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
    let dev = Device::Cpu;
    let var = |dims: &[usize], scale: f64| -> candle_core::Result<Var> {
        Var::from_tensor(&(Tensor::randn(0f32, 1.0, dims, &dev)? * scale)?)
    };
    let m = var(&[batch, heads, dh, dh], 0.1)?;
    let k = var(&[batch, d], 1.0)?;
    let v = var(&[batch, d], 1.0)?;
    let pw = Var::from_tensor(&Tensor::rand(0f32, 1.0, (batch, heads), &dev)?)?;
    let pe = Var::from_tensor(&Tensor::rand(0f32, 1.0, (batch, heads), &dev)?)?;
    // The loss Σ M' (gradient of ones). Its own backward is not free in candle (fresh
    // gradient buffers of M's size): it is timed alone below, for reference.
    let loss = |x: &Tensor| x.sum_all();
    let inputs = [m.as_tensor(), k.as_tensor(), v.as_tensor(), pw.as_tensor(), pe.as_tensor()];

    let (mut fwd, mut both) = (vec![], vec![]);
    for i in 0..=iters {
        let t0 = Instant::now();
        let out = op.forward(&inputs, &[])?.remove(0);
        let t1 = Instant::now();
        let grads = loss(&out)?.backward()?;
        let t2 = Instant::now();
        assert!(grads.get(m.as_tensor()).is_some() && grads.get(pe.as_tensor()).is_some());
        if i > 0 {
            fwd.push((t1 - t0).as_secs_f64() * 1e3);
            both.push((t2 - t0).as_secs_f64() * 1e3);
        }
    }
    // Reference: the loss alone, forward + backward with respect to M.
    let mut reference = vec![];
    for _ in 0..iters {
        let t0 = Instant::now();
        let _ = loss(m.as_tensor())?.backward()?;
        reference.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let mib = (batch * heads * dh * dh * DType::F32.size_in_bytes()) as f64 / (1 << 20) as f64;
    println!(
        "namWR  B = {batch:>3}  d = {d:>5}  H = {heads}  (M {mib:>5.1} MiB)   forward {:>8.2} ms   \
         forward+backward {:>8.2} ms   (median of {iters}; the loss Σ M alone: {:.2} ms)",
        median(fwd),
        median(both),
        median(reference)
    );
    Ok(())
}

fn main() -> candle_core::Result<()> {
    memctl::ftz::enable();
    bench(32, 256, 2, 20)?; // NAM "tiny": d = 2·128, H = 2
    bench(32, 1024, 8, 10)?; // LSAM "medium": d = 2·512, H = 8
    Ok(())
}
