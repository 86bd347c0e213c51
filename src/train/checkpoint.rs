//! A trial's training state, to stop and resume it: the step reached, the parameters, the
//! optimiser's state, and the curves and timings so far ([`TrainState`]), written as bytes
//! ([`TrainState::to_bytes`]) for the store to keep.
//!
//! What is *not* saved is the data stream's random state: a resumed trial re-creates its
//! data from the trial's seed and draws (and discards) the batches of the steps already run,
//! so that it trains on exactly the batches an uninterrupted run would have. Together with the
//! exact parameters and optimiser buffers, a resumed run ends where an uninterrupted one ends
//! (for the same thread count, which fixes the order of the sums: a sweep resumes a trial on
//! the thread count it started with, where the machine has that many cores).
//!
//! Layout: `memctl-checkpoint 3\n`, a u32 (little-endian) length and that many bytes of JSON
//! header (step, where in it ([`Stage`]), curves, the selected evaluation, timings, and each
//! tensor's place, dtype and shape), then every tensor's elements, little-endian, in header
//! order, then the CRC-32 of everything before it (u32, little-endian). A flipped bit in the
//! tensors would otherwise resume training from wrong weights without a word; with the
//! checksum the damaged checkpoint is reported and the trial starts over. Versions 2 (no stage:
//! after a whole step) and 1 (no checksum) still read.

use std::collections::BTreeMap;
use std::time::Duration;

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use super::optim::OptimState;
use super::{Converged, Selected};

const MAGIC: &[u8] = b"memctl-checkpoint 3\n";
/// Checkpoints written before the stage: always taken after a whole step. (An older memctl
/// takes a version 3 checkpoint for none and starts the trial over, rather than resume from
/// it without knowing where in the step it stopped.)
const MAGIC_V2: &[u8] = b"memctl-checkpoint 2\n";
/// Checkpoints written before the checksum.
const MAGIC_V1: &[u8] = b"memctl-checkpoint 1\n";

/// Where a trial's training stands after `step` steps.
#[derive(Clone, Debug)]
pub struct TrainState {
    pub step: usize,
    pub curves: BTreeMap<String, Vec<(u64, f64)>>,
    /// Sum and count of the training losses since the last evaluation.
    pub interval_loss: (f64, usize),
    /// The evaluation `select` chose so far.
    pub selected: Option<Selected>,
    pub train_seconds: f64,
    pub eval_seconds: f64,
    /// Where in the step it was taken.
    pub stage: Stage,
    /// The parameters, in the graph's order.
    pub params: Vec<Tensor>,
    pub optimizer: OptimState,
}

/// Where in its step a checkpoint was taken: a resumed run carries on from there, and ends as
/// the run that was never stopped ends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum Stage {
    /// After the step and all that was due after it: a resume takes the next step.
    #[default]
    Stepped,
    /// Stopped in the evaluation due after the step: a resume evaluates first.
    Evaluating,
    /// Training had ended (why, and when `stop_when` was met) and the trial was stopped in its
    /// test evaluation: a resume runs that alone.
    Testing { stop_reason: String, converged: Option<Converged> },
}

/// Where a trial's checkpoints come from and go: the store, for a sweep.
pub trait Checkpoints: Sync {
    /// The state to resume from (this trial's), its tensors on `device`, if any; an error when
    /// there is one that `device` cannot take (out of memory).
    fn resume(&self, device: &Device) -> candle_core::Result<Option<TrainState>>;
    /// Training time between checkpoints (`None`: only at a clean stop).
    fn every(&self) -> Option<Duration>;
    /// Keeps `state`; a failure is reported and training goes on.
    fn save(&self, state: &TrainState);
}

/// No checkpoints: train from step 0, save nothing.
pub struct NoCheckpoints;

impl Checkpoints for NoCheckpoints {
    fn resume(&self, _: &Device) -> candle_core::Result<Option<TrainState>> {
        Ok(None)
    }
    fn every(&self) -> Option<Duration> {
        None
    }
    fn save(&self, _: &TrainState) {}
}

