// Each run of `per` elements of a tensor times its own number (f32), as
// src/kernels/cuda/layers/scale_rows.rs computes it on the CPU: `x` and `g` have `n` elements,
// `alpha` one per run (n / per). Blocks of 256 threads. Built to PTX by build.rs with the `cuda`
// feature.

// out = alpha[i / per] x[i], grid-stride.
extern "C" __global__ void scale_rows_fwd(const float* x, const float* alpha, float* out, int n, int per) {
    // size_t: the stride past the last element must not overflow an int near n = 2^31.
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
    float acc = 0.0f;
    for (size_t i = start + threadIdx.x; i < stop; i += blockDim.x) {
        float gi = g[i];
        out[i] = a * gi;
        acc += gi * x[i];
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) out[n + blockIdx.x] = acc;
    }
}
