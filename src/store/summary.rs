//! A run's compact summary: what `memctl runs` filters, sorts and groups on.
//!
//! Written with its record in the same transaction (tree [`super::keys::SUMMARIES`]), so the
//! two never disagree. It holds the configuration, status, final metrics, convergence, tags and
//! times — no curves and no spec text — so that reading ten thousand of them is fast. It is
//! derived data: a store whose summaries are missing or of an older layout rebuilds them from
//! the records when it is opened.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::record::{ProcessIdentity, RunRecord, Status};
use crate::value::Value;

/// Layout version of summaries; a store with another version rebuilds them at open. (4: a
/// resumed run's `wall_seconds` counts every process that ran it.)
pub const SUMMARY_VERSION: u32 = 4;

/// Configuration values by name. Shared between summaries that have equal ones (the runs of a
/// sweep mostly do), which saves most of the allocations of reading many summaries.
pub type Values = Arc<BTreeMap<String, Value>>;

#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    pub id: u64,
    pub trial_key: String,
    pub status: Status,
    pub experiment: String,
    pub model: String,
    pub task: String,
    pub seed: u64,
    /// The names swept in the run's experiment, in sweep order.
    pub swept: Vec<String>,
    /// Model parameters.
    pub params: Values,
    pub task_options: Values,
    /// Training settings (unset optional ones are absent).
    pub train: Values,
    pub final_metrics: BTreeMap<String, f64>,
    pub steps_run: u64,
    pub steps_to_converge: Option<u64>,
    pub epochs_to_converge: Option<f64>,
    pub tags: Vec<String>,
    /// Unix seconds.
    pub started_at: f64,
    pub ended_at: Option<f64>,
    /// Seconds over every process that ran it ([`RunRecord::seconds_over_every_process`]).
    pub wall_seconds: f64,
    pub param_count: u64,
    pub spec_path: String,
    pub spec_hash: String,
    /// While `running`: its progress and its process (to tell a live run from a dead one).
    pub live: Option<LiveSummary>,
}

/// A running run's progress, in its summary.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveSummary {
    pub steps_total: u64,
    pub train_seconds: f64,
    /// The step it resumed from (its pace is measured from there).
    pub resumed_from: u64,
    pub max_time: Option<f64>,
    /// Unix seconds of its last progress update.
    pub updated_at: f64,
    pub owner: Option<ProcessIdentity>,
}

impl RunSummary {
    /// The summary as readers should see it: a `running` run whose process is gone shows as
    /// `interrupted` (what the next sweep will record).
    pub fn as_seen(mut self) -> RunSummary {
        if self.status != Status::Running {
            return self;
        }
        if self.live.as_ref().is_none_or(|l| super::owner::is_gone_process(l.owner.as_ref(), l.updated_at)) {
            self.status = Status::Interrupted;
            self.live = None;
        } else if let Some(l) = &self.live {
            // Its wall time so far, not as of its last update; a resumed run's counts the
            // training of the processes before this one.
            let here = super::record::now() - self.started_at;
            self.wall_seconds = if l.resumed_from > 0 { here.max(l.train_seconds) } else { here };
        }
        self
    }

    /// Final metric `name`, or for a run that diverged after `select` chose an evaluation
    /// (recorded with that evaluation's metrics alone), the chosen evaluation's.
    pub fn metric_or_selected(&self, name: &str) -> Option<f64> {
        let selected = || self.final_metrics.get(&format!("selected_{name}"));
        self.final_metrics.get(name).or_else(selected).copied()
    }

    /// Seconds left for a running run, estimated from its pace (see [`seconds_left`](super::record::seconds_left)).
    pub fn eta_seconds(&self) -> Option<f64> {
        let l = self.live.as_ref()?;
        super::record::seconds_left(self.steps_run, l.steps_total, l.train_seconds, l.max_time)
    }
}

