//! Forward + backward timings of the RMC and Kanerva primitives (and `samRead` for scale).
//!
//!     cargo bench --bench rmc_kanerva
//!
//! Each case builds the primitive through the registry as a spec would, on random f32 data
//! with every input and parameter a `Var`, and times `forward` + `backward` of a random
//! weighting of the outputs. Prints the median wall time in ms over several repetitions.
//! The Kanerva grid reproduces PKM Fig. 1C–D's axes (run time against m and k, batch 24,
//! c = 50); the paper fits c + a·k + b·(m/k)³.

use std::time::Instant;

use candle_core::{DType, Device, Tensor, Var};
use memctl::graph::Ty;
use memctl::prims;
use memctl::signature::{ArgKind, ArgVal, Args};
use memctl::value::Value;

/// A call: tensor arguments with their per-example shapes, and option values.
struct Call {
    prim: &'static str,
    tensors: Vec<(&'static str, Vec<usize>)>,
    options: Vec<(&'static str, Value)>,
}

fn bind(call: &Call) -> Args {
    let p = prims::get(call.prim).expect("registered primitive");
    let values = p
        .signature()
        .iter()
        .map(|spec| {
            if let Some((_, s)) = call.tensors.iter().find(|(n, _)| *n == spec.name) {
                ArgVal::Tensor(Ty::Tensor(s.clone()))
            } else if let Some((_, v)) = call.options.iter().find(|(n, _)| *n == spec.name) {
                ArgVal::Value(v.clone())
            } else {
                match (spec.kind, spec.default.value()) {
                    (ArgKind::Value(_), Some(v)) => ArgVal::Value(v),
                    _ => ArgVal::Absent,
                }
            }
        })
        .collect();
    Args { signature: p.signature(), values }
}

/// Median ms of forward + backward; `init` gives each tensor input's data for a batch.
fn time(call: &Call, batch: usize, init: &dyn Fn(&str, &[usize]) -> Tensor) -> f64 {
    let p = prims::get(call.prim).expect("registered primitive");
    let args = bind(call);
    let inferred = p.infer(&args).unwrap_or_else(|e| panic!("{}: {e}", call.prim));
    let op = p.lower(&args).unwrap_or_else(|e| panic!("{}: {e}", call.prim));
    let dev = Device::Cpu;
    let inputs: Vec<Var> = p
        .signature()
        .iter()
        .filter_map(|spec| call.tensors.iter().find(|(n, _)| *n == spec.name))
        .map(|(name, shape)| {
            let mut dims = vec![batch];
            dims.extend(shape);
            Var::from_tensor(&init(name, &dims)).expect("var")
        })
        .collect();
    let params: Vec<Var> = inferred
        .params
        .iter()
        .map(|pd| Var::from_tensor(&(Tensor::randn(0f32, 0.1, pd.shape.clone(), &dev).expect("randn"))).expect("var"))
        .collect();
    let step = || -> f64 {
        let ins: Vec<&Tensor> = inputs.iter().map(|v| v.as_tensor()).collect();
        let ps: Vec<&Tensor> = params.iter().map(|v| v.as_tensor()).collect();
        let start = Instant::now();
        let outs = op.forward(&ins, &ps).expect("forward");
        let mut loss = Tensor::zeros((), DType::F32, &dev).expect("zeros");
        for o in &outs {
            let w = Tensor::randn(0f32, 1.0, o.dims(), &dev).expect("randn");
            loss = (loss + (o * w).expect("mul").sum_all().expect("sum")).expect("add");
        }
        let grads = loss.backward().expect("backward");
        std::hint::black_box(grads);
        start.elapsed().as_secs_f64() * 1e3
    };
    let first = step();
    let reps = ((2000.0 / first.max(1e-3)) as usize).clamp(3, 30);
    let mut times: Vec<f64> = (0..reps).map(|_| step()).collect();
    times.sort_by(|a, b| a.total_cmp(b));
    times[reps / 2]
}

fn randn(_: &str, dims: &[usize]) -> Tensor {
    Tensor::randn(0f32, 1.0, dims, &Device::Cpu).expect("randn")
}

fn main() {
    memctl::ftz::enable();
    println!("forward + backward, median ms (f32, CPU, {} threads)", rayon::current_num_threads());

    let mhdpa = Call {
        prim: "mhdpa",
        tensors: vec![("M", vec![8, 256]), ("x", vec![256])],
        options: vec![("heads", Value::Int(8)), ("head_size", Value::Int(32))],
    };
    println!("mhdpa   N = 8, 8 heads × 32 (D = 256), batch 32: {:9.2} ms", time(&mhdpa, 32, &randn));

    let sam = Call { prim: "samRead", tensors: vec![("M", vec![96, 96])], options: vec![("nq", Value::Int(8))] };
    println!("samRead d = 96, nq = 8, batch 32:                {:9.2} ms", time(&sam, 32, &randn));

    println!("kanervaUpdate, c = 50, batch 24 (rows m, columns k):");
    let ks = [1usize, 2, 5, 10];
    print!("{:>8}", "m \\ k");
    for k in ks {
        print!("{k:>10}");
    }
    println!();
    let c = 50;
    for m in [30usize, 60, 120, 300, 600] {
        print!("{m:>8}");
        for k in ks {
            let mi = m / k;
            let call = Call {
                prim: "kanervaUpdate",
                tensors: vec![("R", vec![k, c, mi]), ("V", vec![k, mi, mi]), ("z", vec![c]), ("eta", vec![k])],
                options: vec![],
            };
            let init = |name: &str, dims: &[usize]| match name {
                "V" => Tensor::eye(mi, DType::F32, &Device::Cpu)
                    .and_then(|e| e.broadcast_as(dims)?.contiguous())
                    .expect("eye"),
                "eta" => (Tensor::rand(0f32, 1.0, dims, &Device::Cpu).expect("rand") + 0.5).expect("add"),
                _ => randn(name, dims),
            };
            print!("{:>10.2}", time(&call, 24, &init));
        }
        println!();
    }
}
