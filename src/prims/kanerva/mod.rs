//! The (Product) Kanerva Machine (PKM paper): the Bayesian write ([`kanerva_update`]), the
//! queried read ([`kanerva_read`]), the batch loops and saved addressing they share for
//! training (`kanerva_train`), and the two as one fused op on the same operands
//! (`kanerva_read_update`, see `prims::fusion`).

pub mod kanerva_read;
pub(super) mod kanerva_read_update;
mod kanerva_train;
pub mod kanerva_update;
