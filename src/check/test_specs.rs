//! Spec text that unit tests across the crate share.

/// A one-layer LSTM over embedded tokens, `model NAME(SIZE = 8)` with `SIZE` its hidden size,
/// as a string literal (for `concat!`): `tiny_lstm!("lstm", "hidden")`.
macro_rules! tiny_lstm {
    ($name:literal, $size:literal) => {
        concat!(
            "model ",
            $name,
            "(",
            $size,
            " = 8) {\n",
            "  state c = zeros(",
            $size,
            ")\n",
            "  state h = zeros(",
            $size,
            ")\n",
            "  step token {\n",
            "    c, h = lstmCell(c, h, embed(token, 8))\n",
            "    out linear(h, output_size)\n",
            "  }\n",
            "}\n",
        )
    };
}
pub(crate) use tiny_lstm;

/// [`tiny_lstm!`] as `model lstm(hidden = 8)`, after `task tiny`, a small associative
/// retrieval.
macro_rules! tiny_lstm_on_assoc {
    () => {
        concat!(
            "task tiny = assocRetrieval(pairs = 2, train = 64, validation = 32, test = 32)\n",
            crate::check::test_specs::tiny_lstm!("lstm", "hidden"),
        )
    };
}
pub(crate) use tiny_lstm_on_assoc;

/// One trial: [`tiny_lstm_on_assoc!`] trained for 6 steps of 16 sequences, as experiment `e`.
pub(crate) const SIX_STEPS_OF_TINY_LSTM: &str =
    concat!(tiny_lstm_on_assoc!(), "experiment e {\n  task tiny\n  model lstm\n  train { batch = 16, steps = 6 }\n}\n");
