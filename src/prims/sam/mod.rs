//! The Self-attentive Associative Memory (SAM paper) and its STM model: the item memory write
//! ([`item_write`]), the SAM operator ([`sam_read`]) with its outer product attention
//! ([`opa_attend`]), the read of the relational memory ([`rel_read`]), the relational → item
//! transfer ([`transfer`]) and the output read-out ([`distill`]).

pub mod distill;
pub mod item_write;
pub mod opa_attend;
pub mod rel_read;
pub mod sam_read;
pub mod transfer;
