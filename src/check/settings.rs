//! The `train { ... }` block: known keys, kinds and ranges, into a [`TrainConfig`].

use std::collections::BTreeMap;

use super::consteval;
use super::error_kind::CheckErrorKind;
use crate::diag::Diagnostic;
use crate::lang::ast::{BinaryOp, ExprKind, Setting};
use crate::source::Span;
use crate::tasks::{Target, Task};
use crate::train_config::{self as config, Comparison, OptimizerKind, Select, StopWhen, TrainConfig};
use crate::value::{Kind, Value};

/// A `train` block's settings, checked for names and kinds.
#[derive(Default, Clone)]
pub struct Block {
    pub values: BTreeMap<String, (Value, Span)>,
    pub stop_when: Option<StopWhen>,
    pub select: Option<Select>,
}

/// Reads a `train` block of an experiment on `task`.
pub fn read(settings: &[Setting], task: &dyn Task) -> Result<Block, Diagnostic> {
    let target = task.target();
    let mut block = Block::default();
    let put =
        |key: &str, value: Value, key_span: Span, value_span: Span, block: &mut Block| -> Result<(), Diagnostic> {
            let Some(spec) = config::setting(key) else {
                let mut d =
                    CheckErrorKind::UnknownSetting { key: key.to_string() }.error().at(key_span, "not a setting");
                let names = config::SETTINGS.iter().map(|s| s.name).chain(["stop_when", "select"]);
                d = match crate::suggest::did_you_mean(key, names) {
                    Some(h) => d.hint(h),
                    None => d.hint(format!(
                        "settings: {}, stop_when, select",
                        config::SETTINGS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
                    )),
                };
                return Err(d);
            };
            if block.values.contains_key(key) {
                return Err(CheckErrorKind::SettingTwice { key: key.to_string() }.error().at(key_span, "again here"));
            }
            let v = check_kind(key, spec.kind, value, value_span)?;
            block.values.insert(key.to_string(), (v, value_span));
            Ok(())
        };
    for s in settings {
        let key = s.key.name.as_str();
        let twice = || CheckErrorKind::SettingTwice { key: key.to_string() }.error().at(s.key.span, "again here");
        match (key, &s.value.kind) {
            ("stop_when", _) if block.stop_when.is_some() => return Err(twice()),
            ("select", _) if block.select.is_some() => return Err(twice()),
            ("stop_when", _) => block.stop_when = Some(stop_when(&s.value, target)?),
            ("select", _) => block.select = Some(select(&s.value, task)?),
            ("optimizer", ExprKind::Call(_) | ExprKind::Name(_)) => {
                let (name, span, args) = match &s.value.kind {
                    ExprKind::Call(c) => (c.callee.name.clone(), c.callee.span, c.args.as_slice()),
                    ExprKind::Name(n) => (n.clone(), s.value.span, &[][..]),
                    _ => unreachable!("matched above"),
                };
                put("optimizer", Value::Str(name), s.key.span, span, &mut block)?;
                for a in args {
                    let Some(arg_name) = &a.name else {
                        return Err(CheckErrorKind::OptimizerArgsUnnamed
                            .error()
                            .at(a.value.span, "unnamed")
                            .hint("e.g. `rmsprop(lr = 1e-4, momentum = 0.9)`"));
                    };
                    let v = consteval::eval(&a.value, &|_| None, &[])?;
                    put(&arg_name.name, v, arg_name.span, a.value.span, &mut block)?;
                }
            }
            _ => {
                let v = consteval::eval(&s.value, &|_| None, &[])?;
                put(key, v, s.key.span, s.value.span, &mut block)?;
            }
        }
    }
    Ok(block)
}

fn check_kind(key: &str, kind: Kind, v: Value, span: Span) -> Result<Value, Diagnostic> {
    v.coerce(kind).ok_or_else(|| {
        CheckErrorKind::SettingKind { key: key.to_string(), expected: kind, found: v.clone() }
            .error()
            .at(span, format!("expected {}", kind.with_article()))
    })
}

/// Checks a swept value for a train setting.
pub fn check_swept(key: &str, v: Value, span: Span) -> Result<Value, Diagnostic> {
    let spec = config::setting(key)
        .ok_or_else(|| CheckErrorKind::UnknownSetting { key: key.to_string() }.error().at(span, "here"))?;
    check_kind(key, spec.kind, v, span)
}

