//! NAM as efficient attention (NAM §3.5, §5.3): run time and peak memory of one attention
//! layer, forward and backward, against sequence length, `namAttend` next to softmax attention.
//!
//!     cargo bench --bench linear_attention
//!
//! Self-attention over one sequence of `S` tokens (batch 1, width d = 64, one head), queries,
//! keys and values given: `namAttend` (`μ(Q) (μ(K)ᵀ V)`, its manual backward, as training
//! runs it) against `softmax(Q Kᵀ / √d) V` written in candle ops and differentiated by
//! candle's autograd (memctl has no softmax self-attention primitive; this is the textbook
//! form). Peak memory is the most bytes the process held on the heap during the call, over
//! what it held before (a counting allocator), so it counts the layer's own buffers only.
//!
//! Prints one Markdown row per length: the table of docs/performance.md.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use candle_core::{D, Device, Tensor, Var};
use memctl::graph::Ty;
use memctl::prims::contract::Backward;
use memctl::prims::get;
use memctl::signature::{ArgVal, Args};
use memctl::value::Value;

/// The system allocator, counting the bytes held now and the most held since the last reset.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its median time (ms) over `iters` after one warm-up, and the peak
/// heap bytes it held above what was held before it (MiB).
fn measure(iters: usize, mut f: impl FnMut() -> candle_core::Result<()>) -> candle_core::Result<(f64, f64)> {
    f()?;
    let mut times = vec![];
    let mut peak = 0usize;
    for _ in 0..iters {
        let before = HELD.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let t0 = Instant::now();
        f()?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        peak = peak.max(PEAK.load(Ordering::Relaxed) - before);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], peak as f64 / (1 << 20) as f64))
}

fn nam(q: &Tensor, k: &Tensor, v: &Tensor) -> candle_core::Result<()> {
    let (_, s, d) = q.dims3()?;
    let prim = get("namAttend").expect("namAttend is registered");
    let shape = |w: usize| ArgVal::Tensor(Ty::Tensor(vec![s, w]));
    let args =
        Args { signature: prim.signature(), values: vec![shape(d), shape(d), shape(d), ArgVal::Value(Value::Int(1))] };
    let op = prim.lower(&args).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
    let train = op.manual().expect("namAttend has a manual backward");
    let (outputs, saved) = train.forward_train(&[q, k, v], &[])?;
    let grads = [Some(outputs[0].ones_like()?)];
    let inputs = [q.clone(), k.clone(), v.clone()];
    let b =
        Backward { inputs: &inputs, params: &[], outputs: &outputs, saved: &saved, grads: &grads, needs: &[true; 3] };
    let g = train.backward(&b, &mut [])?;
    assert!(g.iter().all(Option::is_some));
    Ok(())
}

fn softmax(q: &Var, k: &Var, v: &Var) -> candle_core::Result<()> {
    let d = q.dim(D::Minus1)? as f64;
    let scores = (q.matmul(&k.t()?)? / d.sqrt())?;
    // Shifted by the row maximum (detached: softmax does not depend on it).
    let e = scores.broadcast_sub(&scores.max_keepdim(D::Minus1)?.detach())?.exp()?;
    let p = e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?;
    let out = p.matmul(v)?;
    let g = out.sum_all()?.backward()?;
    assert!(g.get(q).is_some() && g.get(k).is_some() && g.get(v).is_some());
    Ok(())
}

fn main() -> candle_core::Result<()> {
    memctl::ftz::enable();
    let d = 64;
    let dev = Device::Cpu;
    println!("| tokens | namAttend ms | namAttend MiB | softmax ms | softmax MiB | time ratio | memory ratio |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for s in [1024, 2048, 4096, 8192, 16384] {
        let x = || Tensor::randn(0f32, 1.0, (1, s, d), &dev);
        let (q, k, v) = (x()?, x()?, x()?);
        let iters = if s >= 8192 { 3 } else { 5 };
        let (nam_ms, nam_mib) = measure(iters, || nam(&q, &k, &v))?;
        let (qv, kv, vv) = (Var::from_tensor(&q)?, Var::from_tensor(&k)?, Var::from_tensor(&v)?);
        let (soft_ms, soft_mib) = measure(iters, || softmax(&qv, &kv, &vv))?;
        println!(
            "| {s} | {nam_ms:.2} | {nam_mib:.1} | {soft_ms:.1} | {soft_mib:.0} | {:.0}× | {:.0}× |",
            soft_ms / nam_ms,
            soft_mib / nam_mib
        );
    }
    Ok(())
}