#[cfg(test)]
impl RunSummary {
    /// A run that did not happen, for tests: `done`, trial `t{id}`, model `stm` on
    /// `assocRetrieval`, 100 steps, no parameters, options or metrics; tests set what they read.
    pub(crate) fn made_up(id: u64) -> RunSummary {
        RunSummary {
            id,
            trial_key: format!("t{id}"),
            status: Status::Done,
            experiment: "e".into(),
            model: "stm".into(),
            task: "assocRetrieval".into(),
            seed: 1,
            swept: vec![],
            params: Arc::default(),
            task_options: Arc::default(),
            train: Arc::default(),
            final_metrics: BTreeMap::new(),
            steps_run: 100,
            steps_to_converge: None,
            epochs_to_converge: None,
            tags: vec![],
            started_at: 0.0,
            ended_at: None,
            wall_seconds: 1.0,
            param_count: 10,
            spec_path: "x.mem".into(),
            spec_hash: "h".into(),
            live: None,
        }
    }
}

impl RunSummary {
    pub fn of(r: &RunRecord) -> RunSummary {
        RunSummary {
            id: r.id,
            trial_key: r.trial_key.clone(),
            status: r.status,
            experiment: r.config.experiment.clone(),
            model: r.config.model.clone(),
            task: r.config.task.clone(),
            seed: r.config.seed,
            swept: r.config.swept.iter().map(|(k, _)| k.clone()).collect(),
            params: Arc::new(r.config.params.clone()),
            task_options: Arc::new(r.config.task_options.clone()),
            train: Arc::new(r.config.train.clone()),
            final_metrics: match r.status {
                // While it trains: its latest validation metrics (`val_accuracy`, …).
                Status::Running => r
                    .curves
                    .iter()
                    .filter(|(k, _)| k.starts_with("val_"))
                    .filter_map(|(k, c)| c.last().map(|(_, v)| (k.clone(), *v)))
                    .collect(),
                _ => r.final_metrics.clone(),
            },
            steps_run: r.steps_run,
            steps_to_converge: r.steps_to_converge,
            epochs_to_converge: r.epochs_to_converge,
            tags: r.tags.clone(),
            started_at: r.started_at,
            ended_at: r.ended_at,
            wall_seconds: r.seconds_over_every_process(),
            param_count: r.param_count,
            spec_path: r.spec_path.clone(),
            spec_hash: r.spec_hash.clone(),
            live: (r.status == Status::Running).then(|| {
                let p = r.progress.as_ref();
                LiveSummary {
                    steps_total: p.map_or(0, |p| p.steps_total),
                    train_seconds: r.train_seconds,
                    resumed_from: p.and_then(|p| p.resumed_from).unwrap_or(0),
                    max_time: p.and_then(|p| p.max_time),
                    updated_at: p.map_or(r.started_at, |p| p.updated_at),
                    owner: r.environment.process.clone(),
                }
            }),
        }
    }
}

/// The id of each trial's newest run among `runs`, by trial key.
pub fn latest_ids<'a>(runs: impl IntoIterator<Item = &'a RunSummary>) -> HashMap<&'a str, u64> {
    let mut latest: HashMap<&str, u64> = HashMap::new();
    for r in runs {
        let id = latest.entry(r.trial_key.as_str()).or_insert(r.id);
        *id = (*id).max(r.id);
    }
    latest
}

/// Each trial's latest run among `runs` (the highest id), in their order, and how many runs
/// that leaves out: what a grouped view counts, so that a trial re-run (`--force`) counts once.
pub fn latest_of_each_trial(runs: Vec<&RunSummary>) -> (Vec<&RunSummary>, usize) {
    let latest = latest_ids(runs.iter().copied());
    let before = runs.len();
    let kept: Vec<&RunSummary> = runs.into_iter().filter(|r| latest[r.trial_key.as_str()] == r.id).collect();
    let left_out = before - kept.len();
    (kept, left_out)
}

/// Each trial's newest run, as seen now ([`RunSummary::as_seen`]), by trial key.
pub fn latest_by_trial(summaries: Vec<RunSummary>) -> HashMap<String, RunSummary> {
    let mut latest: HashMap<String, RunSummary> = HashMap::new();
    for s in summaries {
        let s = s.as_seen();
        if latest.get(&s.trial_key).is_none_or(|l| l.id < s.id) {
            latest.insert(s.trial_key.clone(), s);
        }
    }
    latest
}

// ---------------------------------------------------------------- encoding
//
// A small binary layout (JSON took 15 ms per thousand summaries to decode, mostly in the
// untagged `Value`): little-endian fixed-width numbers, strings as a u32 length and UTF-8
// bytes, `Option`s and `Value`s behind a tag byte, lists and metrics as a u32 count and items.
// The three configuration maps are each a u32 byte length, a u32 count and items, so that a
// [`Decoder`] can recognise one it has decoded before by its bytes and share it.

