//! Learned layers a controller is built from: dense ([`linear`], [`mlp`]), token inputs
//! ([`embedding`], [`embed`]), recurrent cells ([`lstm_cell`], [`gru_cell`]), normalisations
//! ([`layer_norm`], [`normalize`]), and the token embedding folded into an LSTM cell as one
//! fused op for training (`embed_lstm`, see `prims::fusion`).

pub mod embed;
pub(super) mod embed_lstm;
pub mod embedding;
pub mod gru_cell;
pub mod layer_norm;
pub mod linear;
pub mod lstm_cell;
pub mod mlp;
pub mod normalize;
