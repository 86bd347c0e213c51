//! A trial's life while it trains: its progress written to its `running` record in the store
//! (so that other processes can watch it), and its checkpoints saved and loaded (in the
//! store's, or a Slurm sweep's, checkpoint directory).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use candle_core::Device;

use super::Reporter;
use super::progress_writer::ProgressWriter;
use crate::store::checkpoints::CheckpointDir;
use crate::store::{PROGRESS_EVERY, Progress, RunRecord, Store, now};
use crate::train::checkpoint::{Checkpoints, TrainState};
use crate::train::{Observer, Outcome};

/// The trial's checkpoint of its `steps`, if it has one that reads; a damaged one, or one past
/// `steps` (another trial's), is reported and ignored
/// (the trial then starts from step 0, which loses time but nothing else).
pub fn load_checkpoint(dir: &CheckpointDir, key: &str, steps: usize, reporter: &dyn Reporter) -> Option<TrainState> {
    match dir.load(key) {
        Ok(Some(bytes)) => match TrainState::from_bytes(&bytes, &Device::Cpu) {
            Ok(state) if state.step <= steps => Some(state),
            Ok(state) => {
                let at = state.step;
                reporter.warning(&format!(
                    "trial {key}: its checkpoint is at step {at}, past the trial's {steps} steps (not its own); \
                     starting from step 0"
                ));
                None
            }
            Err(e) => {
                reporter.warning(&format!("trial {key}: its checkpoint cannot be read ({e}); starting from step 0"));
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            reporter.warning(&e.to_string());
            None
        }
    }
}

/// One running trial: an [`Observer`] that forwards to the sweep's display and writes the
/// progress to the store, and the trial's [`Checkpoints`].
pub struct Live<'a> {
    /// Writes progress to the store (none for a Slurm worker, which writes its shard at the
    /// end).
    writer: Mutex<Option<ProgressWriter>>,
    checkpoints: CheckpointDir,
    key: String,
    /// The `running` record as last written (curves and timings so far).
    record: Mutex<RunRecord>,
    last_write: Mutex<Option<Instant>>,
    display: &'a dyn Observer,
    reporter: &'a dyn Reporter,
    /// Taken by the first `resume` call.
    resume: Mutex<Option<TrainState>>,
    every: Option<Duration>,
    /// A search's pruner, asked after every evaluation whether the trial goes on.
    judge: Option<&'a dyn Judge>,
}

/// Why a trial stopped when another sweep took its run over.
pub const TAKEN_OVER: &str = "taken over by another sweep";

/// Decides, after each evaluation of a trial, whether it stops early (a search's pruner).
pub trait Judge: Sync {
    /// Why the trial stops at `step`, or `None` to go on.
    fn stop_here(&self, step: usize, so_far: &Outcome) -> Option<String>;
    /// The decision that stopped it, for its record.
    fn pruned(&self) -> Option<crate::store::Pruned>;
}

impl<'a> Live<'a> {
    pub fn new(
        store: Option<&'a Store>,
        checkpoints: CheckpointDir,
        record: RunRecord,
        key: String,
        display: &'a dyn Observer,
        reporter: &'a dyn Reporter,
        resume: Option<TrainState>,
    ) -> Live<'a> {
        let minutes = record.config.train.get("checkpoint_every").and_then(crate::value::Value::as_float);
        let every = minutes.filter(|m| *m > 0.0).map(|m| Duration::from_secs_f64(m * 60.0));
        Live {
            writer: Mutex::new(store.map(|s| ProgressWriter::start(s.clone(), record.clone()))),
            checkpoints,
            key,
            record: Mutex::new(record),
            last_write: Mutex::new(None),
            display,
            reporter,
            resume: Mutex::new(resume),
            every,
            judge: None,
        }
    }

    /// The trial is judged by `judge` after every evaluation.
    pub fn judged_by(mut self, judge: Option<&'a dyn Judge>) -> Live<'a> {
        self.judge = judge;
        self
    }

    /// The record's progress as last known.
    pub fn progress(&self) -> Option<Progress> {
        self.record.lock().ok().and_then(|r| r.progress.clone())
    }

    /// Hands the record to the progress writer if the last write is `PROGRESS_EVERY` old (or
    /// `force`).
    fn write(&self, force: bool) {
        let Ok(writer) = self.writer.lock() else { return };
        let Some(writer) = writer.as_ref() else { return };
        for e in writer.errors() {
            self.reporter.warning(&e);
        }
        let (Ok(mut last), Ok(mut record)) = (self.last_write.lock(), self.record.lock()) else { return };
        if !force && last.is_some_and(|t| t.elapsed() < PROGRESS_EVERY) {
            return;
        }
        if let Some(p) = record.progress.as_mut() {
            p.updated_at = now();
        }
        writer.send(record.clone());
        *last = Some(Instant::now());
    }
}