pub fn encode(s: &RunSummary) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(512));
    w.u64(s.id);
    w.str(&s.trial_key);
    w.u8(match s.status {
        Status::Running => 0,
        Status::Done => 1,
        Status::Failed => 2,
        Status::Interrupted => 3,
        Status::Pruned => 4,
    });
    w.str(&s.experiment);
    w.str(&s.model);
    w.str(&s.task);
    w.u64(s.seed);
    w.u32(s.swept.len() as u32);
    for k in &s.swept {
        w.str(k);
    }
    for m in [&s.params, &s.task_options, &s.train] {
        let mut inner = Writer(Vec::with_capacity(256));
        inner.u32(m.len() as u32);
        for (k, v) in m.iter() {
            inner.str(k);
            inner.value(v);
        }
        w.u32(inner.0.len() as u32);
        w.0.extend_from_slice(&inner.0);
    }
    w.u32(s.final_metrics.len() as u32);
    for (k, v) in &s.final_metrics {
        w.str(k);
        w.f64(*v);
    }
    w.u64(s.steps_run);
    w.opt(s.steps_to_converge.map(|v| v as f64));
    w.opt(s.epochs_to_converge);
    w.u32(s.tags.len() as u32);
    for t in &s.tags {
        w.str(t);
    }
    w.f64(s.started_at);
    w.opt(s.ended_at);
    w.f64(s.wall_seconds);
    w.u64(s.param_count);
    w.str(&s.spec_path);
    w.str(&s.spec_hash);
    w.option(s.live.as_ref(), |w, l| {
        w.u64(l.steps_total);
        w.f64(l.train_seconds);
        w.u64(l.resumed_from);
        w.opt(l.max_time);
        w.f64(l.updated_at);
        w.option(l.owner.as_ref(), |w, o| {
            w.str(&o.hostname);
            w.str(&o.boot_id);
            w.u64(o.pid as u64);
            w.u64(o.start_ticks);
        });
    });
    w.0
}

pub fn decode(id: u64, bytes: &[u8]) -> Result<RunSummary, super::error::StoreError> {
    Decoder::default().decode(id, bytes)
}

/// Decodes summaries, sharing configuration maps equal to ones it decoded before.
#[derive(Default)]
pub struct Decoder {
    seen: HashMap<Vec<u8>, Values>,
}

impl Decoder {
    pub fn decode(&mut self, id: u64, bytes: &[u8]) -> Result<RunSummary, super::error::StoreError> {
        let corrupt = || super::error::StoreError::Corrupt { id, reason: "unreadable summary".into() };
        let mut r = Reader(bytes);
        let s = read(&mut r, self).ok_or_else(corrupt)?;
        if !r.0.is_empty() {
            return Err(corrupt());
        }
        Ok(s)
    }

    fn map(&mut self, r: &mut Reader) -> Option<Values> {
        let len = r.u32()? as usize;
        let bytes = r.slice(len)?;
        if let Some(m) = self.seen.get(bytes) {
            return Some(m.clone());
        }
        let mut inner = Reader(bytes);
        let n = inner.u32()? as usize;
        // Each item takes at least six bytes: no huge allocation from a bad count.
        let mut items = Vec::with_capacity(n.min(bytes.len() / 6));
        for _ in 0..n {
            let k = inner.string()?;
            items.push((k, inner.value(0)?));
        }
        if !inner.0.is_empty() {
            return None;
        }
        // Written in key order, so collecting builds the map in bulk.
        let m: Values = Arc::new(items.into_iter().collect());
        self.seen.insert(bytes.to_vec(), m.clone());
        Some(m)
    }
}

