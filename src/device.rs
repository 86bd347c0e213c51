//! Device selection: `cpu` (default) or `cuda[:N]`, the latter only in a build with the
//! `cuda` feature. Everything else in memctl is device-generic.

use candle_core::Device;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    Cpu,
    Cuda(usize),
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
    #[error("unknown device `{0}` (devices: cpu, cuda, cuda:N)")]
    Unknown(String),
    #[error(
        "this memctl was built without CUDA support; rebuild with `cargo build --release --features cuda` \
         (needs NVIDIA's CUDA toolkit with nvcc) to use `{0}`"
    )]
    NoCudaSupport(String),
    #[error("cannot open `{device}`: {source}")]
    Open { device: String, source: candle_core::Error },
}

/// Opens the named device.
pub fn open(name: &str) -> Result<Device, DeviceError> {
    match parse(name) {
        None => Err(DeviceError::Unknown(name.to_string())),
        Some(DeviceSpec::Cpu) => Ok(Device::Cpu),
        Some(DeviceSpec::Cuda(ordinal)) => open_cuda(name, ordinal),
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(name: &str, ordinal: usize) -> Result<Device, DeviceError> {
    Device::new_cuda(ordinal).map_err(|source| DeviceError::Open { device: name.to_string(), source })
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(name: &str, _ordinal: usize) -> Result<Device, DeviceError> {
    Err(DeviceError::NoCudaSupport(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
