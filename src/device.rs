//! Device selection: `cpu` (default) or `cuda[:N]`, the latter only in a build with the
//! `cuda` feature. Everything else in memctl is device-generic.

pub mod spread;
pub mod tuning;

use candle_core::Device;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceSpec {
    Cpu,
    Cuda(usize),
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// Parses `cpu`, `cuda` or `cuda:N`.
pub fn parse(s: &str) -> Option<DeviceSpec> {
    match s {
        "cpu" => Some(DeviceSpec::Cpu),
        "cuda" => Some(DeviceSpec::Cuda(0)),
        _ => s.strip_prefix("cuda:").and_then(|n| n.parse().ok()).map(DeviceSpec::Cuda),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error(
        "unknown device `{0}` (devices: cpu, cuda, cuda:N; a sweep also takes cuda:all or a list such as cuda:0,2)"
    )]
    Unknown(String),
    #[error(
        "`{0}` names several GPUs, which only a sweep spreads its trials over; give one device (cpu, cuda or cuda:N)"
    )]
    SeveralForOneTrial(String),
    #[error("`{list}` names cuda:{ordinal} twice")]
    Repeated { list: String, ordinal: usize },
    #[error("`{0}`: this machine has no GPU that CUDA sees")]
    NoGpu(String),
    #[error(
        "this memctl was built without CUDA support; rebuild with `cargo build --release --features cuda` \
         (needs NVIDIA's CUDA toolkit with nvcc) to use `{0}`"
    )]
    NoCudaSupport(String),
    #[error("cannot open `{device}`: {source}")]
    Open { device: String, source: candle_core::Error },
}