fn stop_when(e: &crate::lang::ast::Expr, target: Target) -> Result<StopWhen, Diagnostic> {
    let bad = || {
        CheckErrorKind::StopWhen
            .error()
            .at(e.span, "e.g. `accuracy >= 0.99`")
            .hint(format!("metrics of this task: {}, loss", target.metrics().join(", ")))
    };
    let ExprKind::Binary(op, lhs, rhs) = &e.kind else {
        return Err(bad());
    };
    let op = match op {
        BinaryOp::Ge => Comparison::Ge,
        BinaryOp::Gt => Comparison::Gt,
        BinaryOp::Le => Comparison::Le,
        BinaryOp::Lt => Comparison::Lt,
        _ => return Err(bad()),
    };
    let ExprKind::Name(metric) = &lhs.kind else {
        return Err(bad());
    };
    let known: Vec<&str> = target.metrics().iter().copied().chain(["loss"]).collect();
    if !known.contains(&metric.as_str()) {
        let mut d = CheckErrorKind::NoMetric { metric: metric.to_string() }
            .error()
            .at(lhs.span, "unknown metric")
            .hint(format!("metrics of this task: {}", known.join(", ")));
        let unprefixed = metric.strip_prefix("val_").filter(|m| known.contains(m));
        if let Some(m) = unprefixed {
            d = d.hint(format!("`stop_when` tests the validation set already: write `{m}`"));
        } else if let Some(h) = crate::suggest::did_you_mean(metric, known.iter().copied()) {
            d = d.hint(h);
        }
        return Err(d);
    }
    let threshold = consteval::eval(rhs, &|_| None, &[])?.as_float().ok_or_else(bad)?;
    Ok(StopWhen { metric: metric.clone(), op, threshold })
}

/// `select = best(metric)`: a validation metric (`val_accuracy`) or one of an extra test
/// split's (`od_easy_seq_accuracy`); the reported test set's own metrics are not allowed.
fn select(e: &crate::lang::ast::Expr, task: &dyn Task) -> Result<Select, Diagnostic> {
    let target = task.target();
    let per_split: Vec<&str> =
        target.metrics().iter().copied().chain(["loss"]).chain(task.task_metric_names().iter().copied()).collect();
    let splits = task.test_splits();
    let mut known: Vec<String> = per_split.iter().map(|m| format!("val_{m}")).collect();
    for split in &splits[1..] {
        known.extend(per_split.iter().map(|m| format!("{split}_{m}")));
    }
    let bad = || {
        CheckErrorKind::Select
            .error()
            .at(e.span, "e.g. `best(val_accuracy)`")
            .hint(format!("metrics to select on: {}", known.join(", ")))
    };
    let ExprKind::Call(call) = &e.kind else {
        return Err(bad());
    };
    if call.callee.name != "best" || call.args.len() != 1 || call.args[0].name.is_some() {
        return Err(bad());
    }
    let arg = &call.args[0].value;
    let ExprKind::Name(metric) = &arg.kind else {
        return Err(bad());
    };
    if !known.contains(metric) {
        let main = per_split.contains(&metric.as_str());
        let mut d = if main {
            CheckErrorKind::SelectOnTestMetric { metric: metric.clone() }
        } else {
            CheckErrorKind::NoMetricToSelect { metric: metric.clone() }
        }
        .error()
        .at(arg.span, if main { "the reported test set" } else { "unknown metric" });
        d = if main {
            d.hint(format!("select on the validation set instead: `best(val_{metric})`"))
        } else {
            d.hint(format!("metrics to select on: {}", known.join(", ")))
        };
        if !main && let Some(h) = crate::suggest::did_you_mean(metric, known.iter().map(String::as_str)) {
            d = d.hint(h);
        }
        return Err(d);
    }
    let (split, base) = match metric.strip_prefix("val_") {
        Some(base) => (None, base.to_string()),
        None => {
            let i = (1..splits.len())
                .find(|&i| metric.strip_prefix(splits[i]).is_some_and(|r| r.starts_with('_')))
                .expect("a known metric names a split");
            (Some(i), metric[splits[i].len() + 1..].to_string())
        }
    };
    Ok(Select { higher_is_better: crate::tasks::higher_is_better(&base), metric: metric.clone(), split, base })
}

/// A trial's settings as it sees them: its sweep's values over its `train` block's, over the
/// defaults; errors point at the value, or at the experiment (`at`) where none is written.
struct Lookup<'a> {
    block: &'a Block,
    swept: &'a BTreeMap<String, (Value, Span)>,
    at: Span,
}

