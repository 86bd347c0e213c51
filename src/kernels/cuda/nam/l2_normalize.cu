// μ(x) = x / max(‖x‖₂, eps) over the last axis on the GPU (f32), as
// src/kernels/cuda/nam/l2_normalize.rs computes it on the CPU (kernels::cpu::nam_manual's
// `normalize` and `normalize_backward`): rows of `n`, one warp per row striding over it. Built to
// PTX by build.rs with the `cuda` feature.

#define NORMALIZE_EPS 1e-12f

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// max(‖x_r‖, eps) of a row of n, summed by the warp's lanes (every lane gets it).
__device__ __forceinline__ float clamped_norm(const float* xr, int n, int lane) {
    float sq = 0.0f;
    for (int j = lane; j < n; j += 32) sq += xr[j] * xr[j];
    return sqrtf(fmaxf(warp_sum(sq), NORMALIZE_EPS * NORMALIZE_EPS));
}

// y = x / max(‖x‖, eps), per row. A warp past the last row returns whole (the shuffles need
// every lane of a live warp).
extern "C" __global__ void l2_normalize_fwd(const float* x, float* y, int rows, int n) {
    // size_t: in 32 bits the thread index wraps past 2^27 rows.
    const size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= (size_t)rows) return;
    const float* xr = x + row * n;
    float* yr = y + row * n;
    const float norm = clamped_norm(xr, n, lane);
    for (int j = lane; j < n; j += 32) yr[j] = xr[j] / norm;
}

// d x = (g − μ ⟨μ, g⟩) / ‖x‖, or g / eps where the norm was clamped, per row.
extern "C" __global__ void l2_normalize_bwd(const float* x, const float* g, float* dx, int rows, int n) {
    // size_t: in 32 bits the thread index wraps past 2^27 rows.
    const size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= (size_t)rows) return;
    const float* xr = x + row * n;
    const float* gr = g + row * n;
    float* dr = dx + row * n;
    const float norm = clamped_norm(xr, n, lane);
    const float inv = 1.0f / norm;
    const bool clamped = norm <= NORMALIZE_EPS;
    float dot = 0.0f;
    for (int j = lane; j < n; j += 32) dot += xr[j] * inv * gr[j];
    dot = warp_sum(dot);
    for (int j = lane; j < n; j += 32) dr[j] = clamped ? gr[j] * inv : (gr[j] - xr[j] * inv * dot) * inv;
}
