//! The model library (`specs/models/*.mem`) and every shipped spec.
//!
//! - Every `.mem` file under `specs/` loads and checks (one that reads a data set that is not
//!   shipped may instead fail with exactly the missing-data error, when the data is absent).
//! - Each model overfits one fixed batch of each task it is meant for, at tiny sizes given
//!   here (the model files are `use`d as they are, only their parameters are overridden).
//! - One-line ablations change the parameter count by exactly the ablated layers and change
//!   the graph fingerprint.

use std::path::{Path, PathBuf};

use candle_core::Device;
use memctl::check::Trial;
use memctl::{check, lang, train};

use crate::support::{files_with_extension, trials};

fn specs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("specs")
}

#[test]
fn every_spec_under_specs_checks() {
    let files = files_with_extension(&specs_dir(), "mem");
    assert!(files.len() >= 10, "only {} .mem files found under specs/", files.len());
    let mut failures = vec![];
    for path in &files {
        match lang::load(path) {
            Err(e) => failures.push(format!("{}:\n{}", path.display(), e.render(false))),
            Ok(spec) => {
                if let Err(d) = check::check(&spec, &memctl::prims::Primitives) {
                    if d.0.iter().all(missing_babi_data) {
                        continue;
                    }
                    failures.push(format!("{}:\n{}", path.display(), d.render(&spec.sources, false)));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} spec(s) do not check:\n\n{}", failures.len(), failures.join("\n"));
}

/// The error of a spec whose bAbI data is not there (`data/` is not shipped; a spec that
/// reads it says where to get it). Any other error, or this one with the data present, fails.
fn missing_babi_data(d: &memctl::diag::Diagnostic) -> bool {
    let Some(rest) = d.message.strip_prefix("babi: `") else { return false };
    let Some((path, why)) = rest.split_once('`') else { return false };
    why.starts_with(" does not exist; expected a bAbI folder") && !Path::new(path).exists() && d.hints.len() == 1
}

/// A spec that `use`s the model files and defines the tiny tasks.
fn spec_with(body: &str) -> String {
    let models = specs_dir().join("models");
    let mut s = String::new();
    for m in ["stm", "lstm", "rmc", "lsam", "namtm", "namtm_unit_heads", "pkm", "nam_encoder"] {
        s += &format!("use \"{}\"\n", models.join(format!("{m}.mem")).display());
    }
    s += r#"
task assoc = assocRetrieval(pairs = 2, train = 64, validation = 8, test = 8)
task nfar  = nthFarthest(vectors = 3, dims = 4, validation = 8, test = 8)
task cp    = copy(width = 4, min_len = 2, max_len = 2, validation = 8, test = 8)
task psort = prioritySort(width = 4, inputs = 3, outputs = 2, validation = 8, test = 8)
task rr    = rar(width = 4, min_items = 2, max_items = 2, min_len = 1, max_len = 1, validation = 8, test = 8)
task add   = addition(digits = 3, train = 32, validation = 8, test = 8)
task pal   = palindrome(digits = 3, train = 32, validation = 8, test = 8)
task red   = reduce(digits = 3, train = 32, validation = 8, test = 8)
task pc    = patternCompletion(patterns = 3, bits = 8, noise = 0.1, queries = 2, validation = 8, test = 8)
task lops  = listOps(max_depth = 3, max_args = 3, min_length = 4, max_length = 11, validation = 8, test = 8)
"#;
    s + body
}

/// The first trial of an experiment running `model` on `task`.
fn trial(model: &str, task: &str, lr: f64) -> Trial {
    let body = format!(
        "experiment e {{ task {task} model {model} train {{ optimizer = adam(lr = {lr}), batch = 4, steps = 1 }} }}"
    );
    trials("models.mem", &spec_with(&body)).remove(0)
}

/// Trains `model` on one fixed batch of each task and asserts the loss falls clearly.
fn overfits(model: &str, tasks: &[&str], steps: usize, lr: f64) {
    let mut failures = vec![];
    for task in tasks {
        let t = trial(model, task, lr);
        let start = std::time::Instant::now();
        let losses = train::fixed_batch_losses(&t, steps, &Device::Cpu).expect("trains");
        let (first, last) = (losses[0], losses[losses.len() - 1]);
        if std::env::var_os("MEMCTL_TEST_LOSSES").is_some() {
            eprintln!("{model} on {task}: {first:.4} → {last:.4} ({:.2}s)", start.elapsed().as_secs_f64());
        }
        if !(last.is_finite() && last < 0.7 * first) {
            failures.push(format!("{model} on {task}: loss {first:.4} → {last:.4} after {steps} steps"));
        }
    }
    assert!(failures.is_empty(), "the loss did not fall below 70 %:\n{}", failures.join("\n"));
}

const SAM_TASKS: &[&str] = &["assoc", "nfar", "cp", "psort", "rr"];
const NAM_TASKS: &[&str] = &["add", "pal", "red"];

/// A test per row, `name: model on tasks, learning rate`: the model overfits a fixed batch of
/// each task in 30 steps.
macro_rules! overfitting {
    ($($name:ident: $model:literal on $tasks:expr, $lr:literal;)+) => {
        $(
            #[test]
            fn $name() {
                overfits($model, $tasks, 30, $lr);
            }
        )+
    };
}

overfitting! {
    stm_overfits_the_sam_tasks: "stm(d = 8, nq = 2, nr = 8, head = 16, embed_width = 8)" on SAM_TASKS, 1e-2;
    lstm_overfits_the_sam_tasks: "lstm(hidden = 16, embed_width = 8)" on SAM_TASKS, 3e-2;
    rmc_overfits_the_sam_tasks: "rmc(slots = 2, heads = 2, head_size = 8, head = [32])" on SAM_TASKS, 3e-2;
    lsam_overfits_the_nam_tasks: "lsam(d = 16, heads = 2, embed_width = 16)" on NAM_TASKS, 1e-2;
    namtm_overfits_the_nam_tasks: "namtm(d = 16, heads = 2, L = 8, embed_width = 16)" on NAM_TASKS, 1e-2;
    namtm_with_unit_heads_overfits_the_nam_tasks:
        "namtmUnitHeads(d = 16, heads = 2, L = 8, embed_width = 16)" on NAM_TASKS, 1e-2;
    lstm_overfits_the_nam_tasks: "lstm(hidden = 16, embed_width = 8)" on NAM_TASKS, 3e-2;
}

#[test]
fn nam_encoders_overfit_listops() {
    // NAM's linear attention, then the softmax baseline, over the whole expression.
    overfits("namEncoder(d = 8, heads = 2, window = 12, ffn = 16)", &["lops"], 30, 1e-2);
    overfits("namEncoder(d = 8, heads = 2, window = 12, softmax = true)", &["lops"], 30, 1e-2);
}

#[test]
fn kanerva_machines_overfit_pattern_completion() {
    // The ablation "equal weights (no assignment)", then the paper's model (the default).
    overfits("pkm(k = 1, m = 8, code = 8, hidden = 16, assign = false)", &["pc"], 30, 1e-2);
    overfits("pkm(k = 2, m = 8, code = 8, hidden = 16)", &["pc"], 30, 1e-2);
}

/// The trials of a sweep over one model parameter, by the parameter's value.
fn sweep(model: &str, task: &str, axis: &str) -> Vec<Trial> {
    let body =
        format!("experiment e {{ task {task} model {model} train {{ batch = 8, steps = 1 }} sweep {{ {axis} }} }}");
    trials("models.mem", &spec_with(&body))
}

fn params(t: &Trial) -> usize {
    t.graph.param_count()
}

#[test]
fn stm_ablations_drop_exactly_the_gate_and_transfer_layers() {
    let (d, nq) = (8, 2);
    let model = format!("stm(d = {d}, nq = {nq}, nr = 8, head = 16, embed_width = 8)");
    let ts = sweep(&model, "assoc", "gates in [true, false]  transfer in [true, false]");
    assert_eq!(ts.len(), 4);
    let find = |gates: bool, transfer: bool| {
        ts.iter()
            .find(|t| {
                t.config.params["gates"].as_bool() == Some(gates)
                    && t.config.params["transfer"].as_bool() == Some(transfer)
            })
            .expect("trial")
    };
    let full = find(true, true);
    // Gated write: gate_in and gate_mem (d → 2d each) and the scalar biases b_in, b_forget.
    let gates = 2 * (d * 2 * d + 2 * d) + 2;
    // Transfer G1: n_q·d → d.
    let transfer = nq * d * d + d;
    assert_eq!(params(full) - params(find(false, true)), gates);
    assert_eq!(params(full) - params(find(true, false)), transfer);
    assert_eq!(params(full) - params(find(false, false)), gates + transfer);
    let prints: Vec<String> = ts.iter().map(|t| t.graph.fingerprint()).collect();
    for i in 0..4 {
        for j in 0..i {
            assert_ne!(prints[i], prints[j], "trials {i} and {j} have the same graph");
        }
    }
}

#[test]
fn namtm_without_jump_drops_the_key_tape_layers() {
    let (d, heads) = (16, 2);
    let model = format!("namtm(d = {d}, heads = {heads}, L = 8, embed_width = 16)");
    let ts = sweep(&model, "add", "jump in [true, false]  L in [8, 12]");
    let count = |jump: bool, l: i64| {
        let t = ts
            .iter()
            .find(|t| t.config.params["jump"].as_bool() == Some(jump) && t.config.params["L"].as_int() == Some(l))
            .expect("trial");
        (params(t), t.graph.fingerprint())
    };
    let (with, with_fp) = count(true, 8);
    let (without, without_fp) = count(false, 8);
    // W_k and the jump query (d → d each), and the JUMP logit of both heads' moves.
    assert_eq!(with - without, 2 * (d * d + d) + 2 * (d * heads + heads));
    assert_ne!(with_fp, without_fp);
    // No parameter depends on the tape length.
    assert_eq!(count(true, 12).0, with);
    assert_eq!(count(false, 12).0, without);
}

#[test]
fn unit_heads_change_only_namtm_with_jump_and_no_parameter() {
    let model = |name: &str| format!("{name}(d = 16, heads = 2, L = 8, embed_width = 16)");
    let raw = sweep(&model("namtm"), "pal", "jump in [true, false]");
    let unit = sweep(&model("namtmUnitHeads"), "pal", "jump in [true, false]");
    let find = |ts: &[Trial], jump: bool| {
        let t = ts.iter().find(|t| t.config.params["jump"].as_bool() == Some(jump)).expect("trial");
        (params(t), t.graph.fingerprint())
    };
    let (raw_jump, unit_jump) = (find(&raw, true), find(&unit, true));
    assert_eq!(raw_jump.0, unit_jump.0, "normalising the positions adds no parameter");
    assert_ne!(raw_jump.1, unit_jump.1, "with JUMP, the positions are normalised");
    assert_eq!(find(&raw, false), find(&unit, false), "without JUMP, the two models are one");
}

#[test]
fn rmc_gate_styles_differ_by_their_gate_layers() {
    let (heads, head_size) = (2, 4);
    let mem = heads * head_size;
    let model = format!("rmc(slots = 2, heads = {heads}, head_size = {head_size}, head = [16])");
    let ts = sweep(&model, "nfar", r#"gate in ["unit", "memory", "none"]"#);
    let count = |style: &str| {
        let t = ts.iter().find(|t| t.config.params["gate"].as_str() == Some(style)).expect("trial");
        (params(t), t.graph.fingerprint())
    };
    let (unit, unit_fp) = count("unit");
    let (memory, memory_fp) = count("memory");
    let (none, none_fp) = count("none");
    // gate_in and gate_mem: D → 2D per unit, D → 2 per slot.
    assert_eq!(unit - none, 2 * (mem * 2 * mem + 2 * mem));
    assert_eq!(memory - none, 2 * (mem * 2 + 2));
    assert!(unit_fp != memory_fp && memory_fp != none_fp && unit_fp != none_fp);
}

#[test]
fn pkm_machines_split_the_memory_without_changing_the_parameters() {
    // k machines of m/k columns: same encoder/decoder, same prior size k·c·(m/k) = c·m.
    // Equal weights (no assignment): the assignment network's last layers are k wide.
    let ts = sweep("pkm(m = 8, code = 8, hidden = 16, assign = false)", "pc", "k in [1, 2, 4]");
    let counts: Vec<usize> = ts.iter().map(params).collect();
    assert!(counts.windows(2).all(|w| w[0] == w[1]), "{counts:?}");
    let shapes: Vec<Vec<usize>> = ts.iter().map(|t| t.graph.states[1].shape.clone()).collect();
    assert_eq!(shapes, vec![vec![1, 8, 8], vec![2, 4, 4], vec![4, 2, 2]]);
}