impl Lookup<'_> {
    /// The value written for `key` and where, if any.
    fn get(&self, key: &str) -> Option<(Value, Span)> {
        self.swept.get(key).or_else(|| self.block.values.get(key)).cloned()
    }

    /// Where `key` is written, or the experiment.
    fn span_of(&self, key: &str) -> Span {
        self.get(key).map_or(self.at, |(_, s)| s)
    }

    /// `key` as a number, or its default, or 0.
    fn float(&self, key: &str) -> f64 {
        self.get(key)
            .and_then(|(v, _)| v.as_float())
            .or_else(|| config::setting(key).and_then(|s| s.default).and_then(|d| d.value().as_float()))
            .unwrap_or(0.0)
    }

    /// `key` (or its default) as an integer from 1 to 2^40.
    fn positive_int(&self, key: &str) -> Result<usize, Diagnostic> {
        let v =
            self.get(key).map(|(v, _)| v).or_else(|| config::setting(key).and_then(|s| s.default).map(|d| d.value()));
        match v.and_then(|v| v.as_int()) {
            Some(i) if (1..=1 << 40).contains(&i) => Ok(i as usize),
            Some(i) if i < 1 => Err(CheckErrorKind::SettingTooSmall { key: key.to_string(), found: i }
                .error()
                .at(self.span_of(key), "too small")),
            Some(i) => Err(CheckErrorKind::SettingTooLarge { key: key.to_string(), found: i }
                .error()
                .at(self.span_of(key), "too large")),
            None => Err(CheckErrorKind::SettingNotSet { key: key.to_string() }.error().at(self.at, "here")),
        }
    }

    /// `key` (or its default) as a number `fits` takes, which `range` describes.
    fn float_in(&self, key: &str, fits: fn(f64) -> bool, range: &'static str) -> Result<f64, Diagnostic> {
        let x = self.float(key);
        if fits(x) {
            return Ok(x);
        }
        Err(CheckErrorKind::SettingRange { key: key.to_string(), found: x, range }
            .error()
            .at(self.span_of(key), "out of range"))
    }

    /// `key` as a finite number above 0, if it is written.
    fn optional_positive(&self, key: &str) -> Result<Option<f64>, Diagnostic> {
        match self.get(key) {
            None => Ok(None),
            Some((v, span)) => match v.as_float() {
                Some(x) if x > 0.0 && x.is_finite() => Ok(Some(x)),
                _ => Err(CheckErrorKind::NotPositive { key: key.to_string(), found: v.clone() }
                    .error()
                    .at(span, "not positive")),
            },
        }
    }
}

/// The trial's training configuration: block values, then sweep overrides, then defaults.
pub fn resolve(block: &Block, swept: &BTreeMap<String, (Value, Span)>, at: Span) -> Result<TrainConfig, Diagnostic> {
    let settings = Lookup { block, swept, at };
    let opt_name =
        settings.get("optimizer").and_then(|(v, _)| v.as_str().map(str::to_string)).unwrap_or_else(|| "adam".into());
    let optimizer = OptimizerKind::parse(&opt_name).ok_or_else(|| {
        let mut d = CheckErrorKind::UnknownOptimizer { name: opt_name.clone() }
            .error()
            .at(settings.span_of("optimizer"), "not an optimizer")
            .hint("optimizers: adam, rmsprop, sgd");
        if let Some(h) = crate::suggest::did_you_mean(&opt_name, ["adam", "rmsprop", "sgd"]) {
            d = d.hint(h);
        }
        d
    })?;
    let lr = settings.float("lr");
    if !(lr > 0.0 && lr.is_finite()) {
        return Err(CheckErrorKind::LearningRate { lr }.error().at(settings.span_of("lr"), "not positive"));
    }
    let device =
        settings.get("device").and_then(|(v, _)| v.as_str().map(str::to_string)).unwrap_or_else(|| "cpu".into());
    if crate::device::parse(&device).is_none() {
        return Err(CheckErrorKind::UnknownDevice { name: device.clone() }
            .error()
            .at(settings.span_of("device"), "not a device")
            .hint("devices: cpu, cuda, cuda:N"));
    }
    let checkpoint_every = settings.float("checkpoint_every");
    if !(checkpoint_every >= 0.0 && checkpoint_every.is_finite()) {
        return Err(CheckErrorKind::CheckpointEvery { minutes: checkpoint_every }
            .error()
            .at(settings.span_of("checkpoint_every"), "not a duration")
            .hint("0 saves checkpoints only when training is stopped from outside"));
    }
    let keep_checkpoint = settings.get("keep_checkpoint").and_then(|(v, _)| v.as_bool()).unwrap_or(false);
    let eval_size = match settings.get("eval_size") {
        None => None,
        Some(_) => Some(settings.positive_int("eval_size")?),
    };
    // Averaging constants, below 1 (PyTorch asks only that momentum and alpha be 0 or more, but
    // at 1 or past it nothing decays).
    let averaging = |key| settings.float_in(key, |x| (0.0..1.0).contains(&x), "from 0 up to (not including) 1");
    Ok(TrainConfig {
        optimizer,
        lr,
        momentum: averaging("momentum")?,
        alpha: averaging("alpha")?,
        beta1: averaging("beta1")?,
        beta2: averaging("beta2")?,
        // Above 0: an Adam or RMSprop step divides by it where a gradient is 0.
        eps: settings.float_in("eps", |x| x > 0.0 && x.is_finite(), "a finite number above 0")?,
        weight_decay: settings.float_in(
            "weight_decay",
            |x| x >= 0.0 && x.is_finite(),
            "a finite number of 0 or more",
        )?,
        batch: settings.positive_int("batch")?,
        steps: settings.positive_int("steps")?,
        eval_every: settings.positive_int("eval_every")?,
        eval_size,
        clip_value: settings.optional_positive("clip_value")?,
        clip_norm: settings.optional_positive("clip_norm")?,
        max_time: settings.optional_positive("max_time")?,
        device,
        stop_when: block.stop_when.clone(),
        select: block.select.clone(),
        checkpoint_every,
        keep_checkpoint,
    })
}
