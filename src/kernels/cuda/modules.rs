//! What every launch of memctl's own CUDA kernels shares: the kernel modules (every
//! `src/kernels/**/*.cu`, built to PTX and SASS by `build.rs` with the toolkit's `nvcc` and
//! `ptxas`, loaded by candle's device on first use) and [`run`]. Each fused op launches its
//! own kernels (its `cuda` module) with its own launch shape; nothing here knows a kernel.

use candle_core::cuda_backend::cudarc::driver::{CudaView, LaunchArgs, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaDevice, CudaFunc, WrapErr};
use candle_core::{CudaStorage, Layout, Result};

use super::launch_shape::LaunchShape;

/// One of memctl's kernel modules: its PTX, and its SASS (a cubin `build.rs` compiles from the
/// PTX for the card it targets), which candle's device loads instead where memctl asks
/// (`device::tuning::PREBUILT_SASS`) and the card takes it.
pub struct Module {
    name: &'static str,
    ptx: &'static str,
    sass: &'static [u8],
}

impl Module {
    /// `kernel` of this module on `dev`, the module loaded at its first use.
    pub(super) fn function(&self, dev: &CudaDevice, kernel: &str) -> Result<CudaFunc> {
        dev.get_or_load_custom_func_with_sass(kernel, self.name, self.ptx, Some(self.sass))
    }
}

macro_rules! module {
    ($cst:ident, $file:literal) => {
        pub const $cst: Module = Module {
            name: concat!("memctl_", $file),
            ptx: include_str!(concat!(env!("OUT_DIR"), "/", $file, ".ptx")),
            sass: include_bytes!(concat!(env!("OUT_DIR"), "/", $file, ".cubin")),
        };
    };
}

// `module!(NAME, "file")` for every `src/kernels/**/*.cu`, written by build.rs.
include!(concat!(env!("OUT_DIR"), "/cuda_modules.rs"));

/// cudarc's launch configuration of a [`LaunchShape`].
pub(super) fn launch_config(shape: LaunchShape) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (shape.blocks, 1, 1),
        block_dim: (shape.threads, 1, 1),
        shared_mem_bytes: shape.shared_bytes,
    }
}

/// An operand's f32 elements as laid out: from its layout's start offset, contiguous.
pub(super) fn f32_view<'a>(storage: &'a CudaStorage, layout: &Layout) -> Result<CudaView<'a, f32>> {
    let start = layout.start_offset();
    Ok(storage.as_cuda_slice::<f32>()?.slice(start..start + layout.shape().elem_count()))
}

/// `func`'s launch arguments, begun with the operands' `views` in order.
pub(super) fn args_with<'a>(func: &'a CudaFunc, views: &'a [CudaView<'a, f32>]) -> LaunchArgs<'a> {
    let mut builder = func.builder();
    for v in views {
        builder.arg(v);
    }
    builder
}

/// Pushes a kernel's scalar arguments after its buffers: the ints, then the floats.
pub(super) fn push_scalars<'a>(builder: &mut LaunchArgs<'a>, ints: &'a [i32], floats: &'a [f32]) {
    for i in ints {
        builder.arg(i);
    }
    for f in floats {
        builder.arg(f);
    }
}

/// Launches `kernel` of `module` with the operands' f32 elements (each from its layout's start
/// offset, contiguous), a new output buffer of `len` elements, then `ints` and `floats`.
///
/// # Safety
/// The kernel must take exactly these arguments in this order, and write every element of the
/// output (it is not initialised) without reading or writing past any buffer.
pub(super) unsafe fn run(
    module: &Module,
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    len: usize,
    config: LaunchConfig,
    ints: &[i32],
    floats: &[f32],
) -> Result<CudaStorage> {
    let Some((first, _)) = operands.first() else { candle_core::bail!("{kernel}: no operands") };
    let dev = first.device.clone();
    let views = operands.iter().map(|(s, l)| f32_view(s, l)).collect::<Result<Vec<_>>>()?;
    // SAFETY: every element is written by the kernel (the caller's contract).
    let out = unsafe { dev.alloc::<f32>(len)? };
    if len == 0 {
        return Ok(CudaStorage::wrap_cuda_slice(out, dev));
    }
    let func = module.function(&dev, kernel)?;
    let mut builder = args_with(&func, &views);
    builder.arg(&out);
    push_scalars(&mut builder, ints, floats);
    // SAFETY: the argument list is the kernel's (the caller's contract).
    unsafe { builder.launch(config) }.w()?;
    Ok(CudaStorage::wrap_cuda_slice(out, dev))
}
