//! A catalogue of malformed specs. Each gives a located error: the exact message, the exact
//! `file:line:col` of its primary span and the exact text it underlines, so that every case
//! is known to point inside the spec at the right spot. A few cases compare the whole rendered
//! diagnostic (snippet, caret underline, help lines).
//!
//! After a deliberate change of wording, `MEMCTL_CATALOGUE_DUMP=1 cargo test --test check_errors
//! -- --nocapture` prints what every case gives now, to review and copy into the table.

use memctl::check;
use memctl::diag::Diagnostic;
use memctl::lang;
use memctl::source::SourceMap;

const FILE: &str = "spec.mem";

/// The first error a spec gives (parse or check), with the sources to locate it.
fn first_error(text: &str) -> Result<(Diagnostic, SourceMap), String> {
    match lang::parse_str(FILE, text) {
        Err(e) => match e.diagnostics.0.first() {
            Some(d) => Ok((d.clone(), e.sources)),
            None => Err("parse failed without a diagnostic".into()),
        },
        Ok(spec) => match check::check(&spec, &memctl::prims::Primitives) {
            Err(ds) => match ds.0.first() {
                Some(d) => Ok((d.clone(), spec.sources)),
                None => Err("check failed without a diagnostic".into()),
            },
            Ok(_) => Err("the spec checks without error".into()),
        },
    }
}

const TASK: &str = "task t = assocRetrieval(pairs = 2)";
const EXPERIMENT: &str = "experiment ex { task t  model m }";

/// A complete spec around one line of a step body (line 6 of the spec):
///
/// ```text
/// 1 task t = assocRetrieval(pairs = 2)
/// 2 model m(d = 8, gates = true) {
/// 3   state M = zeros(d, d)
/// 4   step x {
/// 5     e = embed(x, 16)
/// 6     <line>
/// 7     out linear(e, output_size)
/// 8   }
/// 9 }
/// 10 experiment ex { task t  model m }
/// ```
fn step_line(line: &str) -> String {
    format!(
        "{TASK}\nmodel m(d = 8, gates = true) {{\n  state M = zeros(d, d)\n  step x {{\n    e = embed(x, 16)\n    \
         {line}\n    out linear(e, output_size)\n  }}\n}}\n{EXPERIMENT}\n"
    )
}

/// A valid model `m` with the given experiment body (line 3 of the spec).
fn experiment(body: &str) -> String {
    format!(
        "{TASK}\nmodel m(d = 8) {{ step x {{ out linear(embed(x, 16), output_size) }} }}\nexperiment ex {{ {body} }}\n"
    )
}

/// A model definition (line 2) between the task and the experiment.
fn model(def: &str) -> String {
    format!("{TASK}\n{def}\n{EXPERIMENT}\n")
}

struct Case {
    name: &'static str,
    spec: String,
    message: &'static str,
    /// `line:col` of the primary span in `spec.mem`.
    at: &'static str,
    /// The text the primary span underlines.
    text: &'static str,
}

fn case(
    name: &'static str,
    spec: impl Into<String>,
    message: &'static str,
    at: &'static str,
    text: &'static str,
) -> Case {
    Case { name, spec: spec.into(), message, at, text }
}

