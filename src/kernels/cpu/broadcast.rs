//! Broadcasting between batch-first tensors of different per-example rank.
//!
//! Per-example shapes broadcast like NumPy (aligned from the right), but the batch axis is
//! always axis 0: `[B, d]` against `[B, n, d]` must become `[B, 1, d]`, not `[1, B, d]`.

use candle_core::{Result, Tensor};

/// Inserts unit axes after the batch axis until both tensors have the same rank.
pub fn align(a: &Tensor, b: &Tensor) -> Result<(Tensor, Tensor)> {
    let (mut a, mut b) = (a.clone(), b.clone());
    while a.rank() < b.rank() {
        a = a.unsqueeze(1)?;
    }
    while b.rank() < a.rank() {
        b = b.unsqueeze(1)?;
    }
    Ok((a, b))
}

/// The per-example shape two operands broadcast to, or `None` if they are incompatible.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() { 1 } else { a[i - (rank - a.len())] };
        let db = if i < rank - b.len() { 1 } else { b[i - (rank - b.len())] };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_shapes_follow_numpy_rules() {
        assert_eq!(broadcast_shape(&[4], &[3, 4]), Some(vec![3, 4]));
        assert_eq!(broadcast_shape(&[], &[2, 2]), Some(vec![2, 2]));
        assert_eq!(broadcast_shape(&[3, 1], &[1, 5]), Some(vec![3, 5]));
        assert_eq!(broadcast_shape(&[3], &[4]), None);
    }

    #[test]
    fn align_inserts_axes_after_the_batch_axis() -> Result<()> {
        let dev = candle_core::Device::Cpu;
        let a = Tensor::zeros((2, 4), candle_core::DType::F32, &dev)?;
        let b = Tensor::zeros((2, 3, 4), candle_core::DType::F32, &dev)?;
        let (a, b) = align(&a, &b)?;
        assert_eq!(a.dims(), &[2, 1, 4]);
        assert_eq!(b.dims(), &[2, 3, 4]);
        Ok(())
    }
}