/// Why a checkpoint cannot be read; the trial then starts over from step 0.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("not a memctl checkpoint (or of another version)")]
    NotACheckpoint,
    #[error("truncated")]
    Truncated,
    #[error("its checksum does not match: the file is damaged or truncated")]
    ChecksumMismatch,
    #[error("truncated header")]
    TruncatedHeader,
    #[error("header: {0}")]
    HeaderJson(serde_json::Error),
    #[error("truncated tensor data")]
    TruncatedTensor,
    #[error("tensor of dtype {0}")]
    Dtype(String),
    /// Placing a tensor on the device failed.
    #[error("{0}")]
    Tensor(#[from] candle_core::Error),
    #[error("{0} bytes after the last tensor")]
    TrailingBytes(usize),
}

#[derive(Serialize, Deserialize)]
struct Header {
    step: usize,
    curves: BTreeMap<String, Vec<(u64, f64)>>,
    interval_loss: (f64, usize),
    /// Absent in checkpoints written before `select` existed.
    #[serde(default)]
    selected: Option<Selected>,
    train_seconds: f64,
    eval_seconds: f64,
    /// Absent in version 2 and 1 checkpoints.
    #[serde(default)]
    stage: Stage,
    optimizer_updates: u64,
    /// The parameters' tensors, then each optimiser buffer's (absent ones skipped).
    params: Vec<TensorInfo>,
    buffers: Vec<Vec<Option<TensorInfo>>>,
}

#[derive(Serialize, Deserialize)]
struct TensorInfo {
    dtype: String,
    shape: Vec<usize>,
}

impl TrainState {
    pub fn to_bytes(&self) -> candle_core::Result<Vec<u8>> {
        let info = |t: &Tensor| TensorInfo { dtype: format!("{:?}", t.dtype()), shape: t.dims().to_vec() };
        let header = Header {
            step: self.step,
            curves: self.curves.clone(),
            interval_loss: self.interval_loss,
            selected: self.selected.clone(),
            train_seconds: self.train_seconds,
            eval_seconds: self.eval_seconds,
            stage: self.stage.clone(),
            optimizer_updates: self.optimizer.updates,
            params: self.params.iter().map(info).collect(),
            buffers: self.optimizer.buffers.iter().map(|b| b.iter().map(|t| t.as_ref().map(info)).collect()).collect(),
        };
        let json = serde_json::to_vec(&header).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        let elements: usize = self.tensors().map(Tensor::elem_count).sum();
        let mut out = Vec::with_capacity(MAGIC.len() + 4 + json.len() + 8 * elements);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(json.len() as u32).to_le_bytes());
        out.extend_from_slice(&json);
        for t in self.tensors() {
            // A packed trial's tensors are views of the pack's stacks: only the view travels.
            let t = if t.device().is_cpu() { t.clone() } else { t.force_contiguous()? };
            let t = t.to_device(&Device::Cpu)?.flatten_all()?;
            match t.dtype() {
                DType::F32 => t.to_vec1::<f32>()?.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
                DType::F64 => t.to_vec1::<f64>()?.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
                other => candle_core::bail!("checkpoints hold f32 and f64 tensors, not {other:?}"),
            }
        }
        let checksum = crc32fast::hash(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        Ok(out)
    }

