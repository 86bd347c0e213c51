// A tensor times a single number on the GPU (f32), as src/kernels/cuda/layers/scale.rs computes it
// on the CPU: `x` and `g` have `n` elements, `alpha` one. Blocks of 256 threads. Built to PTX by
// build.rs with the `cuda` feature.

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
