//! The patched candle backward (vendor/README.md): a tensor's first gradient is stored as it
//! is, not added into a fresh tensor of zeros, and later ones are still summed into it; a
//! slice's gradient goes back into place; a broadcast to the same shape passes its gradient
//! through; an operand that needs no gradient gets none.

use std::sync::{Arc, Mutex};

use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Result, Shape, Tensor, TensorId, Var};

/// `y = x`, whose backward returns a fresh tensor and remembers its id.
struct RememberedGrad(Arc<Mutex<Option<TensorId>>>);

impl CustomOp1 for RememberedGrad {
    fn name(&self) -> &'static str {
        "remembered-grad"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let CpuStorage::F64(v) = storage else { candle_core::bail!("f64 only") };
        let (start, end) = layout.contiguous_offsets().expect("contiguous input");
        Ok((CpuStorage::F64(v[start..end].to_vec()), layout.shape().clone()))
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let g = (grad * 1.0)?;
        *self.0.lock().unwrap() = Some(g.id());
        Ok(Some(g))
    }
}

#[test]
fn a_tensor_s_only_gradient_is_stored_as_it_is() {
    let x = Var::from_slice(&[1.0f64, 2.0, 3.0], 3, &Device::Cpu).unwrap();
    let remembered = Arc::new(Mutex::new(None));
    let y = x.as_tensor().apply_op1(RememberedGrad(remembered.clone())).unwrap();
    let grads = y.sum_all().unwrap().backward().unwrap();
    let stored = grads.get(x.as_tensor()).expect("x has a gradient");
    let returned = remembered.lock().unwrap().expect("the op's backward ran");
    // Unpatched candle stores `zeros + g`, a new tensor.
    assert_eq!(stored.id(), returned, "the gradient was copied, not stored as it is");
    assert_eq!(stored.to_vec1::<f64>().unwrap(), [1.0, 1.0, 1.0]);
}

#[test]
fn a_broadcast_to_the_same_shape_passes_its_gradient_through_as_it_is() {
    let x = Var::from_slice(&[1.0f64, 2.0, 3.0, 4.0], (2, 2), &Device::Cpu).unwrap();
    let remembered = Arc::new(Mutex::new(None));
    let y = x.as_tensor().broadcast_as((2, 2)).unwrap().apply_op1(RememberedGrad(remembered.clone())).unwrap();
    let grads = y.sum_all().unwrap().backward().unwrap();
    let stored = grads.get(x.as_tensor()).expect("x has a gradient");
    let returned = remembered.lock().unwrap().expect("the op's backward ran");
    // Unpatched candle sums the gradient over no axis: a reduction that copies it.
    assert_eq!(stored.id(), returned, "the gradient was summed over no axis, not passed through");
    assert_eq!(stored.to_vec2::<f64>().unwrap(), [[1.0, 1.0], [1.0, 1.0]]);
    // A real broadcast still sums over the axes it spread.
    let ones = Var::from_slice(&[1.0f64, 2.0], (1, 2), &Device::Cpu).unwrap();
    let grads = ones.as_tensor().broadcast_as((3, 2)).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(grads.get(ones.as_tensor()).unwrap().to_vec2::<f64>().unwrap(), [[3.0, 3.0]]);
}

#[test]
fn gradients_reaching_a_tensor_several_times_are_summed_with_their_signs() {
    let dev = Device::Cpu;
    let a = Var::from_slice(&[1.0f64, 2.0], 2, &dev).unwrap();
    let b = Var::from_slice(&[4.0f64, 5.0], 2, &dev).unwrap();
    let c = Var::from_slice(&[3.0f64, 7.0], 2, &dev).unwrap();
    let (a, b, c) = (a.as_tensor(), b.as_tensor(), c.as_tensor());
    // b is reached as the right-hand side of a subtraction and of a division (negated), in a
    // product and in a sum, in whatever order the backward meets them: d/db = -1 - c/b² + a + 1.
    let y = ((((c - b).unwrap() + (c / b).unwrap()).unwrap() + (a * b).unwrap()).unwrap() + b).unwrap();
    let grads = y.sum_all().unwrap().backward().unwrap();
    let gb = grads.get(b).unwrap().to_vec1::<f64>().unwrap();
    let expected: Vec<f64> = [(1.0, 4.0, 3.0), (2.0, 5.0, 7.0)].iter().map(|&(a, b, c)| -c / (b * b) + a).collect();
    for (g, e) in gb.iter().zip(&expected) {
        assert!((g - e).abs() < 1e-12, "d/db {gb:?}, expected {expected:?}");
    }
    let gc = grads.get(c).unwrap().to_vec1::<f64>().unwrap();
    assert_eq!(gc, [1.0 + 1.0 / 4.0, 1.0 + 1.0 / 5.0]);
}