    /// Reads a checkpoint, placing its tensors on `device`.
    pub fn from_bytes(bytes: &[u8], device: &Device) -> Result<TrainState, CheckpointError> {
        let rest = if let Some(rest) = bytes.strip_prefix(MAGIC).or_else(|| bytes.strip_prefix(MAGIC_V2)) {
            let (body, sum) = rest.split_at_checked(rest.len().saturating_sub(4)).ok_or(CheckpointError::Truncated)?;
            let sum = u32::from_le_bytes(sum.try_into().map_err(|_| CheckpointError::Truncated)?);
            if crc32fast::hash(&bytes[..bytes.len() - 4]) != sum {
                return Err(CheckpointError::ChecksumMismatch);
            }
            body
        } else {
            bytes.strip_prefix(MAGIC_V1).ok_or(CheckpointError::NotACheckpoint)?
        };
        let (len, rest) = rest.split_at_checked(4).ok_or(CheckpointError::TruncatedHeader)?;
        let len = u32::from_le_bytes(len.try_into().map_err(|_| CheckpointError::TruncatedHeader)?) as usize;
        let (json, mut data) = rest.split_at_checked(len).ok_or(CheckpointError::TruncatedHeader)?;
        let header: Header = serde_json::from_slice(json).map_err(CheckpointError::HeaderJson)?;
        let mut read = |info: &TensorInfo| -> Result<Tensor, CheckpointError> {
            let n: usize = info.shape.iter().product();
            let t = match info.dtype.as_str() {
                "F32" => {
                    let (raw, tail) = data.split_at_checked(4 * n).ok_or(CheckpointError::TruncatedTensor)?;
                    data = tail;
                    let v: Vec<f32> =
                        raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                    Tensor::from_vec(v, info.shape.clone(), &Device::Cpu)
                }
                "F64" => {
                    let (raw, tail) = data.split_at_checked(8 * n).ok_or(CheckpointError::TruncatedTensor)?;
                    data = tail;
                    let v: Vec<f64> = raw
                        .chunks_exact(8)
                        .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                        .collect();
                    Tensor::from_vec(v, info.shape.clone(), &Device::Cpu)
                }
                other => return Err(CheckpointError::Dtype(other.to_string())),
            };
            Ok(t.and_then(|t| t.to_device(device))?)
        };
        let params = header.params.iter().map(&mut read).collect::<Result<Vec<_>, _>>()?;
        let mut buffers = vec![];
        for b in &header.buffers {
            buffers.push(b.iter().map(|i| i.as_ref().map(&mut read).transpose()).collect::<Result<Vec<_>, _>>()?);
        }
        if !data.is_empty() {
            return Err(CheckpointError::TrailingBytes(data.len()));
        }
        Ok(TrainState {
            step: header.step,
            curves: header.curves,
            interval_loss: header.interval_loss,
            selected: header.selected,
            train_seconds: header.train_seconds,
            eval_seconds: header.eval_seconds,
            stage: header.stage,
            params,
            optimizer: OptimState { updates: header.optimizer_updates, buffers },
        })
    }