fn read(r: &mut Reader, d: &mut Decoder) -> Option<RunSummary> {
    let id = r.u64()?;
    let trial_key = r.string()?;
    let status = match r.u8()? {
        0 => Status::Running,
        1 => Status::Done,
        2 => Status::Failed,
        3 => Status::Interrupted,
        4 => Status::Pruned,
        _ => return None,
    };
    let experiment = r.string()?;
    let model = r.string()?;
    let task = r.string()?;
    let seed = r.u64()?;
    let swept = (0..r.u32()?).map(|_| r.string()).collect::<Option<Vec<_>>>()?;
    let params = d.map(r)?;
    let task_options = d.map(r)?;
    let train = d.map(r)?;
    let n = r.u32()? as usize;
    let mut metrics = Vec::with_capacity(n.min(r.0.len() / 12));
    for _ in 0..n {
        let k = r.string()?;
        metrics.push((k, r.f64()?));
    }
    let final_metrics: BTreeMap<String, f64> = metrics.into_iter().collect();
    Some(RunSummary {
        id,
        trial_key,
        status,
        experiment,
        model,
        task,
        seed,
        swept,
        params,
        task_options,
        train,
        final_metrics,
        steps_run: r.u64()?,
        steps_to_converge: r.opt()?.map(|v| v as u64),
        epochs_to_converge: r.opt()?,
        tags: (0..r.u32()?).map(|_| r.string()).collect::<Option<Vec<_>>>()?,
        started_at: r.f64()?,
        ended_at: r.opt()?,
        wall_seconds: r.f64()?,
        param_count: r.u64()?,
        spec_path: r.string()?,
        spec_hash: r.string()?,
        live: r.option(|r| {
            Some(LiveSummary {
                steps_total: r.u64()?,
                train_seconds: r.f64()?,
                resumed_from: r.u64()?,
                max_time: r.opt()?,
                updated_at: r.f64()?,
                owner: r.option(|r| {
                    Some(ProcessIdentity {
                        hostname: r.string()?,
                        boot_id: r.string()?,
                        pid: u32::try_from(r.u64()?).ok()?,
                        start_ticks: r.u64()?,
                    })
                })?,
            })
        })?,
    })
}

