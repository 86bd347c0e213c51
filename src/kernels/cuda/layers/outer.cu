// The outer product a ⊗ b of batches of vectors on the GPU (f32), as
// src/kernels/cuda/layers/outer.rs computes it on the CPU: a [rows, n], b [rows, m], out [rows, n,
// m]; from g = d loss / d out, d a = g b and d b = gᵀ a per row. Built to PTX by build.rs with the
// `cuda` feature.

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// One thread per output element.
extern "C" __global__ void outer_fwd(const float* a, const float* b, float* out, int rows, int n, int m) {
    const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t per_row = (size_t)n * m;
    if (k >= (size_t)rows * per_row) return;
    const size_t r = k / per_row, i = (k % per_row) / m, j = k % m;
    out[k] = a[r * n + i] * b[r * m + j];
}

// out = [d a (rows n) | d b (rows m)]. One block per row (a multiple of 32 threads): a warp
// per element of d a (its lanes over g's row), a thread per element of d b (down g's column).
extern "C" __global__ void outer_bwd(const float* a, const float* b, const float* g, float* out, int rows, int n,
                                     int m) {
    const int r = blockIdx.x;
    if (r >= rows) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const float* ar = a + (size_t)r * n;
    const float* br = b + (size_t)r * m;
    const float* gr = g + (size_t)r * n * m;
    float* da = out + (size_t)r * n;
    float* db = out + (size_t)rows * n + (size_t)r * m;
    for (int i = warp; i < n; i += warps) {
        float s = 0.0f;
        for (int j = lane; j < m; j += 32) s += gr[(size_t)i * m + j] * br[j];
        s = warp_sum(s);
        if (lane == 0) da[i] = s;
    }
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
        float s = 0.0f;
        for (int i = 0; i < n; ++i) s += gr[(size_t)i * m + j] * ar[i];
        db[j] = s;
    }
}
