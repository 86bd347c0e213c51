//! How many blocks, threads and bytes of shared memory each of memctl's CUDA kernels
//! (`src/kernels/cuda/*.cu`) is launched with: pure arithmetic, compiled with or without the
//! `cuda` feature, so that the launchers (`cuda_kernels`, with the feature) and the test that
//! runs the kernels on the CPU (`tests/integration/cuda_emulation.rs`, without it) launch
//! alike.

use super::nam_write_op::{Orientation, backward_shared_bytes, threads_per_memory};

/// A launch's grid, its blocks' threads (one dimension each) and its dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    pub blocks: u32,
    pub threads: u32,
    pub shared_bytes: u32,
}

impl LaunchShape {
    /// One thread per element, 1 024 to a block: cudarc's `LaunchConfig::for_num_elems`.
    pub fn per_element(n: u32) -> Self {
        Self { blocks: n.div_ceil(1024), threads: 1024, shared_bytes: 0 }
    }

    /// `blocks` blocks of 256 threads.
    pub fn blocks_of_256(blocks: u32) -> Self {
        Self { blocks, threads: 256, shared_bytes: 0 }
    }

    /// One warp per row, eight rows to a block of 256 threads (`softmax.cu`, `l2_normalize.cu`).
    pub fn warp_per_row(rows: u32) -> Self {
        Self::blocks_of_256(rows.div_ceil(8).max(1))
    }
}

/// `sam_attend.cu` on `batch` examples of `n` rows and `nq` queries: the forward a block per
/// (example, query), the backward a block per 8 rows of an example and one per 32 of its
/// columns; blocks of 256 threads, with [`shared_bytes`](super::sam_attend_op::shared_bytes).
pub fn sam_attend(backward: bool, batch: u32, n: u32, nq: u32) -> LaunchShape {
    let blocks = if backward { batch * (n.div_ceil(8) + n.div_ceil(32)) } else { batch * nq };
    let shared_bytes = super::sam_attend_op::shared_bytes(backward, n as usize, nq as usize) as u32;
    LaunchShape { blocks: blocks.max(1), threads: 256, shared_bytes }
}

/// `kanerva_address.cu`'s first kernel each way (`kanerva_address_fwd`, `kanerva_address_bwd`)
/// on `batch` examples of `k` machines of `c × m`: a block of 128 threads per example and
/// machine, with [`shared_bytes`](super::kanerva_address_op::shared_bytes).
pub fn kanerva_address(batch: u32, k: u32, c: u32, m: u32) -> LaunchShape {
    let shared_bytes = super::kanerva_address_op::shared_bytes(c as usize, m as usize) as u32;
    LaunchShape { blocks: (batch * k).max(1), threads: 128, shared_bytes }
}

/// `kanerva_address.cu`'s sums over the machines (`kanerva_address_fwd_sum`,
/// `kanerva_address_bwd_sum`) on `batch` examples: a warp per example.
pub fn kanerva_address_sum(batch: u32) -> LaunchShape {
    LaunchShape::warp_per_row(batch)
}

/// `kanerva_write.cu` on `batch` examples of `k` machines of `c × m`: the forward a block per
/// (example, machine), the backward a block per example; blocks of 128 threads, with
/// [`shared_bytes`](super::kanerva_write_op::shared_bytes).
pub fn kanerva_write(backward: bool, batch: u32, k: u32, c: u32, m: u32) -> LaunchShape {
    let blocks = if backward { batch } else { batch * k };
    let shared_bytes = super::kanerva_write_op::shared_bytes(backward, c as usize, m as usize) as u32;
    LaunchShape { blocks: blocks.max(1), threads: 128, shared_bytes }
}

/// `outer.cu`: the forward a thread per output element, the backward a block per row.
pub fn outer(backward: bool, rows: u32, n: u32, m: u32) -> LaunchShape {
    if backward { LaunchShape::blocks_of_256(rows.max(1)) } else { LaunchShape::per_element((rows * n * m).max(1)) }
}