#[rustfmt::skip]
fn catalogue() -> Vec<Case> {
    vec![
        // ------------------------------------------------------------ syntax
        case("missing `)` in a parameter list", "model m(d = 8 {\n}\n",
             "syntax error: expected `)`, `,` or an operator", "1:15", "{"),
        case("missing `}` at end of file", "model m(d = 8) {\n  step x {\n    out linear(x, 3)\n  }\n",
             "syntax error: expected `state`, `step` or `}`", "5:1", ""),
        case("bad token", step_line("h = linear(e, 3) $ 2"),
             "syntax error: expected `}`, a statement or an operator", "6:22", "$"),
        case("keyword as a model name", "model if(d = 8) {}\n",
             "syntax error: expected a name", "1:7", "if"),
        case("keyword as a variable", step_line("if = 3"),
             "syntax error: expected an expression", "6:8", "="),
        case("`=` without a value", step_line("h ="),
             "syntax error: expected an expression", "7:5", "out"),
        case("parameter default missing", "model m(d = ) {}\n",
             "syntax error: expected an expression", "1:13", ")"),
        case("unclosed string", "task t = assocRetrieval(name = \"abc)\n",
             "unclosed string", "1:32", "\""),
        case("stray operator", step_line("h = e + * 2"),
             "syntax error: expected an expression", "6:13", "*"),
        case("unicode operator junk", step_line("h = e ∘ e"),
             "syntax error: expected `}`, a statement or an operator", "6:11", "∘"),
        case("unicode in a name", step_line("h = é + e"),
             "syntax error: expected an expression", "6:9", "é"),
        case("state without a name", "model m(d = 8) {\n  state = zeros(d)\n}\n",
             "syntax error: expected a name", "2:9", "="),
        case("`out` used as a name", step_line("out = linear(e, 3)"),
             "syntax error: expected an expression", "6:9", "="),
        case("setting without `=`", experiment("task t  model m  train { lr 0.1 }"),
             "syntax error: expected `=`", "3:45", "0.1"),
        case("sweep axis without `in`", experiment("task t  model m  sweep { d [1, 2] }"),
             "syntax error: expected `in`", "3:44", "["),
        case("unclosed call before `}`", "model m(d = 8) {\n  step x {\n    h = linear(x, 3\n  }\n}\n",
             "syntax error: expected `)`, `,` or an operator", "4:3", "}"),
        case("unclosed list", step_line("h = mlp(e, [4, 4)"),
             "syntax error: expected `,`, `]` or an operator", "6:21", ")"),
        case("unknown type", "model m(d: integer) {}\n",
             "syntax error: expected a type (`int`, `float`, `bool` or `str`)", "1:12", "integer"),
        case("misspelt keyword", "model m(d = 8) {\n  stat M = zeros(d)\n}\n",
             "syntax error: expected `state`, `step` or `}`", "2:3", "stat"),
        case("junk at top level", "foo bar\n",
             "syntax error: expected `model`, `task`, `experiment` or `use`", "1:1", "foo"),
        case("`if` without a condition", step_line("if { }"),
             "syntax error: expected an expression", "6:8", "{"),
        case("`else` without `if`", step_line("h = linear(e, 3) else { }"),
             "syntax error: expected `}`, a statement or an operator", "6:22", "else"),
        case("double comma", "model m(d = 8,, e = 2) {}\n",
             "syntax error: expected `)` or a name", "1:15", ","),
        case("task defined as a number", "task t = 3\n",
             "syntax error: expected a name", "1:10", "3"),
        case("number with a dangling point", step_line("h = 1.e5"),
             "syntax error: expected `}`, a statement or an operator", "6:10", "."),
        case("unclosed comment", "model m(d = 8) {}\n/* unclosed\nmodel n() {}\n",
             "unclosed comment", "2:1", "/*"),
        case("dangling range", experiment("task t  model m  sweep { seed in 1.. }"),
             "syntax error: expected an expression", "3:54", "}"),
        case("missing name in a multiple assignment", step_line("a, = lstmCell(e, e, e)"),
             "syntax error: expected a name", "6:8", "="),
        case("empty argument", step_line("h = linear(, 3)"),
             "syntax error: expected `)` or an argument", "6:16", ","),
        case("`use` without a string", "use foo\n",
             "syntax error: expected a string", "1:5", "foo"),
        case("number on the left of `=`", step_line("3 = h"),
             "syntax error: expected `}`, a statement or an operator", "6:5", "3"),
        case("integer literal out of range", step_line("h = 99999999999999999999"),
             "number out of range", "6:9", "99999999999999999999"),
        case("float literal out of range", step_line("h = scalar(1e400)"),
             "number out of range", "6:16", "1e400"),
        case("`else` without a block", step_line("if gates { } else"),
             "syntax error: expected `if` or `{`", "7:5", "out"),
        case("stray `}`", "model m(d = 8) { step x { out x } } }\n",
             "syntax error: expected `experiment`, `model`, `task`, `use` or end of file", "1:37", "}"),
        case("NUL byte", "model m(d = 8) {\u{0} }\n",
             "syntax error: expected `state`, `step` or `}`", "1:17", "\0"),
        case("dotted name", step_line("h = e.size"),
             "syntax error: expected `}`, a statement or an operator", "6:10", "."),
        // ------------------------------------------------------------ names and calls
        case("unknown primitive", step_line("h = linaer(e, d)"),
             "unknown primitive `linaer`", "6:9", "linaer"),
        case("unknown name", step_line("h = linear(hh, d)"),
             "unknown name `hh`", "6:16", "hh"),
        case("primitive used as a value", step_line("h = linear"),
             "unknown name `linear`", "6:9", "linear"),
        case("state initialiser inside a step", step_line("h = zeros(3)"),
             "`zeros` can only initialise a `state`", "6:9", "zeros"),
        case("missing argument", step_line("h = linear(e)"),
             "`linear` needs argument `size`", "6:9", "linear(e)"),
        case("too many arguments", step_line("h = linear(e, d, true, 3)"),
             "`linear` takes 3 arguments (x, size, bias = true), but 4 were given", "6:28", "3"),
        case("unknown argument", step_line("h = linear(e, d, bais = false)"),
             "`linear` has no argument `bais`", "6:22", "bais"),
        case("argument given twice", step_line("h = linear(e, size = d, size = 3)"),
             "argument `size` given twice", "6:29", "size"),
        case("positional after named", step_line("h = linear(x = e, d)"),
             "positional argument after a named one", "6:23", "d"),
        case("value where a tensor is expected", step_line("h = linear(3, d)"),
             "argument `x` of `linear` must be a tensor, found the int 3", "6:16", "3"),
        case("tensor where a value is expected", step_line("h = linear(e, e)"),
             "argument `size` of `linear` must be known before the model runs, but is a tensor", "6:19", "e"),
        case("option of the wrong kind", step_line("M = itemWrite(M, linear(e, d), gated = 1)"),
             "argument `gated` of `itemWrite` must be a bool, found the int 1", "6:44", "1"),
        // ------------------------------------------------------------ shapes
        case("itemWrite with the wrong `a` size", step_line("M = itemWrite(M, e)"),
             "itemWrite: `a` must have shape [8] to write into a [d, d] memory, but has shape [16]", "6:22", "e"),
        case("relRead with the wrong `c`",
             model("model m(d = 8) { state Mr = zeros(1, d, d)  step x { e = embed(x, 16)  \
                    v = relRead(Mr, linear(e, 3), linear(e, d))  out linear(v, output_size) } }"),
             "relRead: `c` must have shape [1] (one logit per relational slot), but has shape [3]",
             "2:88", "linear(e, 3)"),
        case("output shape not matching the task", model("model m(d = 8) { step x { out linear(embed(x, 16), 5) } }"),
             "the step's output has shape [5], but task `assocRetrieval` scores [10] logits",
             "2:31", "linear(embed(x, 16), 5)"),
        case("state assigned the wrong shape", step_line("M = linear(e, 3)"),
             "state `M` has shape [8, 8], but is assigned a value of shape [3]", "6:9", "linear(e, 3)"),
        case("`⊗` with a number", step_line("h = e ⊗ 3"),
             "`⊗` needs two tensors", "6:9", "e ⊗ 3"),
        case("number divided by a tensor", step_line("h = 3 / e"),
             "a number divided by a tensor is not supported", "6:9", "3 / e"),
        case("list of tensors", step_line("h = [e]"),
             "lists hold numbers, bools or strings, not tensors", "6:10", "e"),
        case("state too large", model("model m(d = 8) { state M = zeros(16777216, 16777216, 16777216)  \
                    step x { out linear(embed(x, 16), output_size) } }"),
             "state `M` is too large: [16777216, 16777216, 16777216]", "2:28", "zeros(16777216, 16777216, 16777216)"),
        case("parameter too large", model("model m(d = 8) { step x { out linear(linear(embed(x, 4096), 16777216), output_size) } }"),
             "`linear` would have a parameter `weight` of shape [16777216, 4096]: more than 2^28 elements", "2:38",
             "linear(embed(x, 4096), 16777216)"),
        case("tensor too large", model("model m(d = 8) { step x { e = embed(x, 16385)  out linear(flatten(e ⊗ e), output_size) } }"),
             "`outer` would give a tensor of shape [16385, 16385]: more than 2^28 elements per example", "2:67", "e ⊗ e"),
        // ------------------------------------------------------------ model structure
        case("two `out`s", model("model m(d = 8) { step x { e = embed(x, 16)  \
                    out linear(e, output_size)  out linear(e, output_size) } }"),
             "the step has two `out` statements", "2:73", "out linear(e, output_size)"),
        case("no `out`", model("model m(d = 8) { step x { e = embed(x, 16) } }"),
             "the step of `m` has no `out`", "2:18", "step x"),
        case("no `step`", model("model m(d = 8) { state M = zeros(d) }"),
             "model `m` has no `step`", "2:7", "m"),
        case("two `step`s", model("model m(d = 8) { step x { out linear(embed(x, 16), output_size) }  \
                    step y { out y } }"),
             "model `m` has two `step` blocks", "2:68", "step y { out y }"),
        case("`if` on a tensor", step_line("if e { h = e }"),
             "`if` conditions must be known before the model runs", "6:8", "e"),
        case("`if` on an int", step_line("if d { h = e }"),
             "`if` needs a bool, found the int 8", "6:8", "d"),
        case("assigning to a parameter", step_line("d = 3"),
             "cannot assign to parameter `d`", "6:5", "d"),
        case("assigning to `output_size`", step_line("output_size = 3"),
             "cannot assign to parameter `output_size`", "6:5", "output_size"),
        case("one name for two outputs", step_line("h = lstmCell(e, e, e)"),
             "`lstmCell` returns 2 values (c, h), but 1 name is assigned", "6:9", "lstmCell(e, e, e)"),
        case("two names for one output", step_line("a, b = linear(e, 3)"),
             "2 names assigned from one value", "6:12", "linear(e, 3)"),
        case("unknown state initialiser", model("model m(d = 8) { state M = zeroes(d)  \
                    step x { out linear(embed(x, 16), output_size) } }"),
             "a state starts from `zeros(…)`, `learned(…)`, `identity(…)` or `onehot(…)`", "2:28", "zeroes"),
        case("step input hides a parameter", model("model m(d = 8) { \
                    step d { out linear(embed(d, 16), output_size) } }"),
             "the step input `d` hides a parameter", "2:23", "d"),
        case("step input hides a state", model("model m(d = 8) { state x = zeros(d)  \
                    step x { out linear(embed(x, 16), output_size) } }"),
             "the step input `x` hides a state", "2:43", "x"),
        // ------------------------------------------------------------ duplicates
        case("duplicate model", format!("{TASK}\nmodel m(d = 8) {{ step x {{ out x }} }}\n\
                    model m(d = 4) {{ step x {{ out x }} }}\n{EXPERIMENT}\n"),
             "model `m` is defined twice", "3:7", "m"),
        case("duplicate task", format!("task t = assocRetrieval(pairs = 3)\n{}", experiment("task t  model m")),
             "task `t` is defined twice", "2:6", "t"),
        case("duplicate experiment", format!("{}{EXPERIMENT}\n", experiment("task t  model m")),
             "experiment `ex` is defined twice", "4:12", "ex"),
        case("duplicate parameter", model("model m(d = 8, d = 4) { step x { out linear(embed(x, 16), output_size) } }"),
             "parameter `d` is defined twice", "2:16", "d"),
        case("parameter named as the task's size",
             model("model m(output_size = 4) { step x { out linear(embed(x, 16), output_size) } }"),
             "`output_size` is the task's, not a model parameter", "2:9", "output_size"),
        case("duplicate state", model("model m(d = 8) { state M = zeros(d)  state M = zeros(d)  \
                    step x { out linear(embed(x, 16), output_size) } }"),
             "state `M` is already defined", "2:44", "M"),
        // ------------------------------------------------------------ parameters
        case("missing required model parameter", model("model m(d: int) { \
                    step x { out linear(embed(x, 16), output_size) } }"),
             "model `m` needs a value for `d`", "3:31", "m"),
        case("integer division not exact", model("model m(d = 8, k = d / 3) { \
                    step x { out linear(embed(x, 16), output_size) } }"),
             "8 / 3 is not a whole number", "2:20", "d / 3"),
        case("division by zero", step_line("h = linear(e, d / 0)"),
             "division by zero", "6:23", "0"),
        case("integer overflow", step_line("h = linear(e, 9223372036854775807 + 1)"),
             "integer overflow", "6:19", "9223372036854775807 + 1"),
        case("parameter override of the wrong kind", experiment("task t  model m(d = true)"),
             "parameter `d` of `m` is an int, but is given the bool true", "3:37", "true"),
        case("unknown parameter override", experiment("task t  model m(dd = 3)"),
             "model `m` has no parameter `dd`", "3:33", "dd"),
        case("unnamed parameter override", experiment("task t  model m(3)"),
             "model parameters must be named", "3:33", "3"),
        // ------------------------------------------------------------ searches
        case("search setting misspelt", experiment("task t  model m  search { d in [8, 16]  trails = 3 }"),
             "unknown search setting `trails`", "3:57", "trails"),
        case("grid over a distribution", experiment("task t  model m  search { lr ~ loguniform(1e-4, 1e-2)  sampler = grid }"),
             "a grid needs listed values, but `lr` is drawn from a range", "3:48", "loguniform(1e-4, 1e-2)"),
        case("random search without trials", experiment("task t  model m  search { lr ~ loguniform(1e-4, 1e-2) }"),
             "the search needs `trials`, the number of configurations to try", "3:34", "search { lr ~ loguniform(1e-4, 1e-2) }"),
        case("unknown pruner called", experiment("task t  model m  search { d in [8, 16]  prune = ashaa(metric = val_loss, min_steps = 10) }"),
             "unknown pruner `ashaa`", "3:65", "ashaa"),
        case("unknown pruner named", experiment("task t  model m  search { d in [8, 16]  prune = hyperband }"),
             "unknown pruner `hyperband`", "3:65", "hyperband"),
        case("pruner on an unknown metric", experiment("task t  model m  search { d in [8, 16]  prune = asha(metric = val_acc, min_steps = 10) }"),
             "`val_acc` is not a validation metric of the task", "3:79", "val_acc"),
        case("pruner that keeps everything", experiment("task t  model m  search { d in [8, 16]  prune = asha(metric = val_loss, min_steps = 10, keep = 1) }"),
             "`asha`: `keep` must be a fraction below 1 (a pruner that keeps all prunes nothing)", "3:112", "1"),
        case("rung past the step budget", experiment("task t  model m  train { steps = 100 }  search { d in [8, 16]  sampler = grid  prune = asha(metric = val_loss, min_steps = 50, rungs = 2) }"),
             "rung 2 of the pruner is at step 150, past the trial's 100 steps", "3:104", "asha(metric = val_loss, min_steps = 50, rungs = 2)"),
        case("median rule judging every n steps with rungs as well", experiment("task t  model m  search { d in [8, 16]  prune = median(metric = val_loss, min_steps = 10, every = 5, rungs = 2) }"),
             "`median`: `rungs` must be left out when `every` is given (`every` sets the rungs)", "3:126", "2"),
        case("unknown sampler", experiment("task t  model m  search { d in [8, 16]  sampler = bayes }"),
             "unknown sampler `bayes`", "3:67", "bayes"),
        case("TPE without a metric", experiment("task t  model m  search { d in [8, 16]  trials = 2  sampler = tpe(seed = 1) }"),
             "the search needs a metric to optimise", "3:34", "search { d in [8, 16]  trials = 2  sampler = tpe(seed = 1) }"),
        case("searching a parameter the model does not have", experiment("task t  model m  search { dd in [8, 16]  sampler = grid }"),
             "cannot sweep `dd`: model `m` has no such parameter", "3:43", "dd"),
        case("search beside a sweep", experiment("task t  model m  sweep { seed in 1..2 }  search { d in [8, 16] }"),
             "experiment `ex` has both a `sweep` and a `search`", "3:42", "seed"),
        case("searched value of the wrong kind", experiment("task t  model m  search { d ~ uniform(4, 16)  trials = 2 }"),
             "parameter `d` is an int, but the sweep gives the float 4.0", "3:47", "uniform(4, 16)"),
        // ------------------------------------------------------------ experiments
        case("unknown model", experiment("task t  model mm"),
             "unknown model `mm`", "3:31", "mm"),
        case("unknown task", experiment("task tt  model m"),
             "unknown task `tt`", "3:22", "tt"),
        case("unknown task generator", experiment("task assocRetrival(pairs = 2)  model m"),
             "unknown task `assocRetrival`", "3:22", "assocRetrival"),
        case("unknown generator in an unused task",
             format!("task u = assocRetrival(pairs = 2)\n{}", experiment("task t  model m")),
             "unknown task `assocRetrival`", "1:10", "assocRetrival"),
        case("`==` for a named argument", experiment("task assocRetrieval(pairs == 2)  model m"),
             "unknown name `pairs`", "3:37", "pairs"),
        case("task override out of range", experiment("task t(pairs = 99)  model m"),
             "assocRetrieval: `pairs` must be between 1 and 26, found 99", "3:32", "99"),
        case("no task", experiment("model m"),
             "experiment `ex` has no task", "3:12", "ex"),
        case("two models", experiment("task t  model m  model m"),
             "experiment `ex` names two models", "3:40", "m"),
        case("task option out of range", experiment("task assocRetrieval(pairs = 99)  model m"),
             "assocRetrieval: `pairs` must be between 1 and 26, found 99", "3:45", "99"),
        case("task choice option not among its choices",
             experiment("task learnToExecute(grammar = \"python\")  model m"),
             "learnToExecute: `grammar` must be one of \"zaremba\", \"sonnet\", found \"python\"", "3:47",
             "\"python\""),
        case("sweeping a parameter the model does not have", experiment("task t  model m  sweep { dd in [1, 2] }"),
             "cannot sweep `dd`: model `m` has no such parameter", "3:42", "dd"),
        case("empty sweep list", experiment("task t  model m  sweep { d in [] }"),
             "the sweep over `d` has no values", "3:47", "[]"),
        case("sweep value of the wrong kind", experiment("task t  model m  sweep { d in [4, 1.5] }"),
             "parameter `d` is an int, but the sweep gives the float 1.5", "3:51", "1.5"),
        case("reversed range", experiment("task t  model m  sweep { seed in 3..1 }"),
             "empty range 3..1", "3:50", "3..1"),
        case("negative seed", experiment("task t  model m  sweep { seed in [1, -1] }"),
             "seeds are non-negative integers, found the int -1", "3:54", "-1"),
        case("axis swept twice", experiment("task t  model m  sweep { d in [1, 2]  d in [3] }"),
             "`d` is swept twice", "3:55", "d"),
        case("unknown train setting", experiment("task t  model m  train { setps = 10 }"),
             "unknown train setting `setps`", "3:42", "setps"),
        case("train setting of the wrong kind", experiment("task t  model m  train { batch = \"x\" }"),
             "train setting `batch` must be an int, found the str \"x\"", "3:50", "\"x\""),
        case("optimiser setting out of its range", experiment("task t  model m  train { beta1 = 1.0 }"),
             "`beta1` must be from 0 up to (not including) 1, found 1", "3:50", "1.0"),
        case("optimiser argument out of its range", experiment("task t  model m  train { optimizer = adam(eps = 0) }"),
             "`eps` must be a finite number above 0, found 0", "3:65", "0"),
        case("train setting given twice", experiment("task t  model m  train { batch = 3, batch = 4 }"),
             "train setting `batch` is given twice", "3:53", "batch"),
        case("stop_when given twice",
             experiment("task t  model m  train { stop_when = accuracy >= 0.5, stop_when = loss < 1 }"),
             "train setting `stop_when` is given twice", "3:71", "stop_when"),
        case("select given twice",
             experiment("task t  model m  train { select = best(val_accuracy), select = best(val_loss) }"),
             "train setting `select` is given twice", "3:71", "select"),
        case("train setting out of range", experiment("task t  model m  train { batch = 0 }"),
             "`batch` must be at least 1, found 0", "3:50", "0"),
        case("two train blocks", experiment("task t  model m  train { steps = 5 }  train { batch = 3 }"),
             "experiment `ex` has two `train` blocks", "3:63", "batch"),
        case("bad stop_when metric", experiment("task t  model m  train { stop_when = acuracy >= 0.9 }"),
             "this task has no metric `acuracy`", "3:54", "acuracy"),
        case("stop_when without a comparison", experiment("task t  model m  train { stop_when = accuracy }"),
             "`stop_when` must compare a metric with a number", "3:54", "accuracy"),
        case("select on the reported test set", experiment("task t  model m  train { select = best(accuracy) }"),
             "`accuracy` is a metric of the test set a run reports, so it cannot select the run's evaluation", "3:56", "accuracy"),
        case("select on an unknown metric", experiment("task t  model m  train { select = best(val_acuracy) }"),
             "this task has no metric `val_acuracy` to select on", "3:56", "val_acuracy"),
        case("select without best", experiment("task t  model m  train { select = val_accuracy }"),
             "`select` must name the metric whose best evaluation a run reports", "3:51", "val_accuracy"),
        case("unknown optimizer", experiment("task t  model m  train { optimizer = adma(lr = 0.1) }"),
             "unknown optimizer `adma`", "3:54", "adma"),
        case("swept setting out of range", experiment("task t  model m  sweep { lr in [0.1, -1] }"),
             "`lr` must be positive, found -1", "3:54", "-1"),
    ]
}

