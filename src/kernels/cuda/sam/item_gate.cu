// The element-wise half of itemWrite's gated write on the GPU (f32), as
// src/kernels/cuda/sam/item_gate.rs computes it on the CPU: `g` is [rows, 2d] (each row [input |
// forget] pre-activations), `x` and `m` are [rows, d]. One thread per (row, column). Built to
// PTX by build.rs with the `cuda` feature.

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

// out = σ(g_in) tanh(x) + σ(g_f) m
extern "C" __global__ void item_gate_fwd(const float* g, const float* x, const float* m, float* out, int rows, int d) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= rows * d) return;
    const float* row = g + (size_t)(k / d) * 2 * d;
    int j = k % d;
    out[k] = sigmoid_f(row[j]) * tanhf(x[k]) + sigmoid_f(row[d + j]) * m[k];
}

// From go = d loss / d out, with `xm` = [x | m] (2·rows·d): writes `out` = [d g (rows·2d) |
// d x (rows·d) | d m (rows·d)], every element.
extern "C" __global__ void item_gate_bwd(const float* g, const float* xm, const float* go, float* out, int rows, int d) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int cells = rows * d;
    if (k >= cells) return;
    size_t base = (size_t)(k / d) * 2 * d;
    int j = k % d;
    float i = sigmoid_f(g[base + j]), f = sigmoid_f(g[base + d + j]), t = tanhf(xm[k]);
    float gk = go[k];
    out[base + j] = gk * t * i * (1.0f - i);
    out[base + d + j] = gk * xm[cells + k] * f * (1.0f - f);
    out[2 * (size_t)cells + k] = gk * i * (1.0f - t * t);
    out[3 * (size_t)cells + k] = gk * f;
}