/// Lists nest at most this deep in a summary (values come from specs, which nest far less).
const MAX_DEPTH: usize = 32;

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
    }
    /// `0` for none, else `1` and the value as `write` writes it.
    fn option<T>(&mut self, v: Option<T>, write: impl FnOnce(&mut Self, T)) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                write(self, v);
            }
        }
    }
    fn opt(&mut self, v: Option<f64>) {
        self.option(v, Self::f64);
    }
    fn value(&mut self, v: &Value) {
        match v {
            Value::Bool(b) => {
                self.u8(0);
                self.u8(u8::from(*b));
            }
            Value::Int(i) => {
                self.u8(1);
                self.u64(*i as u64);
            }
            Value::Float(f) => {
                self.u8(2);
                self.f64(*f);
            }
            Value::Str(s) => {
                self.u8(3);
                self.str(s);
            }
            Value::List(items) => {
                self.u8(4);
                self.u32(items.len() as u32);
                for i in items {
                    self.value(i);
                }
            }
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    fn slice(&mut self, n: usize) -> Option<&[u8]> {
        if n > self.0.len() {
            return None;
        }
        let (s, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn f64(&mut self) -> Option<f64> {
        self.take().map(f64::from_le_bytes)
    }
    fn string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.slice(n)?.to_vec()).ok()
    }
    /// What [`Writer::option`] wrote, the value read by `read`.
    fn option<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        match self.u8()? {
            0 => Some(None),
            1 => Some(Some(read(self)?)),
            _ => None,
        }
    }
    fn opt(&mut self) -> Option<Option<f64>> {
        self.option(Self::f64)
    }
    fn value(&mut self, depth: usize) -> Option<Value> {
        Some(match self.u8()? {
            0 => Value::Bool(self.u8()? != 0),
            1 => Value::Int(self.u64()? as i64),
            2 => Value::Float(self.f64()?),
            3 => Value::Str(self.string()?),
            4 if depth < MAX_DEPTH => {
                let n = self.u32()? as usize;
                // Each item takes at least two bytes: no huge allocation from a bad count.
                if n > self.0.len() / 2 {
                    return None;
                }
                Value::List((0..n).map(|_| self.value(depth + 1)).collect::<Option<Vec<_>>>()?)
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
impl RunSummary {
    /// A run summary with a value of every kind, for tests.
    pub fn example() -> RunSummary {
        let mut params = BTreeMap::new();
        params.insert("d".to_string(), Value::Int(-48));
        params.insert("gates".to_string(), Value::Bool(true));
        params.insert("widths".to_string(), Value::List(vec![Value::Int(1), Value::List(vec![Value::Float(0.5)])]));
        let mut metrics = BTreeMap::new();
        metrics.insert("accuracy".to_string(), 0.875);
        RunSummary {
            id: 7,
            trial_key: "abc".into(),
            status: Status::Interrupted,
            experiment: "e".into(),
            model: "stm".into(),
            task: "assocRetrieval".into(),
            seed: 3,
            swept: vec!["d".into(), "seed".into()],
            params: Arc::new(params),
            task_options: Arc::new([("pairs".to_string(), Value::Int(4))].into()),
            train: Arc::new([("optimizer".to_string(), Value::Str("adam".into()))].into()),
            final_metrics: metrics,
            steps_run: 600,
            steps_to_converge: Some(500),
            epochs_to_converge: None,
            tags: vec!["ablation".into(), "ünï".into()],
            started_at: 1.7e9,
            ended_at: Some(1.7e9 + 3.5),
            wall_seconds: 3.5,
            param_count: 1234,
            spec_path: "x.mem".into(),
            spec_hash: "ff".into(),
            live: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RunSummary {
        RunSummary::example()
    }

    /// A run resumed from a checkpoint shows the time of every process that ran it, as `show`
    /// does, not only the last one's.
    #[test]
    fn a_resumed_runs_wall_time_counts_every_process() {
        let mut r: RunRecord =
            super::super::record::decode(include_bytes!("../../tests/fixtures/run_record_v1.json")).unwrap();
        (r.wall_seconds, r.train_seconds, r.eval_seconds) = (1.2, 2.0, 0.1);
        assert_eq!(RunSummary::of(&r).wall_seconds, 1.2);
        r.progress = Some(super::super::Progress {
            steps_total: 10,
            updated_at: 0.0,
            resumed_from: Some(4),
            checkpoint_step: None,
            max_time: None,
            deaths: 0,
        });
        assert_eq!(RunSummary::of(&r).wall_seconds, 2.1);
    }

    /// A run that diverged after a selection has only its selected evaluation's metrics: that
    /// is its value in a search; any other run's own metric comes first.
    #[test]
    fn a_metric_falls_back_to_the_selected_evaluations() {
        let mut s = sample();
        s.final_metrics = BTreeMap::from([("selected_val_accuracy".into(), 0.5), ("selected_step".into(), 10.0)]);
        assert_eq!(s.metric_or_selected("val_accuracy"), Some(0.5));
        s.final_metrics.insert("val_accuracy".into(), 0.25);
        assert_eq!(s.metric_or_selected("val_accuracy"), Some(0.25));
        assert_eq!(s.metric_or_selected("loss"), None);
    }

    #[test]
    fn summaries_round_trip() {
        let s = sample();
        assert_eq!(decode(7, &encode(&s)).unwrap(), s);
        let owner = ProcessIdentity { hostname: "h".into(), boot_id: "b".into(), pid: 42, start_ticks: 7 };
        let live = LiveSummary {
            steps_total: 9,
            train_seconds: 1.5,
            resumed_from: 3,
            max_time: None,
            updated_at: 2.0,
            owner: None,
        };
        for live in [live.clone(), LiveSummary { max_time: Some(60.0), owner: Some(owner), ..live }] {
            let running = RunSummary { live: Some(live), ..sample() };
            assert_eq!(decode(7, &encode(&running)).unwrap(), running);
        }
    }

    #[test]
    fn a_decoder_shares_equal_maps() {
        let mut d = Decoder::default();
        let a = d.decode(7, &encode(&sample())).unwrap();
        let mut other = sample();
        Arc::make_mut(&mut other.params).insert("d".into(), Value::Int(96));
        let b = d.decode(7, &encode(&other)).unwrap();
        assert!(Arc::ptr_eq(&a.train, &b.train) && Arc::ptr_eq(&a.task_options, &b.task_options));
        assert!(!Arc::ptr_eq(&a.params, &b.params));
        assert_eq!(b.params["d"], Value::Int(96));
    }

    #[test]
    fn truncated_or_padded_summaries_are_errors_not_panics() {
        let bytes = encode(&sample());
        for n in 0..bytes.len() {
            assert!(decode(7, &bytes[..n]).is_err(), "prefix of {n} bytes decoded");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(7, &longer).is_err());
    }
}
