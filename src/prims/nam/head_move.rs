//! `headMove(pos, moves, jump?)`: NAM-TM's head transition (NAM paper §3.3): the next head
//! position is the probability-weighted sum of the transitions
//! `H' = p_left · roll⁻¹(H) + p_noop · H + p_right · roll(H) + p_jump · H_JUMP`.
//!
//! - `roll` is the differentiable circular shift mapping `e_i → e_{i+1}` (RIGHT), `roll⁻¹` maps
//!   `e_i → e_{i−1}` (LEFT); both wrap around the tape's ends.
//! - `moves` are the probabilities in the authors' order (@972108f): `[LEFT, NO-OP, RIGHT]` or
//!   `[LEFT, NO-OP, RIGHT, JUMP]` — pass `softmax(..)` of the controller's logits; they are
//!   used as given.
//! - With 4 moves, `jump` (from `keyJump`) is required; with 3 moves it must be absent: that
//!   is the paper's "No Jmp" ablation (no key tape, 3 transitions).
//!
//! Shapes: `pos: [H, L]`, `moves: [H, 3]` or `[H, 4]`, `jump: [H, L]` → `[H, L]`.
//! No normalisation of the result (as @972108f; the 2023 code L2-normalises positions).
//!
//! # Wiring a NAM-TM step
//!
//! NAM-TM is not one primitive but a few, so that ablations are one-line edits and no
//! parameter depends on the tape length `L` (all of them belong to the `linear`s and the
//! controller, which never see `L`; a model trained with one `L` runs with another):
//! `tapeWrite` (WR on the value and key tapes), `tapeRead` (RD at the read head), `keyJump`
//! (RD of the key tape's transpose) and `headMove`. Tapes are `[H, L, d/H]` (one tape per
//! head, one row per position) and positions `[H, L]`. One layer, as the paper's §3.3 with
//! the authors' @972108f details (docs/models.md, NAM-TM):
//!
//! ```text
//! model namtm(d = 256, heads = 2, L = 32, jump = true, input_width = 256) {
//!   state T  = zeros(heads, L, d / heads)    // value tape
//!   state K  = zeros(heads, L, d / heads)    // key tape (unit keys)
//!   state Hr = identity(heads, L)            // read head (head h starts at position h, see below)
//!   state Hw = identity(heads, L)            // write head
//!   state h  = zeros(d)                      // controller
//!   step token {
//!     x  = layerNorm(linear(embed(token, input_width), d))
//!     h  = gruCell(h, x)                                   // controller (unidirectional, see below)
//!     p  = sigmoid(linear(h, 2 * heads))                   // p_r, p_w per head
//!     pr = slice(p, 0, heads)
//!     pw = slice(p, heads, heads)
//!     T  = tapeWrite(T, Hw, linear(x, d), pw, pw)           // T' = WR(T, Hw, W_v x, pw, pw)
//!     r  = tapeRead(T, Hr, pr)                             // R = RD(T', Hr, pr)
//!     if jump {                                            // K' = WR(K, Hw, μ(W_k x), pw, pw)
//!       K  = tapeWrite(K, Hw, normalize(reshape(linear(x, d), [heads, d / heads])), pw, pw)
//!       j  = keyJump(K, linear(h, d))                      // H_JUMP = RD(K'ᵀ, μ(q), 1)
//!       Hr = headMove(Hr, softmax(reshape(linear(h, 4 * heads), [heads, 4])), j)
//!       Hw = headMove(Hw, softmax(reshape(linear(h, 4 * heads), [heads, 4])), j)
//!     } else {                                             // "No Jmp": 3 moves, no key tape
//!       Hr = headMove(Hr, softmax(reshape(linear(h, 3 * heads), [heads, 3])))
//!       Hw = headMove(Hw, softmax(reshape(linear(h, 3 * heads), [heads, 3])))
//!     }
//!     out linear(linear(r, d), output_size)
//!   }
//! }
//! ```
//! (The test `documented_nam_tm_step_checks_and_runs` below checks and runs this model.)
//! Each step writes, then reads the updated tape, then moves both heads, as @972108f. The
//! authors' code shifts the *write* head from the read head's position (a bug, fixed in their
//! 2023 code); memctl follows the paper: each head moves from its own position.
//!
//! **Controller.** The paper's controller is a bidirectional GRU over the whole input
//! sequence: its state at step `t` already depends on inputs after `t`. A step-by-step model
//! (memctl's `step`) cannot express that, so memctl's NAM-TM uses a unidirectional controller,
//! `gruCell` (an `lstmCell` works as well), as the authors' 2023 code does (unidirectional
//! LSTM). Expect it to differ from the paper's numbers on tasks that need look-ahead.
//!
//! **Initial positions.** The paper starts every head one-hot at position 0. `identity(heads,
//! L)` starts head `h` at position `h` instead (it needs `heads ≤ L`). Each head has its own
//! tapes and positions, and every operation above commutes with a circular shift of a head's
//! tapes and positions together (reads are unchanged, tapes and positions shift), so starting
//! head `h` at `h` on zero tapes gives exactly the same outputs as starting it at 0 (the test
//! `a_step_commutes_with_circular_shifts` checks this).