#[test]
fn a_transposed_first_gradient_is_stored_contiguous() {
    let x = Var::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], (2, 3), &Device::Cpu).unwrap();
    let w = Tensor::arange(0.0f64, 6.0, &Device::Cpu).unwrap().reshape((3, 2)).unwrap();
    let y = x.as_tensor().t().unwrap().mul(&w).unwrap();
    let grads = y.sum_all().unwrap().backward().unwrap();
    let g = grads.get(x.as_tensor()).unwrap();
    // Unpatched candle's `zeros + g` was contiguous; memctl's kernels read gradients in place.
    assert!(g.is_contiguous(), "a transposed view was stored");
    assert_eq!(g.to_vec2::<f64>().unwrap(), [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]);
}

/// The vendored `backward_keeping_variable_layouts` leaves a variable's transposed first
/// gradient as a view (memctl sums such views in place), and only for that backward.
#[test]
fn a_backward_keeping_variable_layouts_stores_a_transposed_view_for_a_variable_only() {
    let x = Var::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], (2, 3), &Device::Cpu).unwrap();
    let w = Tensor::arange(0.0f64, 6.0, &Device::Cpu).unwrap().reshape((3, 2)).unwrap();
    let loss = || x.as_tensor().t().unwrap().mul(&w).unwrap().sum_all().unwrap();
    let g = loss().backward_keeping_variable_layouts().unwrap().get(x.as_tensor()).unwrap().clone();
    assert!(!g.is_contiguous(), "the view was copied");
    assert_eq!(g.to_vec2::<f64>().unwrap(), [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]);
    // A later plain backward on the same thread makes it contiguous again.
    assert!(loss().backward().unwrap().get(x.as_tensor()).unwrap().is_contiguous());
}

/// The vendored slice backward (a fill and a copy on the CPU) gives each slice's gradient in
/// place and zeros elsewhere, along any axis, summed over several slices.
#[test]
fn slices_pass_their_gradients_back_into_place() {
    let x = Var::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], (2, 3), &Device::Cpu).unwrap();
    let t = x.as_tensor();
    // Columns 1..3 times 10, row 0 times 100, column 0 again times 1000.
    let loss = t.narrow(1, 1, 2).unwrap().sum_all().unwrap().affine(10.0, 0.0).unwrap();
    let loss = loss.add(&t.narrow(0, 0, 1).unwrap().sum_all().unwrap().affine(100.0, 0.0).unwrap()).unwrap();
    let loss = loss.add(&t.narrow(1, 0, 1).unwrap().sum_all().unwrap().affine(1000.0, 0.0).unwrap()).unwrap();
    let g = loss.backward().unwrap().get(t).unwrap().to_vec2::<f64>().unwrap();
    assert_eq!(g, [[1100.0, 110.0, 110.0], [1000.0, 10.0, 10.0]]);
}