    fn tensors(&self) -> impl Iterator<Item = &Tensor> {
        self.params.iter().chain(self.optimizer.buffers.iter().flatten().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_round_trips_exactly_and_damage_is_an_error() {
        let dev = Device::Cpu;
        let p = Tensor::new(&[[1.5f32, -2.25], [f32::MIN_POSITIVE, 3.0]], &dev).unwrap();
        let q = Tensor::new(&[0.1f64, 0.2, 0.3], &dev).unwrap();
        let state = TrainState {
            step: 42,
            curves: BTreeMap::from([("val_loss".to_string(), vec![(20, 1.5), (40, 1.25)])]),
            interval_loss: (0.75, 2),
            selected: Some(Selected { step: 40, value: 0.5, metrics: BTreeMap::from([("accuracy".into(), 0.25)]) }),
            train_seconds: 3.5,
            eval_seconds: 0.5,
            stage: Stage::Testing {
                stop_reason: "stop_when".into(),
                converged: Some(Converged { step: 40, epoch: None }),
            },
            params: vec![p.clone(), q.clone()],
            optimizer: OptimState { updates: 42, buffers: vec![vec![Some(p.clone()), None]] },
        };
        let bytes = state.to_bytes().unwrap();
        let back = TrainState::from_bytes(&bytes, &dev).unwrap();
        assert_eq!((back.step, back.interval_loss, back.optimizer.updates), (42, (0.75, 2), 42));
        assert_eq!(back.curves, state.curves);
        assert_eq!(back.selected, state.selected);
        assert_eq!(back.stage, state.stage);
        assert_eq!(back.params[0].to_vec2::<f32>().unwrap(), p.to_vec2::<f32>().unwrap());
        assert_eq!(back.params[1].to_vec1::<f64>().unwrap(), q.to_vec1::<f64>().unwrap());
        assert!(back.optimizer.buffers[0][1].is_none());
        assert!(matches!(
            TrainState::from_bytes(&bytes[..bytes.len() - 1], &dev),
            Err(CheckpointError::ChecksumMismatch)
        ));
        assert!(matches!(TrainState::from_bytes(b"something else", &dev), Err(CheckpointError::NotACheckpoint)));
        // One flipped bit in a parameter's elements (the last tensor bytes before the checksum).
        let mut flipped = bytes.clone();
        let at = flipped.len() - 6;
        flipped[at] ^= 0x10;
        assert!(matches!(TrainState::from_bytes(&flipped, &dev), Err(CheckpointError::ChecksumMismatch)));
        // A version 2 checkpoint (no stage in its header) reads as taken after a whole step.
        let v2 = {
            let len = u32::from_le_bytes(bytes[MAGIC.len()..MAGIC.len() + 4].try_into().unwrap()) as usize;
            let json = &bytes[MAGIC.len() + 4..MAGIC.len() + 4 + len];
            let mut header: serde_json::Value = serde_json::from_slice(json).unwrap();
            assert!(header.as_object_mut().unwrap().remove("stage").is_some());
            let json = serde_json::to_vec(&header).unwrap();
            let mut v2 = MAGIC_V2.to_vec();
            v2.extend_from_slice(&(json.len() as u32).to_le_bytes());
            v2.extend_from_slice(&json);
            v2.extend_from_slice(&bytes[MAGIC.len() + 4 + len..bytes.len() - 4]);
            let checksum = crc32fast::hash(&v2);
            v2.extend_from_slice(&checksum.to_le_bytes());
            v2
        };
        let back_v2 = TrainState::from_bytes(&v2, &dev).unwrap();
        assert_eq!((back_v2.step, back_v2.stage), (42, Stage::Stepped));
        assert_eq!(back_v2.params[1].to_vec1::<f64>().unwrap(), q.to_vec1::<f64>().unwrap());
        // A checkpoint written before the checksum (version 1) still reads.
        let mut v1 = MAGIC_V1.to_vec();
        v1.extend_from_slice(&bytes[MAGIC.len()..bytes.len() - 4]);
        assert_eq!(TrainState::from_bytes(&v1, &dev).unwrap().step, 42);
        assert!(TrainState::from_bytes(&v1[..v1.len() - 1], &dev).unwrap_err().to_string().contains("truncated"));
    }

    /// A resumed run's curves must equal an uninterrupted run's bit for bit, so every f64 in
    /// the header (curve points, the interval's partial loss sum) must read back exactly.
    /// serde_json's default float parser is off by an ulp for some values; this found them.
    #[test]
    fn header_floats_read_back_bit_for_bit() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let values: Vec<f64> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Losses and their sums: positive, spread over many magnitudes.
                (x >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((x % 7) as i32 - 2)
            })
            .collect();
        let state = TrainState {
            step: 1,
            curves: BTreeMap::from([("train_loss".to_string(), values.iter().map(|&v| (1, v)).collect())]),
            interval_loss: (values[0], 1),
            selected: None,
            train_seconds: 0.0,
            eval_seconds: 0.0,
            stage: Stage::Stepped,
            params: vec![],
            optimizer: OptimState { updates: 0, buffers: vec![] },
        };
        let back = TrainState::from_bytes(&state.to_bytes().unwrap(), &Device::Cpu).unwrap();
        let off =
            back.curves["train_loss"].iter().zip(&values).filter(|((_, b), v)| b.to_bits() != v.to_bits()).count();
        assert_eq!(off, 0, "{off} of {} values read back differently", values.len());
    }
}