use candle_core::Tensor;

use super::heads::check_position;
use crate::kernels::cpu::{real::Real, view};
use crate::kernels::cuda::nam::head_move;
use crate::prims::prelude::*;

primitive! {
    HeadMove = "headMove",
    "NAM-TM head transition: moves-weighted sum of LEFT, NO-OP, RIGHT (circular) and JUMP (NAM §3.3)",
    args: [tensor("pos"), tensor("moves"), optional("jump")],
    examples: [
        [("pos", t(&[2, 5])), ("moves", t(&[2, 3]))],
        [("pos", t(&[2, 5])), ("moves", t(&[2, 4])), ("jump", t(&[2, 5]))],
    ],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let pos = args.shape_of_rank("pos", 2, "a head position [heads, L]")?;
    let (heads, len) = (pos[0], pos[1]);
    let moves = args.shape("moves")?;
    let n_moves = match moves[..] {
        [h, m @ (3 | 4)] if h == heads => m,
        _ => {
            return Err(PrimError::new(PrimErrorKind::Moves { heads, found: moves.clone() }).on("moves"));
        }
    };
    match (n_moves, args.is_present("jump")) {
        (4, false) => {
            return Err(PrimError::new(PrimErrorKind::JumpMissing).on("moves").hint(Hint::PassJump));
        }
        (3, true) => {
            return Err(PrimError::new(PrimErrorKind::JumpUnused).on("jump").hint(Hint::FourMoves { heads }));
        }
        (4, true) => check_position(args, "jump", heads, len)?,
        _ => {}
    }
    let flops = (heads * len * 2 * n_moves) as u64;
    Ok((HeadMoveOp { jump: n_moves == 4 }, Inferred::new(vec![Ty::Tensor(vec![heads, len])], vec![], flops)))
}

struct HeadMoveOp {
    jump: bool,
}

