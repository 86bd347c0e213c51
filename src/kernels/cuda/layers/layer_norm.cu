// Layer normalisation over the last axis on the GPU (f32), as src/kernels/cuda/layers/layer_norm.rs
// computes it on the CPU: `x` is [rows, n], `w` and `b` are [n], or [rows / per, n]: one row for
// each block of `per` rows (a pack's trials); biased variance, as PyTorch.
// One block per row, its threads (a multiple of 32) striding over the row. Built to PTX by
// build.rs with the `cuda` feature.

// The sum of `v` over the block, returned to every thread. `shared` holds 32 floats; it may be
// reused by the next call (the first barrier waits until every thread has read the last sum).
__device__ float block_sum(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)((blockDim.x + 31) >> 5) ? shared[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    return shared[0];
}

// The row's mean and 1/σ.
__device__ void row_moments(const float* x, int n, float eps, float* shared, float* mean, float* rstd) {
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += x[j];
    float m = block_sum(s, shared) / n;
    float q = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float d = x[j] - m;
        q += d * d;
    }
    *mean = m;
    *rstd = rsqrtf(block_sum(q, shared) / n + eps);
}

// y = (x - mean) / sqrt(var + eps) * w + b, per row.
extern "C" __global__ void layer_norm_fwd(const float* x, const float* w, const float* b, float* y, int rows, int n, int per, float eps) {
    __shared__ float shared[32];
    int row = blockIdx.x;
    if (row >= rows) return;
    w += (size_t)(row / per) * n;
    b += (size_t)(row / per) * n;
    const float* xr = x + (size_t)row * n;
    float mean, rstd;
    row_moments(xr, n, eps, shared, &mean, &rstd);
    float* yr = y + (size_t)row * n;
    for (int j = threadIdx.x; j < n; j += blockDim.x) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
}

// From g = d loss / d y: writes `out` = [d x; g ⊙ x̂], [2 · rows, n] (every row's d x, then every
// row's g ⊙ x̂), where
// d x = (g ⊙ w − mean(g ⊙ w) − x̂ · mean(g ⊙ w ⊙ x̂)) / σ; the caller sums g ⊙ x̂ and g over each
// block's rows for d w and d b.
extern "C" __global__ void layer_norm_bwd(const float* x, const float* w, const float* g, float* out, int rows, int n, int per, float eps) {
    __shared__ float shared[32];
    int row = blockIdx.x;
    if (row >= rows) return;
    w += (size_t)(row / per) * n;
    const float* xr = x + (size_t)row * n;
    const float* gr = g + (size_t)row * n;
    float mean, rstd;
    row_moments(xr, n, eps, shared, &mean, &rstd);
    float a = 0.0f, c = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float gw = gr[j] * w[j];
        a += gw;
        c += gw * (xr[j] - mean) * rstd;
    }
    a = block_sum(a, shared) / n;
    c = block_sum(c, shared) / n;
    float* dx = out + (size_t)row * n;
    float* gx = out + ((size_t)rows + row) * n;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float xhat = (xr[j] - mean) * rstd;
        dx[j] = (gr[j] * w[j] - a - xhat * c) * rstd;
        gx[j] = gr[j] * xhat;
    }
}
