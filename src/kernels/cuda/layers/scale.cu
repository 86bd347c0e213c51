// A tensor times a single number, or each run of `per` elements times a number of its own (f32),
// as src/kernels/cuda/layers/scale.rs and scale_rows.rs compute it on the CPU: `x` and `g` have
// `n` elements, `alpha` one (or one per run, n / per). Blocks of 256 threads. Built to PTX by
// build.rs with the `cuda` feature.

// The sum of `acc` over the block, written to `*out` by thread 0; `warp_sums` is the block's
// shared array of 32.
__device__ void write_block_sum(float acc, float* warp_sums, float* out) {
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) *out = acc;
    }
}

// out = a g over the block's elements [start, stop), strided by its threads; returns the
// thread's share of the sum of g ⊙ x.
__device__ float scaled_range(const float* x, const float* g, float a, size_t start, size_t stop, float* out) {
    float acc = 0.0f;
    for (size_t i = start + threadIdx.x; i < stop; i += blockDim.x) {
        float gi = g[i];
        out[i] = a * gi;
        acc += gi * x[i];
    }
    return acc;
}

// out = alpha x, grid-stride.
extern "C" __global__ void scale_fwd(const float* x, const float* alpha, float* out, int n) {
    float a = alpha[0];
    // size_t: the stride past the last element must not overflow an int near n = 2^31.
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = a * x[i];
}

// out = [alpha g (n) | one partial sum of g ⊙ x per block (gridDim.x)]: block b covers the
// elements [b · share, (b + 1) · share), share = ceil(n / gridDim.x).
extern "C" __global__ void scale_bwd(const float* x, const float* alpha, const float* g, float* out, int n) {
    __shared__ float warp_sums[32];
    float a = alpha[0];
    size_t share = ((size_t)n + gridDim.x - 1) / gridDim.x;
    size_t start = blockIdx.x * share, stop = min(start + share, (size_t)n);
    write_block_sum(scaled_range(x, g, a, start, stop, out), warp_sums, out + n + blockIdx.x);
}

// out = alpha[i / per] x[i], grid-stride.
extern "C" __global__ void scale_rows_fwd(const float* x, const float* alpha, float* out, int n, int per) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = alpha[i / per] * x[i];
}

// out = [alpha[i / per] g[i] (n) | `parts` partial sums of g ⊙ x per run]: block b covers run
// b / parts, and in it the share b % parts of ceil(per / parts) elements.
extern "C" __global__ void scale_rows_bwd(const float* x, const float* alpha, const float* g, float* out, int n, int per,
                                          int parts) {
    __shared__ float warp_sums[32];
    size_t run = blockIdx.x / parts, part = blockIdx.x % parts;
    size_t share = ((size_t)per + parts - 1) / parts, end = (run + 1) * (size_t)per;
    size_t start = run * (size_t)per + part * share, stop = min(start + share, end);
    float a = alpha[run];
    write_block_sum(scaled_range(x, g, a, start, stop, out), warp_sums, out + n + blockIdx.x);
}
