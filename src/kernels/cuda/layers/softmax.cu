// Softmax over the last axis on the GPU (f32), as src/kernels/cuda/layers/softmax.rs computes it on
// the CPU: rows of `n`, one warp per row striding over it (rows here are short: STM's nq queries,
// the RMC's slots). Built to PTX by build.rs with the `cuda` feature.

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// y = exp(x − max) / Σ exp(x − max), per row. A warp past the last row returns whole (the
// shuffles need every lane of a live warp).
extern "C" __global__ void softmax_fwd(const float* x, float* y, int rows, int n) {
    int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * n;
    float* yr = y + (size_t)row * n;
    float m = -INFINITY;
    for (int j = lane; j < n; j += 32) m = fmaxf(m, xr[j]);
    m = warp_max(m);
    float s = 0.0f;
    for (int j = lane; j < n; j += 32) {
        float e = expf(xr[j] - m);
        yr[j] = e;
        s += e;
    }
    s = warp_sum(s);
    for (int j = lane; j < n; j += 32) yr[j] /= s;
}

// d x = y ⊙ (g − Σ g y), per row.
extern "C" __global__ void softmax_bwd(const float* y, const float* g, float* dx, int rows, int n) {
    int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* yr = y + (size_t)row * n;
    const float* gr = g + (size_t)row * n;
    float s = 0.0f;
    for (int j = lane; j < n; j += 32) s += yr[j] * gr[j];
    s = warp_sum(s);
    for (int j = lane; j < n; j += 32) dx[(size_t)row * n + j] = yr[j] * (gr[j] - s);
}