impl Live<'_> {
    /// Whether another sweep took this trial's run over while it trained.
    pub fn taken_over(&self) -> bool {
        self.writer.lock().is_ok_and(|w| w.as_ref().is_some_and(ProgressWriter::taken_over))
    }

    /// Stops writing progress, once the last write has landed: call it before storing the
    /// trial's final record, so that no progress write lands after it.
    pub fn stop_writing(&self) {
        let writer = self.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(writer) = writer {
            for e in writer.finish() {
                self.reporter.warning(&e);
            }
        }
    }
}

impl Drop for Live<'_> {
    /// Waits for the last progress write, so that none lands after the trial's final record.
    fn drop(&mut self) {
        self.stop_writing();
    }
}

impl Observer for Live<'_> {
    fn on_step(&self, step: usize, steps: usize, loss: f64) {
        self.display.on_step(step, steps, loss);
    }

    fn on_eval(&self, step: usize, metrics: &[(&str, f64)]) {
        self.display.on_eval(step, metrics);
    }

    fn on_progress(&self, so_far: &Outcome) {
        let first = match self.record.lock() {
            Ok(mut r) => {
                let first = r.steps_run == r.progress.as_ref().and_then(|p| p.resumed_from).unwrap_or(0);
                r.curves = so_far.curves.clone();
                r.steps_run = so_far.steps_run as u64;
                r.train_seconds = so_far.train_seconds;
                r.eval_seconds = so_far.eval_seconds;
                r.wall_seconds = now() - r.started_at;
                first
            }
            Err(_) => return,
        };
        // The first report is always written: it tells a later sweep that this attempt trained.
        self.write(first);
    }

    /// A trial another sweep took over stops at its next evaluation: that sweep trains it,
    /// and nothing this process trains on is recorded.
    fn stop_here(&self, step: usize, so_far: &Outcome) -> Option<String> {
        if self.taken_over() {
            return Some(TAKEN_OVER.into());
        }
        self.judge?.stop_here(step, so_far)
    }
}

