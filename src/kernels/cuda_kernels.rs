//! Launching memctl's own CUDA kernels (`src/kernels/cuda/*.cu`, built to PTX by `build.rs`
//! with the toolkit's `nvcc`, loaded by candle's device on first use).

use candle_core::cuda_backend::WrapErr;
use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::{CudaStorage, Layout, Result};

const LSTM_CELL_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/lstm_cell.ptx"));

/// Runs `kernel` of `lstm_cell.cu` on its f32 operands (contiguous, as laid out), one thread
/// per `(example, unit)`, into a new buffer of `batch · width` elements.
pub fn lstm_cell(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    batch: usize,
    hidden: usize,
    width: usize,
) -> Result<CudaStorage> {
    let Some((first, _)) = operands.first() else { candle_core::bail!("{kernel}: no operands") };
    let dev = first.device.clone();
    let views = operands
        .iter()
        .map(|(s, l)| {
            let start = l.start_offset();
            Ok(s.as_cuda_slice::<f32>()?.slice(start..start + l.shape().elem_count()))
        })
        .collect::<Result<Vec<_>>>()?;
    // The kernels index with C ints: the thread count must fit one.
    let (Ok(threads), Ok(b), Ok(h)) = (i32::try_from(batch * hidden), i32::try_from(batch), i32::try_from(hidden))
    else {
        candle_core::bail!("{kernel}: {batch} × {hidden} elements are more than the kernel indexes")
    };
    // SAFETY: the kernel writes every element of the output.
    let out = unsafe { dev.alloc::<f32>(batch * width)? };
    if threads == 0 {
        return Ok(CudaStorage::wrap_cuda_slice(out, dev));
    }
    let func = dev.get_or_load_custom_func(kernel, "memctl_lstm_cell", LSTM_CELL_PTX)?;
    let mut builder = func.builder();
    for v in &views {
        builder.arg(v);
    }
    builder.arg(&out);
    builder.arg(&b);
    builder.arg(&h);
    // SAFETY: lstm_cell.cu's kernels take their operands, the output, batch and hidden, in
    // this order, and guard the threads past batch · hidden.
    unsafe { builder.launch(LaunchConfig::for_num_elems(threads as u32)) }.w()?;
    Ok(CudaStorage::wrap_cuda_slice(out, dev))
}