/// Slices of an intermediate tensor along one axis: pieces that cut it whole (concatenated),
/// and overlapping ones beside a use of the whole (each copied into place, then added), give
/// the gradient that placing each piece's gradient in zeros and adding them all gives.
#[test]
fn slices_that_cut_a_tensor_whole_or_overlap_give_its_gradient() -> Result<()> {
    let dev = Device::Cpu;
    let x = Var::from_tensor(&Tensor::randn(0f64, 1.0, (3, 5), &dev)?)?;
    let y = (x.as_tensor() * 2.0)?;
    let weight = |cols: usize| Tensor::randn(0f64, 1.0, (3, cols), &dev);
    let (a, b, c, e) = (weight(2)?, weight(3)?, weight(2)?, weight(5)?);
    let part = |w: &Tensor, start: usize| -> Result<Tensor> { y.narrow(1, start, w.dim(1)?)?.mul(w)?.sum_all() };
    let padded = |w: &Tensor, start: usize| -> Result<Tensor> {
        let left = Tensor::zeros((3, start), DType::F64, &dev)?;
        let right = Tensor::zeros((3, 5 - start - w.dim(1)?), DType::F64, &dev)?;
        Tensor::cat(&[&left, w, &right], 1)
    };
    // Columns 0..2 and 2..5: the pieces cut y whole.
    let tiled = (part(&a, 0)? + part(&b, 2)?)?.backward()?;
    let expected = ((padded(&a, 0)? + padded(&b, 2)?)? * 2.0)?;
    assert!(difference(tiled.get(x.as_tensor()).expect("x's gradient"), &expected)? < 1e-12);
    // Columns 1..3 overlap both, and y is also used whole.
    let whole = y.mul(&e)?.sum_all()?;
    let overlapping = (((part(&a, 0)? + part(&b, 2)?)? + part(&c, 1)?)? + whole)?.backward()?;
    let expected = ((((padded(&a, 0)? + padded(&b, 2)?)? + padded(&c, 1)?)? + &e)? * 2.0)?;
    assert!(difference(overlapping.get(x.as_tensor()).expect("x's gradient"), &expected)? < 1e-12);
    Ok(())
}

/// The largest absolute difference between two tensors of the same shape.
fn difference(a: &Tensor, b: &Tensor) -> Result<f64> {
    a.sub(b)?.abs()?.max_all()?.to_scalar::<f64>()
}

/// Data times a weight: the backward stores no gradient for the data (candle computed one,
/// a product, and kept it), and the weight's gradient is the product's own.
#[test]
fn operands_that_need_no_gradient_get_none() -> Result<()> {
    let dev = Device::Cpu;
    let x = Tensor::randn(0f64, 1.0, (4, 3), &dev)?;
    let mask = Tensor::randn(0f64, 1.0, (4, 2), &dev)?;
    let w = Var::from_tensor(&Tensor::randn(0f64, 1.0, (3, 2), &dev)?)?;
    // x w, then times and divided by data: each op's data operand needs no gradient.
    let y = x.matmul(w.as_tensor())?;
    let z = y.mul(&mask)?.div(&(mask.abs()? + 1.0)?)?;
    let grads = z.sum_all()?.backward()?;
    for data in [&x, &mask] {
        assert!(grads.get(data).is_none(), "no gradient for data");
    }
    // d/dW Σ (xW ⊙ m / (|m| + 1)) = xᵀ (m / (|m| + 1)).
    let expected = x.t()?.matmul(&mask.div(&(mask.abs()? + 1.0)?)?)?;
    let got = grads.get(w.as_tensor()).expect("the weight's gradient");
    assert!(difference(got, &expected)? < 1e-12);
    Ok(())
}

/// A product of two variables still gets both gradients, and a data operand used twice
/// beside a variable changes nothing in the variable's.
#[test]
fn operands_that_need_a_gradient_still_get_theirs() -> Result<()> {
    let dev = Device::Cpu;
    let a = Var::from_tensor(&Tensor::randn(0f64, 1.0, (2, 3), &dev)?)?;
    let b = Var::from_tensor(&Tensor::randn(0f64, 1.0, (3, 2), &dev)?)?;
    let c = Tensor::randn(0f64, 1.0, (2, 2), &dev)?;
    let y = a.as_tensor().matmul(b.as_tensor())?.mul(&c)?.add(&c)?;
    let grads = y.sum_all()?.backward()?;
    let ga = c.matmul(&b.as_tensor().t()?)?;
    let gb = a.as_tensor().t()?.matmul(&c)?;
    assert!(difference(grads.get(a.as_tensor()).expect("a's gradient"), &ga)? < 1e-12);
    assert!(difference(grads.get(b.as_tensor()).expect("b's gradient"), &gb)? < 1e-12);
    assert!(grads.get(&c).is_none());
    Ok(())
}