/// Opens the named device. A CUDA device is opened once per thread and handed out again
/// to later calls on that thread: its loaded kernels, cuBLAS handle and cached uploads serve
/// every trial the thread runs (trial threads are reused, see `pool`), and the thread's
/// stream is the one all its work goes to.
pub fn open(name: &str) -> Result<Device, DeviceError> {
    match parse(name) {
        None if name == "cuda:all" || name.starts_with("cuda:") && name.contains(',') => {
            Err(DeviceError::SeveralForOneTrial(name.to_string()))
        }
        None => Err(DeviceError::Unknown(name.to_string())),
        Some(DeviceSpec::Cpu) => Ok(Device::Cpu),
        Some(DeviceSpec::Cuda(ordinal)) => {
            thread_local! {
                static OPENED: std::cell::RefCell<Vec<(usize, Device)>> = const { std::cell::RefCell::new(vec![]) };
            }
            if let Some(d) = OPENED.with_borrow(|o| o.iter().find(|(n, _)| *n == ordinal).map(|(_, d)| d.clone())) {
                return Ok(d);
            }
            let device = open_cuda(name, ordinal)?;
            OPENED.with_borrow_mut(|o| o.push((ordinal, device.clone())));
            Ok(device)
        }
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(name: &str, ordinal: usize) -> Result<Device, DeviceError> {
    let open_error = |source| DeviceError::Open { device: name.to_string(), source };
    let device = Device::new_cuda(ordinal).map_err(open_error)?;
    // cudarc records two CUDA events per allocation to order uses across streams. memctl
    // runs each trial's work on its thread's own stream and shares no tensor between
    // trials, so the events only cost time (and cannot be recorded into a CUDA graph).
    // SAFETY: no tensor is used on a stream other than the one that allocated it.
    unsafe { device.as_cuda_device().map_err(open_error)?.disable_event_tracking() };
    // The changes to the vendored candle-core and the options, as their switches say
    // (`tuning`; before any launch).
    let on = crate::kernels::cuda::switches::on_cuda;
    candle_core::cuda::set_gemm_reduced_precision_f32(on(tuning::TF32));
    candle_core::cuda_backend::set_split_sums(on(tuning::SPLIT_SUMS));
    candle_core::cuda_backend::set_prebuilt_sass(on(tuning::PREBUILT_SASS));
    candle_core::backprop::set_lean_narrow_grads(on(tuning::NARROW_GRADS));
    candle_core::backprop::set_skip_untracked_grads(on(tuning::UNTRACKED_GRADS));
    Ok(device)
}

/// The device's default memory pool: every trial's stream allocates from it (cudarc allocates
/// stream-ordered, `cuMemAllocAsync`, where the device supports it, every GPU memctl runs on).
#[cfg(feature = "cuda")]
fn default_pool(
    ordinal: usize,
) -> Result<
    candle_core::cuda_backend::cudarc::driver::sys::CUmemoryPool,
    candle_core::cuda_backend::cudarc::driver::DriverError,
> {
    use candle_core::cuda_backend::cudarc::driver::result;
    result::init()?;
    // SAFETY: the device handle comes from `device::get`.
    unsafe { result::device::get_default_mem_pool(result::device::get(ordinal as i32)?) }
}

/// Bytes the device's default pool holds that no allocation uses: memory this process's next
/// allocations get without the driver, though the driver counts it as taken.
#[cfg(feature = "cuda")]
pub fn pool_idle_bytes(ordinal: usize) -> Option<u64> {
    use candle_core::cuda_backend::cudarc::driver::{result, sys};
    let pool = default_pool(ordinal).ok()?;
    let read = |attribute: sys::CUmemPool_attribute| {
        let mut value = 0u64;
        // SAFETY: a valid pool; both attributes are u64.
        unsafe { result::mem_pool::get_attribute(pool, attribute, (&raw mut value).cast()) }.ok().map(|()| value)
    };
    let reserved = read(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?;
    let used = read(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?;
    Some(reserved.saturating_sub(used))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(name: &str, _ordinal: usize) -> Result<Device, DeviceError> {
    Err(DeviceError::NoCudaSupport(name.to_string()))
}

/// The processor behind a device name, as its maker names it (`AMD EPYC 7B13`, `NVIDIA H100
/// 80GB HBM3`), for run records: the device name alone does not say which machine made a
/// figure. Empty when it cannot be read (not Linux; a CUDA device this build cannot open).
pub fn processor(name: &str) -> String {
    match parse(name) {
        Some(DeviceSpec::Cpu) => cpu_model(),
        Some(DeviceSpec::Cuda(ordinal)) => gpu_model(ordinal),
        None => String::new(),
    }
}

/// The first `model name` of /proc/cpuinfo.
fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info.lines().find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|(_, v)| v.trim()));
    model.unwrap_or_default().to_string()
}

/// The GPU's name from the driver, without creating a context (the trial's own thread opens
/// the device later).
#[cfg(feature = "cuda")]
fn gpu_model(ordinal: usize) -> String {
    use candle_core::cuda_backend::cudarc::driver::result;
    let name = || -> Result<String, result::DriverError> {
        result::init()?;
        result::device::get_name(result::device::get(ordinal as i32)?)
    };
    name().unwrap_or_default()
}

#[cfg(not(feature = "cuda"))]
fn gpu_model(_ordinal: usize) -> String {
    String::new()
}

/// What a device computed when tried: the largest difference from the CPU's result, and how
/// long the first run took (on a GPU, mostly loading its kernels).
#[derive(Debug, Clone, Copy)]
pub struct Tried {
    pub max_difference: f32,
    pub seconds: f64,
}

/// How this process loaded its CUDA kernel modules so far: `(from SASS, from PTX)`. A module
/// from PTX is compiled by the driver at its first load, or taken from the driver's cache
/// (`device::tuning::PREBUILT_SASS`). `(0, 0)` without CUDA.
pub fn kernel_module_loads() -> (usize, usize) {
    #[cfg(feature = "cuda")]
    return candle_core::cuda_backend::module_loads();
    #[cfg(not(feature = "cuda"))]
    (0, 0)
}

/// Runs a small computation on `device` (a 256 × 256 matrix product, `tanh`, row sums) and
/// compares it with the CPU's. Opening a device proves little: a CUDA device whose driver is
/// older than the toolkit that built the kernels opens, then fails at the first launch. This
/// launches.
pub fn try_device(device: &Device) -> candle_core::Result<Tried> {
    let compute = |d: &Device| -> candle_core::Result<Vec<f32>> {
        let a = candle_core::Tensor::arange(0f32, 65_536., d)?.reshape((256, 256))?.affine(1e-4, -3.0)?.sin()?;
        let product = a.matmul(&a.t()?)?;
        (product * 0.01)?.tanh()?.sum(1)?.to_device(&Device::Cpu)?.to_vec1()
    };
    let started = std::time::Instant::now();
    let here = compute(device)?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu = compute(&Device::Cpu)?;
    let max_difference = here.iter().zip(&cpu).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    Ok(Tried { max_difference, seconds })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn the_cpu_is_named_by_its_model() {
        let name = processor("cpu");
        assert!(!name.is_empty() && !name.contains(':'), "{name:?}");
        assert_eq!(processor("tpu"), "");
    }

    #[test]
    fn the_cpu_agrees_with_itself_when_tried() {
        let tried = try_device(&Device::Cpu).unwrap();
        assert_eq!(tried.max_difference, 0.0);
    }

    #[test]
    fn parses_device_names() {
        assert_eq!(parse("cpu"), Some(DeviceSpec::Cpu));
        assert_eq!(parse("cuda"), Some(DeviceSpec::Cuda(0)));
        assert_eq!(parse("cuda:1"), Some(DeviceSpec::Cuda(1)));
        assert_eq!(parse("gpu"), None);
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_says_how_to_get_it() {
        let err = open("cuda").unwrap_err().to_string();
        assert!(err.contains("--features cuda"), "{err}");
    }
}