impl Op for HeadMoveOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let ([pos, moves], jump) = op::inputs_and_optional("headMove", inputs, self.jump)?;
        let next = match crate::kernels::cuda::switches::used_for(pos, crate::kernels::cuda::nam::head_move::HEAD_MOVE)
        {
            true => head_move::head_move(pos, moves, jump)?,
            false => head_move::head_move_with_candle_ops(pos, moves, jump)?,
        };
        Ok(vec![next])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl SlicedBackward for HeadMoveOp {
    type Saved = ();

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<()> {
        forward_saving_nothing(self, inputs, params)
    }

    /// `g pos_l = m_left g_{l−1} + m_noop g_l + m_right g_{l+1}` (indices mod L), each move's
    /// probability gets `⟨g, its shifted position⟩`, `g jump = m_jump g`.
    fn backward_typed<T: Real>(&self, b: &Backward<'_, ()>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let (pos, moves) = (&b.inputs[0], &b.inputs[1]);
        let len = pos.dims().last().copied().unwrap_or(1);
        let n_moves = moves.dims().last().copied().unwrap_or(1);
        let g = b.grad_or_zeros(0)?;
        let (gr, pr, mr) = (view::Read::new(&g)?, view::Read::new(pos)?, view::Read::new(moves)?);
        let (gs, ps, ms) = (gr.slice::<T>()?, pr.slice::<T>()?, mr.slice::<T>()?);
        let jr = b.inputs.get(2).map(view::Read::new).transpose()?;
        let js = jr.as_ref().map(|j| j.slice::<T>()).transpose()?;
        let (gpos, gmoves, gjump) = head_move::backward_rows(gs, ps, ms, js, len, n_moves);
        b.input_grads([Some(gpos), Some(gmoves), gjump])
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use candle_core::{D, DType, Device, Tensor};

    use crate::prims::contract::testing::*;

    fn one_hot(i: usize, len: usize) -> Vec<f64> {
        (0..len).map(|j| if j == i { 1.0 } else { 0.0 }).collect()
    }

    #[test]
    fn transitions_move_a_one_hot_head() {
        let len = 5;
        let three = [("pos", t(&[1, len])), ("moves", t(&[1, 3]))];
        let mv = |i: usize, m: &[f64]| run("headMove", &three, &[one_hot(i, len), m.to_vec()]);
        // RIGHT: e_i → e_{i+1}, wrapping at the end.
        assert_eq!(mv(1, &[0.0, 0.0, 1.0]), one_hot(2, len));
        assert_eq!(mv(len - 1, &[0.0, 0.0, 1.0]), one_hot(0, len));
        // LEFT is RIGHT's inverse: e_i → e_{i−1}, and e_0 → e_{L−1}.
        assert_eq!(mv(2, &[1.0, 0.0, 0.0]), one_hot(1, len));
        assert_eq!(mv(0, &[1.0, 0.0, 0.0]), one_hot(len - 1, len));
        for i in 0..len {
            let right = mv(i, &[0.0, 0.0, 1.0]);
            let back = run("headMove", &three, &[right, vec![1.0, 0.0, 0.0]]);
            assert_eq!(back, one_hot(i, len));
        }
        // NO-OP keeps the head; a mixture splits the mass.
        assert_eq!(mv(3, &[0.0, 1.0, 0.0]), one_hot(3, len));
        assert_eq!(mv(3, &[0.25, 0.5, 0.25]), vec![0.0, 0.0, 0.25, 0.5, 0.25]);
    }

    #[test]
    fn jump_moves_the_mass_to_the_matching_key() {
        // Key tape rows: unit keys e_1, e_2, e_0, e_1/√2+e_2/√2 ... row j = 2 holds e_0;
        // a query along e_0 with p_jump = 1 takes a head at 0 to position 2.
        let len = 4;
        let keys = vec![0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let jump = run("keyJump", &[("K", t(&[1, len, 3])), ("q", t(&[3]))], &[keys, vec![3.0, 0.0, 0.0]]);
        assert_eq!(jump, one_hot(2, len));
        let four = [("pos", t(&[1, len])), ("moves", t(&[1, 4])), ("jump", t(&[1, len]))];
        assert_eq!(run("headMove", &four, &[one_hot(0, len), vec![0.0, 0.0, 0.0, 1.0], jump.clone()]), one_hot(2, len));
        // Half NO-OP, half JUMP.
        assert_eq!(
            run("headMove", &four, &[one_hot(0, len), vec![0.0, 0.5, 0.0, 0.5], jump]),
            vec![0.5, 0.0, 0.5, 0.0]
        );
    }

    #[test]
    fn no_jmp_variant_has_three_moves_and_rejects_mismatches() {
        assert_eq!(out_shapes("headMove", &[("pos", t(&[2, 6])), ("moves", t(&[2, 3]))]), vec![vec![2, 6]]);
        assert_eq!(
            out_shapes("headMove", &[("pos", t(&[2, 6])), ("moves", t(&[2, 4])), ("jump", t(&[2, 6]))]),
            vec![vec![2, 6]]
        );
        assert_eq!(param_count("headMove", &[("pos", t(&[2, 6])), ("moves", t(&[2, 3]))]), 0);
        assert!(error("headMove", &[("pos", t(&[2, 6])), ("moves", t(&[2, 4]))]).contains("no `jump` position"));
        assert!(
            error("headMove", &[("pos", t(&[2, 6])), ("moves", t(&[2, 3])), ("jump", t(&[2, 6]))])
                .contains("no JUMP probability")
        );
        assert!(error("headMove", &[("pos", t(&[2, 6])), ("moves", t(&[2, 5]))]).contains("`moves` must be [2, 4]"));
        assert!(
            error("headMove", &[("pos", t(&[2, 6])), ("moves", t(&[2, 4])), ("jump", t(&[2, 5]))])
                .contains("`jump` must have shape [2, 6]")
        );
    }

    fn apply(name: &str, args: &[(&'static str, TArg)], inputs: &[&Tensor]) -> Tensor {
        let inst = fitting(name, args);
        inst.op.forward(inputs, &[]).unwrap().remove(0)
    }

    fn randn(dims: &[usize], seed: u64) -> Tensor {
        use rand::SeedableRng;
        use rand_distr::Distribution;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let v: Vec<f64> = (0..dims.iter().product()).map(|_| rand_distr::StandardNormal.sample(&mut rng)).collect();
        Tensor::from_vec(v, dims, &Device::Cpu).unwrap()
    }

    #[test]
    fn a_step_commutes_with_circular_shifts() {
        // write → read → jump → move on (T, K, Hr, Hw), then again on everything rolled by s
        // positions: reads are equal, new tapes and positions are the rolled ones.
        let (b, h, len, dh, s) = (2, 2, 6, 3, 2);
        let (tape, keys) = (randn(&[b, h, len, dh], 1), randn(&[b, h, len, dh], 2));
        let (hr, hw) = (randn(&[b, h, len], 3), randn(&[b, h, len], 4));
        let (v, k, q) = (randn(&[b, h * dh], 5), randn(&[b, h, dh], 6), randn(&[b, h * dh], 7));
        let (pr, pw) = (randn(&[b, h], 8), randn(&[b, h], 9));
        let moves = randn(&[b, h, 4], 10);
        let step = |tape: &Tensor, keys: &Tensor, hr: &Tensor, hw: &Tensor| {
            let tw =
                [("T", t(&[h, len, dh])), ("pos", t(&[h, len])), ("v", t(&[h * dh])), ("pw", t(&[h])), ("pe", t(&[h]))];
            let kw =
                [("T", t(&[h, len, dh])), ("pos", t(&[h, len])), ("v", t(&[h, dh])), ("pw", t(&[h])), ("pe", t(&[h]))];
            let tape = apply("tapeWrite", &tw, &[tape, hw, &v, &pw, &pw]);
            let keys = apply("tapeWrite", &kw, &[keys, hw, &k, &pw, &pw]);
            let r = apply(
                "tapeRead",
                &[("T", t(&[h, len, dh])), ("pos", t(&[h, len])), ("pr", t(&[h]))],
                &[&tape, hr, &pr],
            );
            let j = apply("keyJump", &[("K", t(&[h, len, dh])), ("q", t(&[h * dh]))], &[&keys, &q]);
            let mv = [("pos", t(&[h, len])), ("moves", t(&[h, 4])), ("jump", t(&[h, len]))];
            let hr = apply("headMove", &mv, &[hr, &moves, &j]);
            let hw = apply("headMove", &mv, &[hw, &moves, &j]);
            (r, tape, keys, hr, hw)
        };
        let roll_pos = |x: &Tensor| x.roll(s, D::Minus1).unwrap();
        let roll_tape = |x: &Tensor| x.roll(s, 2).unwrap();
        let a = step(&tape, &keys, &hr, &hw);
        let b2 = step(&roll_tape(&tape), &roll_tape(&keys), &roll_pos(&hr), &roll_pos(&hw));
        let diff =
            |x: &Tensor, y: &Tensor| (x - y).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f64>().unwrap();
        assert!(diff(&a.0, &b2.0) < 1e-12, "reads differ");
        assert!(diff(&roll_tape(&a.1), &b2.1) < 1e-12, "tapes");
        assert!(diff(&roll_tape(&a.2), &b2.2) < 1e-12, "key tapes");
        assert!(diff(&roll_pos(&a.3), &b2.3) < 1e-12, "read heads");
        assert!(diff(&roll_pos(&a.4), &b2.4) < 1e-12, "write heads");
    }

    const SPEC: &str = r#"
task assoc = assocRetrieval(pairs = 3, train = 64, validation = 16, test = 16)

model namtm(d = 16, heads = 2, L = 6, jump = true, input_width = 8) {
  state T  = zeros(heads, L, d / heads)
  state K  = zeros(heads, L, d / heads)
  state Hr = identity(heads, L)
  state Hw = identity(heads, L)
  state h  = zeros(d)
  step token {
    x  = layerNorm(linear(embed(token, input_width), d))
    h  = gruCell(h, x)
    p  = sigmoid(linear(h, 2 * heads))
    pr = slice(p, 0, heads)
    pw = slice(p, heads, heads)
    T  = tapeWrite(T, Hw, linear(x, d), pw, pw)
    r  = tapeRead(T, Hr, pr)
    if jump {
      K  = tapeWrite(K, Hw, normalize(reshape(linear(x, d), [heads, d / heads])), pw, pw)
      j  = keyJump(K, linear(h, d))
      Hr = headMove(Hr, softmax(reshape(linear(h, 4 * heads), [heads, 4])), j)
      Hw = headMove(Hw, softmax(reshape(linear(h, 4 * heads), [heads, 4])), j)
    } else {
      Hr = headMove(Hr, softmax(reshape(linear(h, 3 * heads), [heads, 3])))
      Hw = headMove(Hw, softmax(reshape(linear(h, 3 * heads), [heads, 3])))
    }
    out linear(linear(r, d), output_size)
  }
}

experiment e {
  task assoc
  model namtm
  train { optimizer = adam(lr = 1e-3), batch = 4, steps = 1, eval_every = 1 }
  sweep {
    jump in [true, false]
    L in [6, 9]
  }
}
"#;

    #[test]
    fn documented_nam_tm_step_checks_and_runs() {
        let spec = crate::lang::parse_str("namtm.mem", SPEC).unwrap_or_else(|e| panic!("{}", e.render(false)));
        let program = crate::check::check(&spec, &crate::prims::Primitives)
            .unwrap_or_else(|e| panic!("{}", e.render(&spec.sources, false)));
        let trials = &program.experiments[0].trials;
        assert_eq!(trials.len(), 4);
        let count = |i: usize| trials[i].graph.params.iter().map(|p| p.numel()).sum::<usize>();
        let jump_of = |i: usize| trials[i].config.params["jump"].as_bool().unwrap();
        let len_of = |i: usize| trials[i].config.params["L"].as_int().unwrap();
        // No parameter depends on L; "No Jmp" drops W_k, W_q and the 4th move of both heads.
        for i in 0..4 {
            for j in 0..4 {
                if jump_of(i) == jump_of(j) {
                    assert_eq!(count(i), count(j), "L = {} vs L = {}", len_of(i), len_of(j));
                }
            }
        }
        let with = (0..4).find(|&i| jump_of(i)).unwrap();
        let without = (0..4).find(|&i| !jump_of(i)).unwrap();
        let (d, heads) = (16, 2);
        assert_eq!(count(with) - count(without), 2 * (d * d + d) + 2 * (d * heads + heads));
        for trial in trials {
            let cell = crate::compile::Cell::new(Arc::clone(&trial.graph), 1, &Device::Cpu, DType::F64).unwrap();
            let mut data = trial.task.data(1, &Device::Cpu).unwrap();
            let batch = data.train_batch(3).unwrap();
            let weights = cell.weights(true);
            let logits = cell.run(&weights, &batch.inputs, &batch.scored).unwrap();
            assert_eq!(logits.dim(1).unwrap(), 3);
            let loss = logits.sqr().unwrap().sum_all().unwrap();
            assert!(loss.to_scalar::<f64>().unwrap().is_finite());
            let grads = loss.backward().unwrap();
            let missing: Vec<&str> = cell
                .vars()
                .iter()
                .zip(&trial.graph.params)
                .filter(|(v, _)| grads.get(v.as_tensor()).is_none())
                .map(|(_, p)| p.name.as_str())
                .collect();
            assert!(missing.is_empty(), "no gradient for {missing:?}");
        }
    }
}