/// `rel_read.cu`'s `kernel`, blocks of 256 threads: the forward and `rel_read_bwd_inputs` a
/// block per example, `rel_read_bwd_memory` a block per example and slot; shared memory for `p`
/// (and `b` forward, `gp` for the inputs' gradients).
pub fn rel_read(kernel: &str, batch: u32, nq: u32, d: u32) -> LaunchShape {
    let (blocks, shared_floats) = match kernel {
        "rel_read_fwd" => (batch, nq + d),
        "rel_read_bwd_memory" => (batch * nq, nq),
        _ => (batch, 2 * nq),
    };
    LaunchShape { blocks: blocks.max(1), threads: 256, shared_bytes: shared_floats * 4 }
}

/// `lerp.cu`: a thread per element, both ways.
pub fn lerp(n: u32) -> LaunchShape {
    LaunchShape::per_element(n.max(1))
}

/// Elements per partial sum of the backward's `Σ g ⊙ x` (one CUDA block's share, 8 per
/// thread of its 256). At 8 192 (32 per thread), config B's `α1 · M^r` (2.36 M elements) ran on
/// 288 blocks, too few to keep an H200's memory busy: 27.9 µs, about 1 TB/s (Nsight Compute,
/// 2026-11-26). Now it takes the most blocks, 1 024.
pub const SCALE_PER_PARTIAL: usize = 2048;

/// `scale.cu`: blocks of 256 threads, the forward's grid-stride over at most 65 535 of them, the
/// backward's one partial sum of `Σ g ⊙ x` per block, at least one and at most 1 024.
pub fn scale(backward: bool, n: usize) -> LaunchShape {
    let blocks = if backward { n.div_ceil(SCALE_PER_PARTIAL).clamp(1, 1024) } else { n.div_ceil(256).clamp(1, 65_535) };
    LaunchShape::blocks_of_256(blocks as u32)
}

/// `head_move.cu`'s `kernel`: the forward a thread per cell of `rows × cells`, the backward a
/// thread per row (`head_move_bwd`) or a warp per row (`head_move_bwd_warps`).
pub fn head_move(kernel: &str, rows: u32, cells: u32) -> LaunchShape {
    match kernel {
        "head_move_fwd" => LaunchShape::per_element((rows * cells).max(1)),
        "head_move_bwd_warps" => LaunchShape::warp_per_row(rows),
        _ => LaunchShape::per_element(rows.max(1)),
    }
}

/// `nam_write.cu`'s `tape_write_bwd_split` on `count` tapes of `cells × features`: a block per
/// tape, a warp per cell up to eight, with [`tape_split_shared_bytes`](super::nam_write_op::tape_split_shared_bytes).
pub fn tape_write_bwd_split(count: u32, cells: usize, features: usize) -> LaunchShape {
    let warps = super::nam_write_op::tape_split_warps(cells);
    let shared_bytes = super::nam_write_op::tape_split_shared_bytes(cells, features) as u32;
    LaunchShape { blocks: count.max(1), threads: (warps * 32) as u32, shared_bytes }
}

/// `nam_write.cu`: a block per memory, its threads and the backward's shared memory as
/// [`threads_per_memory`] and [`backward_shared_bytes`] say.
pub fn nam_write(orientation: Orientation, backward: bool, count: u32, rows: usize, cols: usize) -> LaunchShape {
    LaunchShape {
        blocks: count.max(1),
        threads: threads_per_memory(orientation, rows, cols) as u32,
        shared_bytes: if backward { backward_shared_bytes(orientation, rows, cols) as u32 } else { 0 },
    }
}

/// `spd_solve.cu`: a block per system, a warp for small systems and up to 256 threads where a
/// column or a row has more to share; the factor and right-hand sides (`n² + n r` doubles) in
/// shared memory when they fit a block's, else in a global workspace (`shared_bytes` 0 and
/// `false`).
pub fn spd_solve(batch: u32, n: usize, r: usize) -> (LaunchShape, bool) {
    let bytes = (n * n + n * r) * std::mem::size_of::<f64>();
    let use_shared = bytes <= super::fused::BLOCK_SHARED_BYTES;
    let threads = n.max(n * r).div_ceil(32).clamp(1, 8) as u32 * 32;
    (LaunchShape { blocks: batch, threads, shared_bytes: if use_shared { bytes as u32 } else { 0 } }, use_shared)
}
