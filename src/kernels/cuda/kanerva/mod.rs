//! The Kanerva machines' fused ops: the addressing and readout, the write, and the batched
//! SPD solve under both.

pub mod kanerva_address;
pub mod kanerva_write;
pub mod spd_solve;
