//! Test helpers shared by every primitive's tests: bind arguments by name, run a call on
//! given data, and check autograd against central finite differences in f64.

use candle_core::{DType, Device, Tensor, Var};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use std::sync::Arc;

use super::{Backward, Lower, Op, ParamGrad};
use crate::prims::registry::get;
use crate::signature::{Args, Example, ExampleArg, Inferred, PrimError, Primitive};

/// A test argument: an example call's argument.
pub type TArg = ExampleArg;

pub use crate::signature::example_args::*;

fn prim(name: &str) -> &'static dyn Lower {
    get(name).unwrap_or_else(|| panic!("no primitive {name}"))
}

fn example(args: &[(&'static str, TArg)]) -> Example {
    Example::new(args.to_vec())
}

/// Binds named test arguments to the primitive's signature, filling defaults.
pub fn bind(prim: &dyn Primitive, args: &[(&'static str, TArg)]) -> Args {
    example(args).bind(prim).unwrap_or_else(|| panic!("{} has no argument among {args:?}", prim.name()))
}

/// A checked call: its shape inference and its op.
pub struct Instance {
    pub inferred: Inferred,
    pub op: Arc<dyn Op>,
}

pub fn instance(name: &str, args: &[(&'static str, TArg)]) -> Result<Instance, PrimError> {
    let p = prim(name);
    let bound = bind(p, args);
    Ok(Instance { inferred: p.infer(&bound)?, op: p.lower(&bound)? })
}

/// A call that must fit (a test's own arguments).
pub fn fitting(name: &str, args: &[(&'static str, TArg)]) -> Instance {
    instance(name, args).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn out_shapes(name: &str, args: &[(&'static str, TArg)]) -> Vec<Vec<usize>> {
    let inst = fitting(name, args);
    inst.inferred.outputs.iter().map(|t| t.shape().cloned().unwrap_or_default()).collect()
}

pub fn param_count(name: &str, args: &[(&'static str, TArg)]) -> usize {
    let inst = fitting(name, args);
    inst.inferred.params.iter().map(|p| p.shape.iter().product::<usize>()).sum()
}

/// The error of a call that must not fit.
pub fn rejection(name: &str, args: &[(&'static str, TArg)]) -> PrimError {
    match instance(name, args) {
        Ok(_) => panic!("{name} accepted arguments it should reject"),
        Err(e) => e,
    }
}

/// The error message of a call that must not fit.
pub fn error(name: &str, args: &[(&'static str, TArg)]) -> String {
    rejection(name, args).to_string()
}

/// Tensor inputs (in signature order) of a call, as per-example shapes or vocab sizes.
fn tensor_inputs(name: &str, args: &[(&'static str, TArg)]) -> Vec<TArg> {
    example(args).tensor_args(prim(name))
}

/// Runs a call on one example (batch 1) with the given input data, parameters at their init
/// (seeded), and returns the first output flattened.
pub fn run(name: &str, args: &[(&'static str, TArg)], data: &[Vec<f64>]) -> Vec<f64> {
    run_all(name, args, data).remove(0)
}

/// Like [`run`], every output.
pub fn run_all(name: &str, args: &[(&'static str, TArg)], data: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let inst = fitting(name, args);
    let dev = Device::Cpu;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let inputs: Vec<Tensor> = tensor_inputs(name, args)
        .iter()
        .zip(data)
        .map(|(a, d)| match a {
            TArg::Tensor(s) | TArg::Shared(s) => {
                let mut dims = vec![1];
                dims.extend(s);
                Tensor::from_vec(d.clone(), dims, &dev).unwrap()
            }
            _ => Tensor::from_vec(d.iter().map(|&v| v as u32).collect::<Vec<_>>(), 1, &dev).unwrap(),
        })
        .collect();
    let params: Vec<Tensor> = inst
        .inferred
        .params
        .iter()
        .map(|pd| {
            let v = super::init::values(&pd.init, pd.shape.iter().product(), &mut rng);
            Tensor::from_vec(v, pd.shape.clone(), &dev).unwrap()
        })
        .collect();
    let outs = inst.op.forward(&inputs.iter().collect::<Vec<_>>(), &params.iter().collect::<Vec<_>>()).unwrap();
    outs.iter().map(|o| o.flatten_all().unwrap().to_vec1::<f64>().unwrap()).collect()
}

const BATCH: usize = 2;

fn normal(rng: &mut ChaCha8Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| rng.sample::<f64, _>(rand_distr::StandardNormal) * scale).collect()
}

/// Checks the gradient of `Σ_k ⟨out_k, R_k⟩` (fixed random `R_k`) with respect to every float
/// input and parameter against central finite differences, in f64, on random values.
pub fn grad_check(name: &str, args: &[(&'static str, TArg)]) {
    let inst = fitting(name, args);
    let dev = Device::Cpu;
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut vars: Vec<(String, Var)> = vec![];
    let mut inputs: Vec<Tensor> = vec![];
    for (i, a) in tensor_inputs(name, args).iter().enumerate() {
        match a {
            TArg::Tensor(s) | TArg::Shared(s) => {
                let mut dims = vec![if matches!(a, TArg::Shared(_)) { 1 } else { BATCH }];
                dims.extend(s);
                let n = dims.iter().product();
                let v = Var::from_tensor(&Tensor::from_vec(normal(&mut rng, n, 0.8), dims, &dev).unwrap()).unwrap();
                inputs.push(v.as_tensor().clone());
                vars.push((format!("input {i}"), v));
            }
            TArg::Tokens(vocab) => {
                let ids: Vec<u32> = (0..BATCH).map(|_| rng.random_range(0..*vocab as u32)).collect();
                inputs.push(Tensor::from_vec(ids, BATCH, &dev).unwrap());
            }
            TArg::Value(_) => unreachable!("tensor_inputs keeps tensors only"),
        }
    }
    let mut params = vec![];
    for pd in &inst.inferred.params {
        let n = pd.shape.iter().product();
        let v = Var::from_tensor(&Tensor::from_vec(normal(&mut rng, n, 0.5), pd.shape.clone(), &dev).unwrap()).unwrap();
        params.push(v.as_tensor().clone());
        vars.push((pd.name.clone(), v));
    }
    let forward = |inputs: &[Tensor], params: &[Tensor]| -> Vec<Tensor> {
        inst.op.forward(&inputs.iter().collect::<Vec<_>>(), &params.iter().collect::<Vec<_>>()).unwrap()
    };
    let outs = forward(&inputs, &params);
    let weights: Vec<Tensor> =
        outs.iter().map(|o| Tensor::from_vec(normal(&mut rng, o.elem_count(), 1.0), o.dims(), &dev).unwrap()).collect();
    let loss_of = |outs: &[Tensor]| -> Tensor {
        let mut total = Tensor::zeros((), DType::F64, &dev).unwrap();
        for (o, w) in outs.iter().zip(&weights) {
            total = (total + (o * w).unwrap().sum_all().unwrap()).unwrap();
        }
        total
    };
    let grads = loss_of(&outs).backward().unwrap();
    let h = 1e-6;
    for (label, var) in &vars {
        let analytic = grads
            .get(var.as_tensor())
            .map(|g| g.flatten_all().unwrap().to_vec1::<f64>().unwrap())
            .unwrap_or_else(|| vec![0.0; var.elem_count()]);
        let base = var.as_tensor().flatten_all().unwrap().to_vec1::<f64>().unwrap();
        let n = base.len();
        let coords: Vec<usize> =
            if n <= 24 { (0..n).collect() } else { (0..24).map(|_| rng.random_range(0..n)).collect() };
        let mut any_nonzero = false;
        for &c in &coords {
            let mut numeric = 0.0;
            for (sign, delta) in [(1.0, h), (-1.0, -h)] {
                let mut v = base.clone();
                v[c] += delta;
                let t = Tensor::from_vec(v, var.dims(), &dev).unwrap();
                let (mut ins, mut ps) = (inputs.clone(), params.clone());
                if let Some(pi) = inst.inferred.params.iter().position(|pd| &pd.name == label) {
                    ps[pi] = t;
                } else {
                    let idx: usize = label.trim_start_matches("input ").parse().unwrap();
                    ins[idx] = t;
                }
                let l = loss_of(&forward(&ins, &ps)).to_scalar::<f64>().unwrap();
                numeric += sign * l / (2.0 * h);
            }
            let a = analytic[c];
            any_nonzero |= a.abs() > 1e-9;
            assert!(
                (a - numeric).abs() <= 1e-6 + 1e-5 * numeric.abs().max(a.abs()),
                "{name}: d loss / d {label}[{c}]: autograd {a}, finite differences {numeric}"
            );
        }
        // A gradient that is zero everywhere usually means candle dropped it.
        assert!(any_nonzero || n == 0, "{name}: gradient with respect to {label} is zero at every checked element");
    }
}

/// For a primitive with a manual backward ([`Op::manual`]), on random f64 values (batch
/// 3, shared inputs batch 1): `forward_train` gives `forward`'s outputs; `backward` gives the
/// input and parameter gradients candle's autograd gives for `Σ_k ⟨out_k, R_k⟩` (random
/// `R_k`), also with only one output's gradient given, and sums parameter gradients into
/// what its accumulators already hold.
pub fn manual_backward_check(name: &str, args: &[(&'static str, TArg)]) {
    const B: usize = 3;
    let inst = fitting(name, args);
    assert!(inst.op.manual().is_some(), "{name} has no manual backward");
    let dev = Device::Cpu;
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut inputs: Vec<Tensor> = vec![];
    for a in tensor_inputs(name, args) {
        inputs.push(match &a {
            TArg::Tensor(s) | TArg::Shared(s) => {
                let mut dims = vec![if matches!(a, TArg::Shared(_)) { 1 } else { B }];
                dims.extend(s);
                let n = dims.iter().product();
                Tensor::from_vec(normal(&mut rng, n, 0.8), dims, &dev).unwrap()
            }
            TArg::Tokens(vocab) => {
                let ids: Vec<u32> = (0..B).map(|_| rng.random_range(0..*vocab as u32)).collect();
                Tensor::from_vec(ids, B, &dev).unwrap()
            }
            TArg::Value(_) => unreachable!("tensor_inputs keeps tensors only"),
        });
    }
    let params: Vec<Tensor> = inst
        .inferred
        .params
        .iter()
        .map(|pd| Tensor::from_vec(normal(&mut rng, pd.shape.iter().product(), 0.5), pd.shape.clone(), &dev).unwrap())
        .collect();
    let names: Vec<String> = inst.inferred.params.iter().map(|p| p.name.clone()).collect();
    check_manual(name, &*inst.op, inputs, params, &names, &mut rng);
}

/// [`manual_backward_check`] for an op built directly (e.g. a fusion): random float inputs
/// of these per-example shapes (batch 3) and parameters of these shapes.
pub fn manual_backward_check_op(name: &str, op: &dyn Op, inputs: &[Vec<usize>], params: &[Vec<usize>]) {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let inputs: Vec<Tensor> = inputs
        .iter()
        .map(|s| {
            let mut dims = vec![3];
            dims.extend(s);
            Tensor::from_vec(normal(&mut rng, dims.iter().product(), 0.8), dims, &Device::Cpu).unwrap()
        })
        .collect();
    check_manual_with_params(name, op, inputs, params, &mut rng);
}

/// [`manual_backward_check_op`] with the inputs given (e.g. token ids beside float tensors).
pub fn manual_backward_check_inputs(name: &str, op: &dyn Op, inputs: Vec<Tensor>, params: &[Vec<usize>]) {
    check_manual_with_params(name, op, inputs, params, &mut ChaCha8Rng::seed_from_u64(13));
}

/// A float input of these dimensions (batch axis included), N(0, 0.8²), from `seed`.
pub fn random_input(dims: &[usize], seed: u64) -> Tensor {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Tensor::from_vec(normal(&mut rng, dims.iter().product(), 0.8), dims, &Device::Cpu).unwrap()
}

/// Random parameters of these shapes, then [`check_manual`].
fn check_manual_with_params(name: &str, op: &dyn Op, inputs: Vec<Tensor>, params: &[Vec<usize>], rng: &mut ChaCha8Rng) {
    let params: Vec<Tensor> = params
        .iter()
        .map(|s| Tensor::from_vec(normal(rng, s.iter().product(), 0.5), s.clone(), &Device::Cpu).unwrap())
        .collect();
    let names: Vec<String> = (0..params.len()).map(|i| format!("param {i}")).collect();
    check_manual(name, op, inputs, params, &names, rng);
}

fn check_manual(
    name: &str,
    op: &dyn Op,
    inputs: Vec<Tensor>,
    params: Vec<Tensor>,
    names: &[String],
    rng: &mut ChaCha8Rng,
) {
    let dev = Device::Cpu;
    let param_refs: Vec<&Tensor> = params.iter().collect();
    let refs = |v: &[Tensor]| -> Vec<Tensor> { v.to_vec() };
    let (ins, ps) = (refs(&inputs), refs(&params));
    let outs = op.forward(&ins.iter().collect::<Vec<_>>(), &ps.iter().collect::<Vec<_>>()).unwrap();
    let manual = op.manual().unwrap_or_else(|| panic!("{name} has no manual backward"));
    let (train_outs, saved) =
        manual.forward_train(&ins.iter().collect::<Vec<_>>(), &ps.iter().collect::<Vec<_>>()).unwrap();
    assert_eq!(outs.len(), train_outs.len(), "{name}: number of outputs");
    for (k, (a, b)) in outs.iter().zip(&train_outs).enumerate() {
        assert_eq!(a.dims(), b.dims(), "{name}: output {k} shape");
        assert_close(name, &format!("output {k} of forward_train"), b, a, 1e-12);
    }
    let weights: Vec<Tensor> =
        outs.iter().map(|o| Tensor::from_vec(normal(rng, o.elem_count(), 1.0), o.dims(), &dev).unwrap()).collect();
    // Which outputs carry a gradient: all, then (for several outputs) only the last.
    let mut patterns = vec![vec![true; outs.len()]];
    if outs.len() > 1 {
        let mut last = vec![false; outs.len()];
        last[outs.len() - 1] = true;
        patterns.push(last);
    }
    for pattern in patterns {
        // candle's autograd on Var copies.
        let in_vars: Vec<Option<Var>> =
            inputs.iter().map(|t| t.dtype().is_float().then(|| Var::from_tensor(t).unwrap())).collect();
        let p_vars: Vec<Var> = params.iter().map(|t| Var::from_tensor(t).unwrap()).collect();
        let ins: Vec<Tensor> =
            inputs.iter().zip(&in_vars).map(|(t, v)| v.as_ref().map_or(t.clone(), |v| v.as_tensor().clone())).collect();
        let ps: Vec<Tensor> = p_vars.iter().map(|v| v.as_tensor().clone()).collect();
        let outs = op.forward(&ins.iter().collect::<Vec<_>>(), &ps.iter().collect::<Vec<_>>()).unwrap();
        let mut total = Tensor::zeros((), DType::F64, &dev).unwrap();
        for ((o, w), &on) in outs.iter().zip(&weights).zip(&pattern) {
            if on {
                total = (total + (o * w).unwrap().sum_all().unwrap()).unwrap();
            }
        }
        let store = total.backward().unwrap();
        // The manual backward, run twice into the same accumulators.
        let grads: Vec<Option<Tensor>> = weights.iter().zip(&pattern).map(|(w, &on)| on.then(|| w.clone())).collect();
        let needs: Vec<bool> = inputs.iter().map(|t| t.dtype().is_float()).collect();
        let backward = |needs: &[bool], acc: &mut [ParamGrad]| {
            let b = Backward {
                inputs: &inputs,
                params: &param_refs,
                outputs: &train_outs,
                saved: &saved,
                grads: &grads,
                needs,
            };
            manual.backward(&b, acc).unwrap()
        };
        let mut acc: Vec<ParamGrad> = params.iter().map(|_| ParamGrad::default()).collect();
        let mut input_grads = vec![];
        for _ in 0..2 {
            input_grads = backward(&needs, &mut acc);
        }
        assert_eq!(input_grads.len(), inputs.len(), "{name}: one gradient per input");
        for (i, (v, g)) in in_vars.iter().zip(&input_grads).enumerate() {
            let Some(v) = v else { continue };
            let expected = store.get(v.as_tensor()).cloned().unwrap_or(v.as_tensor().zeros_like().unwrap());
            let g = g.clone().unwrap_or_else(|| panic!("{name}: no gradient for input {i}"));
            assert_eq!(g.dims(), inputs[i].dims(), "{name}: shape of the gradient of input {i}");
            assert_close(name, &format!("d / d input {i} ({pattern:?})"), &g, &expected, 1e-10);
        }
        for ((pname, v), a) in names.iter().zip(&p_vars).zip(acc) {
            let expected = store.get(v.as_tensor()).cloned().unwrap_or(v.as_tensor().zeros_like().unwrap());
            let got = a.into_tensor(v.dims()).unwrap().unwrap_or(expected.zeros_like().unwrap());
            assert_close(
                name,
                &format!("d / d {pname} ({pattern:?}), summed twice"),
                &got,
                &(expected * 2.0).unwrap(),
                1e-10,
            );
        }
        // Without input gradients, the parameter gradients are the same.
        let none = vec![false; inputs.len()];
        let mut acc2: Vec<ParamGrad> = params.iter().map(|_| ParamGrad::default()).collect();
        backward(&none, &mut acc2);
        for ((pname, v), a) in names.iter().zip(&p_vars).zip(acc2) {
            let expected = store.get(v.as_tensor()).cloned().unwrap_or(v.as_tensor().zeros_like().unwrap());
            let got = a.into_tensor(v.dims()).unwrap().unwrap_or(expected.zeros_like().unwrap());
            assert_close(name, &format!("d / d {pname} without input gradients"), &got, &expected, 1e-10);
        }
    }
}

fn assert_close(name: &str, what: &str, got: &Tensor, expected: &Tensor, tol: f64) {
    let g = got.flatten_all().unwrap().to_vec1::<f64>().unwrap();
    let e = expected.flatten_all().unwrap().to_vec1::<f64>().unwrap();
    assert_eq!(g.len(), e.len(), "{name}: {what}: sizes differ");
    let scale = e.iter().fold(1e-12f64, |m, v| m.max(v.abs()));
    for (i, (a, b)) in g.iter().zip(&e).enumerate() {
        assert!((a - b).abs() <= tol * scale, "{name}: {what}[{i}]: manual {a}, candle {b} (largest {scale})");
    }
}

/// For a primitive that blocks gradients by design ([`Primitive::passes_gradients`]): neither
/// candle's autograd through its forward nor its manual backward gives its inputs a gradient.
pub fn assert_blocks_gradients(name: &str, args: &[(&'static str, TArg)]) {
    let inst = fitting(name, args);
    let dev = Device::Cpu;
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let vars: Vec<Var> = tensor_inputs(name, args)
        .iter()
        .map(|a| match a {
            TArg::Tensor(s) | TArg::Shared(s) => {
                let mut dims = vec![BATCH];
                dims.extend(s);
                let n = dims.iter().product();
                Var::from_tensor(&Tensor::from_vec(normal(&mut rng, n, 0.8), dims, &dev).unwrap()).unwrap()
            }
            _ => panic!("{name}: a gradient-blocking primitive takes float tensors"),
        })
        .collect();
    let inputs: Vec<&Tensor> = vars.iter().map(|v| v.as_tensor()).collect();
    let outs = inst.op.forward(&inputs, &[]).unwrap();
    let total = outs.iter().map(|o| o.sum_all().unwrap()).reduce(|a, b| (a + b).unwrap()).unwrap();
    let grads = total.backward().unwrap();
    for (i, v) in vars.iter().enumerate() {
        let none = grads
            .get(v.as_tensor())
            .is_none_or(|g| g.abs().unwrap().sum_all().unwrap().to_scalar::<f64>().unwrap() == 0.0);
        assert!(none, "{name}: autograd gives input {i} a gradient");
    }
    let train = inst.op.manual().unwrap_or_else(|| panic!("{name}: no manual backward"));
    let inputs: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let (outputs, saved) = train.forward_train(&refs, &[]).unwrap();
    let grads: Vec<Option<Tensor>> = outputs.iter().map(|o| Some(o.ones_like().unwrap())).collect();
    let needs = vec![true; inputs.len()];
    let b = Backward { inputs: &inputs, params: &[], outputs: &outputs, saved: &saved, grads: &grads, needs: &needs };
    assert!(
        train.backward(&b, &mut []).unwrap().iter().all(Option::is_none),
        "{name}: its manual backward gives a gradient"
    );
}