impl Checkpoints for Live<'_> {
    fn resume(&self, device: &Device) -> candle_core::Result<Option<TrainState>> {
        let Some(state) = self.resume.lock().ok().and_then(|mut r| r.take()) else { return Ok(None) };
        // Loaded on the CPU; a trial on another device gets its tensors moved there.
        if device.is_cpu() {
            return Ok(Some(state));
        }
        let to = |t: &candle_core::Tensor| t.to_device(device);
        let params = state.params.iter().map(to).collect::<candle_core::Result<Vec<_>>>()?;
        let mut optimizer = state.optimizer.clone();
        for buffer in &mut optimizer.buffers {
            for t in buffer.iter_mut().flatten() {
                *t = to(t)?;
            }
        }
        Ok(Some(TrainState { params, optimizer, ..state }))
    }

    fn every(&self) -> Option<Duration> {
        self.every
    }

    fn save(&self, state: &TrainState) {
        // The trial's checkpoint is the sweep's that took it over.
        if self.taken_over() {
            return;
        }
        // Serialising counts as store time too: it is checkpointing's cost.
        let saved = crate::store::cost::timed(|| state.to_bytes())
            .map_err(|e| e.to_string())
            .and_then(|bytes| self.checkpoints.save(&self.key, &bytes).map_err(|e| e.to_string()));
        match saved {
            Ok(()) => {
                // The record says what the checkpoint holds, so that `runs` shows the step a
                // resumed trial starts from, not the last evaluation's.
                if let Ok(mut r) = self.record.lock() {
                    if let Some(p) = r.progress.as_mut() {
                        p.checkpoint_step = Some(state.step as u64);
                    }
                    if state.step as u64 > r.steps_run {
                        r.steps_run = state.step as u64;
                        r.curves = state.curves.clone();
                        r.train_seconds = state.train_seconds;
                        r.eval_seconds = state.eval_seconds;
                        r.wall_seconds = now() - r.started_at;
                    }
                }
                self.write(true);
            }
            Err(e) => {
                self.reporter.warning(&format!("trial {}: checkpoint at step {} not saved: {e}", self.key, state.step))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::sweep::{Quiet, Warnings};
    use crate::train::optim::OptimState;

    #[test]
    fn a_saved_checkpoint_moves_the_records_progress_to_its_step() {
        let dir = tempfile::tempdir().unwrap();
        let mut record: RunRecord =
            crate::store::record::decode(include_bytes!("../../tests/fixtures/run_record_v1.json")).unwrap();
        record.steps_run = 2000;
        record.progress = Some(Progress {
            steps_total: 30_000,
            updated_at: 0.0,
            resumed_from: None,
            checkpoint_step: None,
            max_time: None,
            deaths: 0,
        });
        let live =
            Live::new(None, CheckpointDir::new(dir.path()), record, "abc1".into(), &crate::train::Silent, &Quiet, None);
        let state = |step: usize| TrainState {
            step,
            curves: BTreeMap::from([("val_loss".to_string(), vec![(2000, 0.5)])]),
            interval_loss: (0.0, 0),
            selected: None,
            train_seconds: 12.5,
            eval_seconds: 1.5,
            stage: Default::default(),
            params: vec![],
            optimizer: OptimState { updates: step as u64, buffers: vec![] },
        };
        live.save(&state(2699));
        let r = live.record.lock().unwrap().clone();
        assert_eq!((r.steps_run, r.progress.as_ref().unwrap().checkpoint_step), (2699, Some(2699)));
        assert_eq!((r.train_seconds, r.eval_seconds), (12.5, 1.5));
        assert!(dir.path().join("abc1.ckpt").exists());
        // An older checkpoint (none is written after a later report, but the record must not
        // go back if one were) leaves the steps alone.
        live.save(&state(100));
        assert_eq!(live.record.lock().unwrap().steps_run, 2699);
    }

    /// A trial whose run another sweep took over is told to stop at its next evaluation (the
    /// training loop stops on any reason `stop_here` gives), and says why.
    #[test]
    fn a_trial_taken_over_is_told_to_stop_at_its_next_evaluation() {
        let program = crate::check::checked_text(crate::check::test_specs::SIX_STEPS_OF_TINY_LSTM);
        let so_far = Outcome::starting(&program.experiments[0].trials[0]);
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let record = crate::store::tests::running(1, true);
        let warned = Warnings::default();
        let live = Live::new(
            Some(&store),
            store.checkpoints(),
            record.clone(),
            "t".into(),
            &crate::train::Silent,
            &warned,
            None,
        );
        assert_eq!(live.stop_here(10, &so_far), None, "stopped before anything took it over");
        // Another sweep records the run as its own (here: interrupted, about to train it).
        store.put(&RunRecord { status: crate::store::Status::Interrupted, ..record }).unwrap();
        live.on_progress(&so_far);
        let deadline = Instant::now() + Duration::from_secs(30);
        while live.stop_here(10, &so_far).is_none() {
            assert!(Instant::now() < deadline, "the trial never learnt it was taken over");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(live.stop_here(10, &so_far).as_deref(), Some(TAKEN_OVER));
        assert_eq!(store.get(1).unwrap().status, crate::store::Status::Interrupted);
    }

    /// A checkpoint past the trial's steps is not its own (a crafted or misplaced file): the
    /// trial starts from step 0, saying why, instead of replaying that many batches.
    #[test]
    fn a_checkpoint_past_the_trials_steps_is_reported_and_not_resumed() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoints = CheckpointDir::new(dir.path());
        let state = TrainState {
            step: 9000,
            curves: BTreeMap::new(),
            interval_loss: (0.0, 0),
            selected: None,
            train_seconds: 0.0,
            eval_seconds: 0.0,
            stage: Default::default(),
            params: vec![],
            optimizer: OptimState { updates: 9000, buffers: vec![] },
        };
        checkpoints.save("abc1", &state.to_bytes().unwrap()).unwrap();
        let quiet = Warnings::default();
        assert_eq!(load_checkpoint(&checkpoints, "abc1", 9000, &quiet).map(|s| s.step), Some(9000));
        assert!(quiet.0.lock().unwrap().is_empty());
        let warned = Warnings::default();
        assert!(load_checkpoint(&checkpoints, "abc1", 8000, &warned).is_none());
        let warnings = warned.0.lock().unwrap();
        assert!(warnings[0].contains("at step 9000, past the trial's 8000 steps"), "{warnings:?}");
    }
}
