//! Tensor glue: arithmetic with broadcasting ([`add`], [`sub`], [`mul`], [`div`], sharing
//! `binary`), constants ([`affine`]) and one learned number ([`scalar`]), products
//! ([`matmul`], [`outer`]), shapes ([`concat`](mod@concat), [`slice`](mod@slice),
//! [`reshape`], [`flatten`]), element-wise functions ([`relu`], [`sigmoid`], [`tanh`],
//! sharing `unary`), [`softmax`] and [`stop_gradient`]. Nothing here knows a memory model.

pub mod add;
pub mod affine;
pub(super) mod binary;
pub mod concat;
pub mod div;
pub mod flatten;
pub mod matmul;
pub mod mul;
pub mod outer;
pub mod relu;
pub mod reshape;
pub mod scalar;
pub mod sigmoid;
pub mod slice;
pub mod softmax;
pub mod stop_gradient;
pub mod sub;
pub mod tanh;
pub(super) mod unary;
