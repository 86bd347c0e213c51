//! A CUDA launch's geometry: blocks, threads and bytes of shared memory. Each fused op says its
//! own kernels' (`launch_shape` in its module): pure arithmetic, compiled with or without the
//! `cuda` feature, so that its launch (with the feature) and the test that runs the kernels on
//! the CPU (`tests/integration/cuda_emulation.rs`, without it) launch alike.

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
