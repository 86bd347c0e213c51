//! The Neural Associative Memory (NAM paper): the multi-head write and read ([`nam_wr`],
//! [`nam_rd`]) and NAM-Transformer's attention ([`nam_attend`]); NAM-TM's tapes
//! ([`tape_write`], [`tape_read`]), head transition ([`head_move`]) and JUMP target
//! ([`key_jump`]); and the argument rules all of them share on heads (`heads`).

pub mod head_move;
pub(super) mod heads;
pub mod key_jump;
pub mod nam_attend;
pub mod nam_rd;
pub mod nam_wr;
pub mod tape_read;
pub mod tape_write;
