//! Several GPUs for one sweep: `--device cuda:all` (every GPU this process sees) or a list such
//! as `cuda:0,2`. The sweep places each of its packs on one of them by free memory
//! (`sweep::placement`); a pack trains on one device, as it would alone.

use super::{DeviceError, DeviceSpec};

/// The GPUs a `--device` value names: `Some` for `cuda:all` or a list, `None` for one device
/// (`cpu`, `cuda`, `cuda:N`, which [`super::parse`] reads).
pub fn parse(name: &str) -> Result<Option<Vec<DeviceSpec>>, DeviceError> {
    let Some(rest) = name.strip_prefix("cuda:") else { return Ok(None) };
    if rest == "all" {
        return match gpu_count(name)? {
            0 => Err(DeviceError::NoGpu(name.to_string())),
            n => Ok(Some((0..n).map(DeviceSpec::Cuda).collect())),
        };
    }
    if !rest.contains(',') {
        return Ok(None);
    }
    let mut gpus = vec![];
    for part in rest.split(',') {
        let Ok(ordinal) = part.trim().parse::<usize>() else { return Err(DeviceError::Unknown(name.to_string())) };
        if gpus.contains(&DeviceSpec::Cuda(ordinal)) {
            return Err(DeviceError::Repeated { list: name.to_string(), ordinal });
        }
        gpus.push(DeviceSpec::Cuda(ordinal));
    }
    Ok(Some(gpus))
}

/// How many GPUs this process sees (`CUDA_VISIBLE_DEVICES` applies).
#[cfg(feature = "cuda")]
fn gpu_count(name: &str) -> Result<usize, DeviceError> {
    use candle_core::cuda_backend::cudarc::driver::CudaContext;
    CudaContext::device_count()
        .map(|n| n.max(0) as usize)
        .map_err(|e| DeviceError::Open { device: name.to_string(), source: candle_core::Error::wrap(e) })
}

#[cfg(not(feature = "cuda"))]
fn gpu_count(name: &str) -> Result<usize, DeviceError> {
    Err(DeviceError::NoCudaSupport(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_names_its_gpus_in_order_and_one_device_is_not_a_list() {
        let gpus = parse("cuda:2,0").unwrap().unwrap();
        assert_eq!(gpus, [DeviceSpec::Cuda(2), DeviceSpec::Cuda(0)]);
        for one in ["cpu", "cuda", "cuda:1"] {
            assert!(parse(one).unwrap().is_none(), "{one}");
        }
    }

    #[test]
    fn a_list_with_a_gpu_twice_or_a_word_in_it_is_refused() {
        assert!(matches!(parse("cuda:0,0"), Err(DeviceError::Repeated { ordinal: 0, .. })));
        assert!(matches!(parse("cuda:0,x"), Err(DeviceError::Unknown(_))));
        assert!(matches!(parse("cuda:0,"), Err(DeviceError::Unknown(_))));
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn every_gpu_needs_a_cuda_build() {
        assert!(matches!(parse("cuda:all"), Err(DeviceError::NoCudaSupport(_))));
    }
}