#[test]
fn catalogue_of_malformed_specs_gives_located_errors() {
    let cases = catalogue();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let dump = std::env::var_os("MEMCTL_CATALOGUE_DUMP").is_some();
    let mut failures = vec![];
    for c in &cases {
        let (d, sources) = match first_error(&c.spec) {
            Ok(x) => x,
            Err(why) => {
                failures.push(format!("{}: {why}", c.name));
                continue;
            }
        };
        let Some(primary) = &d.primary else {
            failures.push(format!("{}: no location for `{}`", c.name, d.message));
            continue;
        };
        assert!(
            primary.span.start <= primary.span.end && primary.span.end <= c.spec.len(),
            "{}: span out of bounds",
            c.name
        );
        let location = d.location(&sources).unwrap_or_default();
        let at = location.strip_prefix(&format!("{FILE}:")).unwrap_or(&location);
        let text = sources.text(primary.span);
        if dump {
            println!("{}\n  {:?}, {:?}, {:?}", c.name, d.message, at, text);
            println!("{}", d.render(&sources, false));
            continue;
        }
        if d.message != c.message || at != c.at || text != c.text {
            failures.push(format!(
                "{}:\n  expected {:?} at {} on {:?}\n  found    {:?} at {} on {:?}",
                c.name, c.message, c.at, c.text, d.message, at, text
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// The whole rendered diagnostic of a spec's first error, without colour.
fn rendered(spec: &str) -> String {
    let (d, sources) = first_error(spec).expect("an error");
    d.render(&sources, false)
}

#[test]
fn unknown_primitive_renders_caret_and_did_you_mean() {
    let want = r#"error[C060]: unknown primitive `linaer`
 --> spec.mem:6:9
  |
6 |     h = linaer(e, d)
  |         ^^^^^^ not a primitive
  |
  = help: did you mean `linear`?"#;
    assert_eq!(rendered(&step_line("h = linaer(e, d)")), want);
}

#[test]
fn unknown_train_setting_renders_did_you_mean() {
    let want = r#"error[C100]: unknown train setting `setps`
 --> spec.mem:3:42
  |
3 | experiment ex { task t  model m  train { setps = 10 } }
  |                                          ^^^^^ not a setting
  |
  = help: did you mean `steps`?"#;
    assert_eq!(rendered(&experiment("task t  model m  train { setps = 10 }")), want);
}

/// `stop_when` reads the validation set's metrics without their `val_` prefix (which
/// `select` needs): a `val_` metric is told so, not offered a look-alike.
#[test]
fn a_val_metric_in_stop_when_is_told_to_drop_the_prefix() {
    let out = rendered(&experiment("task t  model m  train { stop_when = val_accuracy >= 0.9 }"));
    assert!(out.ends_with("= help: `stop_when` tests the validation set already: write `accuracy`"), "{out}");
}

#[test]
fn unknown_model_lists_the_models_or_points_at_the_missing_use() {
    let listed = rendered(&experiment("task t  model lstm"));
    assert!(listed.ends_with("= help: the models this spec defines or uses: m"), "{listed}");
    let none = rendered(&format!("{TASK}\nexperiment ex {{ task t  model lstm }}\n"));
    assert!(none.contains("error[C080]: unknown model `lstm`"), "{none}");
    assert!(none.contains("this spec defines no model; bring one in with `use`"), "{none}");
}

#[test]
fn unclosed_call_renders_the_open_bracket() {
    let want = r#"error[S001]: syntax error: expected `)`, `,` or an operator
 --> spec.mem:4:3
  |
4 |   }
  |   ^ unexpected `}`
  |
 ::: spec.mem:3:15
  |
3 |     h = linear(x, 3
  |               - this `(` is not closed"#;
    assert_eq!(rendered("model m(d = 8) {\n  step x {\n    h = linear(x, 3\n  }\n}\n"), want);
}

#[test]
fn missing_brace_at_end_of_file_renders_the_open_brace() {
    let want = r#"error[S001]: syntax error: expected `state`, `step` or `}`
 --> spec.mem:5:1
  |
5 |
  | ^ unexpected end of file
  |
 ::: spec.mem:1:16
  |
1 | model m(d = 8) {
  |                - this `{` is not closed"#;
    assert_eq!(rendered("model m(d = 8) {\n  step x {\n    out linear(x, 3)\n  }\n"), want);
}

#[test]
fn state_shape_mismatch_renders_the_declaration() {
    let want = r#"error[C052]: state `M` has shape [8, 8], but is assigned a value of shape [3]
 --> spec.mem:6:9
  |
6 |     M = linear(e, 3)
  |         ^^^^^^^^^^^^ shape [3]
  |
 ::: spec.mem:3:9
  |
3 |   state M = zeros(d, d)
  |         - declared [8, 8] here"#;
    assert_eq!(rendered(&step_line("M = linear(e, 3)")), want);
}

#[test]
fn primitive_shape_error_renders_argument_and_call() {
    let want = r#"error[P005]: itemWrite: `a` must have shape [8] to write into a [d, d] memory, but has shape [16]
 --> spec.mem:6:22
  |
6 |     M = itemWrite(M, e)
  |                      ^ shape [16]
  |
 ::: spec.mem:6:9
  |
6 |     M = itemWrite(M, e)
  |         --------------- in this call"#;
    assert_eq!(rendered(&step_line("M = itemWrite(M, e)")), want);
}

#[test]
fn every_catalogue_diagnostic_renders_its_location() {
    for c in catalogue() {
        let (d, sources) = first_error(&c.spec).expect("an error");
        let text = d.render(&sources, false);
        let header = format!(" --> {FILE}:{}", c.at);
        // Every error of the checker (past the parser) names its kind's code.
        if lang::parse_str(FILE, &c.spec).is_ok() {
            assert!(d.code.is_some(), "{}: no code in\n{text}", c.name);
        }
        let code = d.code.map(|c| format!("[{c}]")).unwrap_or_default();
        assert!(text.starts_with(&format!("error{code}: {}\n", c.message)), "{}: {text}", c.name);
        assert!(text.contains(&header), "{}: no `{header}` in\n{text}", c.name);
        assert!(text.contains('^'), "{}: no caret in\n{text}", c.name);
    }
}
