//! memctl's reverse mode (`compile::tape`, manual backward passes with candle's autograd as
//! the per-node fallback) gives the gradients candle's autograd gives over the whole run, on
//! tiny models in f64: STM with and without gates and transfer, learned and fixed α, LSTM on
//! tokens, the PKM (`kanervaUpdate`'s two outputs, with and without the assignment network), and
//! a model that mixes fused ops with primitives that have no manual backward (`opaAttend`,
//! `matmul`, `concat`, `reshape`, `slice`, `flatten`).

use candle_core::{DType, Device, Tensor};
use memctl::check::Trial;
use memctl::train::{Autograd, Stepper, data_seed};

use crate::support::{token_lstm, trials};

const STM: &str = include_str!("../../specs/models/stm.mem");
const PKM: &str = include_str!("../../specs/models/pkm.mem");

/// The loss and every parameter's gradient of the first batch, both ways.
fn compare(trial: &Trial, tolerance: f64) {
    let device = Device::Cpu;
    let mut data = trial.task.data(data_seed(trial.config.seed), &device).unwrap();
    let batch = data.train_batch(trial.config.train.batch).unwrap();
    let tape = Stepper::with(trial, &device, DType::F64, Autograd::Tape).unwrap();
    let candle = Stepper::with(trial, &device, DType::F64, Autograd::Candle).unwrap();
    let (l1, g1) = tape.loss_and_grads(&batch).unwrap();
    let (l2, g2) = candle.loss_and_grads(&batch).unwrap();
    let what = format!(
        "{} {}",
        trial.config.model,
        trial.config.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    );
    assert!((l1 - l2).abs() <= tolerance * l2.abs(), "{what}: loss {l1} vs {l2}");
    let mut nonzero = 0;
    for ((spec, a), b) in trial.graph.params.iter().zip(&g1).zip(&g2) {
        let flat = |g: &Option<Tensor>| g.as_ref().map(|g| g.flatten_all().unwrap().to_vec1::<f64>().unwrap());
        let (a, b) = (flat(a), flat(b));
        assert_eq!(a.is_some(), b.is_some(), "{what}: {} has a gradient one way only", spec.name);
        let (Some(a), Some(b)) = (a, b) else { continue };
        let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                (x - y).abs() <= tolerance * scale.max(1e-12),
                "{what}: d loss / d {}[{i}]: tape {x}, candle {y} (largest {scale})",
                spec.name
            );
        }
        nonzero += usize::from(scale > 0.0);
    }
    assert!(nonzero >= trial.graph.params.len() / 2, "{what}: only {nonzero} parameters have a gradient");
}

fn stm_trials(args: &str, sweep: &str) -> Vec<Trial> {
    let spec = format!(
        "{STM}\ntask random = randomSequence(input = 3, output = 2, length = 4)\n\
         experiment e {{ task random model stm(d = 4, nq = 2, nr = 3, head = 5{args}) \
         train {{ batch = 3 }} sweep {{ {sweep} }} }}"
    );
    trials("stm.mem", &spec)
}

#[test]
fn stm_tape_gradients_equal_candle_autograd() {
    for trial in stm_trials("", "gates in [true, false], transfer in [true, false]") {
        compare(&trial, 1e-9);
    }
    // Fixed, non-zero α: every path through the relational memory carries gradient.
    let fixed = ", learn_alpha = false, alpha1 = 0.5, alpha2 = 0.7, alpha3 = -0.3";
    for trial in stm_trials(fixed, "gates in [true, false]") {
        compare(&trial, 1e-9);
    }
}

#[test]
fn stm_with_learned_non_zero_alphas_and_a_token_input() {
    let spec = include_str!("data/stm_learned_alphas.mem");
    compare(&trials("t.mem", spec)[0], 1e-9);
}

#[test]
fn lstm_tape_gradients_equal_candle_autograd() {
    // The embedding and the cell run as one op (`prims::embed_lstm`): at batch 3 it gathers
    // embedding rows; at batch 96 (48 per thread on two) the vocabulary is small enough to
    // fold the embedding into the input weights.
    for batch in [3, 96] {
        let spec = format!(
            "task tiny = assocRetrieval(pairs = 2, train = 128, validation = 8, test = 8)\n{}\
             experiment e {{ task tiny model lstm train {{ batch = {batch} }} }}",
            token_lstm("lstm", 5)
        );
        compare(&trials("t.mem", &spec)[0], 1e-9);
    }
}

#[test]
fn pkm_tape_gradients_equal_candle_autograd() {
    // m = 18 split one or two ways gives rows wider than `kernels::cpu::width::WIDEST_FIXED`.
    let spec = format!(
        "{PKM}\ntask pc = patternCompletion(patterns = 3, bits = 5, queries = 2, validation = 8, test = 8)\n\
         experiment e {{ task pc model pkm(code = 3, hidden = 6) train {{ batch = 3 }} \
         sweep {{ m in [4, 18]  k in [1, 2]  assign in [true, false] }} }}"
    );
    for trial in trials("pkm.mem", &spec) {
        compare(&trial, 1e-8);
    }
}

#[test]
fn fused_ops_and_primitives_without_a_manual_backward_mix() {
    let spec = r#"
    task random = randomSequence(input = 3, output = 2, length = 4)
    model mixed(d = 4) {
      state M = zeros(d, d)
      state R = learned(3, d)
      step x {
        k = linear(x, d)
        p = sigmoid(linear(x, 1))
        M = namWR(M, k, tanh(linear(x, d)), p, p)
        R = mhdpa(R, linear(x, d), heads = 2, head_size = 2)
        a = flatten(opaAttend(reshape(linear(x, 2), [1, 2]), reshape(linear(x, 6), [3, 2]), R))
        b = matmul(slice(linear(x, 6), 1, 4), M)
        out linear(relu(concat(concat(a, b), flatten(R))), output_size)
      }
    }
    experiment e { task random model mixed train { batch = 3 } }
    "#;
    compare(&trials("t.mem", spec)[0], 1e-9);
}

/// Split over threads, the batch is cut into parts trained independently and summed: the
/// same loss and gradients as one part (up to summation order).
#[test]
fn batch_parts_on_several_threads_sum_to_the_whole() {
    let trial = &stm_trials(", learn_alpha = false, alpha1 = 0.5, alpha2 = 0.7, alpha3 = -0.3", "seed in [1]")[0];
    let device = Device::Cpu;
    let mut data = trial.task.data(data_seed(trial.config.seed), &device).unwrap();
    let batch = data.train_batch(trial.config.train.batch).unwrap();
    let stepper = Stepper::with(trial, &device, DType::F64, Autograd::Tape).unwrap();
    let run = |threads| memctl::pool::run_in_pool(threads, || stepper.loss_and_grads(&batch).unwrap()).unwrap();
    let (l1, g1) = run(1);
    for threads in [2, 3] {
        let (l, g) = run(threads);
        assert!((l - l1).abs() < 1e-12 * l1.abs(), "{threads} threads: loss {l} vs {l1}");
        for (a, b) in g.iter().zip(&g1) {
            let (a, b) = (a.as_ref().unwrap(), b.as_ref().unwrap());
            let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f64>().unwrap();
            let scale = b.abs().unwrap().max_all().unwrap().to_scalar::<f64>().unwrap();
            assert!(diff <= 1e-12 * scale.max(1e-12), "{threads} threads: gradients differ by {diff}");
        }
    }
}
