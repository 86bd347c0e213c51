// The element-wise half of an LSTM cell on the GPU (f32), as src/kernels/cuda/layers/lstm_cell.rs
// computes it on the CPU: `pre` is [batch, 4·hidden], the gates' pre-activations laid out per
// example as [i, f, g, o] (PyTorch's order); `c`, `c_next` and `h_next` are [batch, hidden].
// One thread per (example, unit). Built to PTX by build.rs with the `cuda` feature.

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

// c' = σ(f) c + σ(i) tanh(g)
extern "C" __global__ void lstm_state_fwd(const float* pre, const float* c, float* c_next, int batch, int hidden) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= batch * hidden) return;
    int ex = k / hidden, j = k % hidden;
    const float* p = pre + (size_t)ex * 4 * hidden;
    c_next[k] = sigmoid_f(p[hidden + j]) * c[k] + sigmoid_f(p[j]) * tanhf(p[2 * hidden + j]);
}

// h' = σ(o) tanh(c')
extern "C" __global__ void lstm_out_fwd(const float* pre, const float* c_next, float* h_next, int batch, int hidden) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= batch * hidden) return;
    int ex = k / hidden, j = k % hidden;
    h_next[k] = sigmoid_f(pre[(size_t)ex * 4 * hidden + 3 * hidden + j]) * tanhf(c_next[k]);
}

// From g = d loss / d c': writes `out` = [d pre (i, f, g; o zero) | d c], [batch, 5·hidden].
extern "C" __global__ void lstm_state_bwd(const float* pre, const float* c, const float* g, float* out, int batch, int hidden) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= batch * hidden) return;
    int ex = k / hidden, j = k % hidden;
    const float* p = pre + (size_t)ex * 4 * hidden;
    float* o = out + (size_t)ex * 5 * hidden;
    float i = sigmoid_f(p[j]), f = sigmoid_f(p[hidden + j]), t = tanhf(p[2 * hidden + j]);
    o[j] = g[k] * t * i * (1.0f - i);
    o[hidden + j] = g[k] * c[k] * f * (1.0f - f);
    o[2 * hidden + j] = g[k] * i * (1.0f - t * t);
    o[3 * hidden + j] = 0.0f;
    o[4 * hidden + j] = g[k] * f;
}

// From g = d loss / d h': writes `out` = [d pre (o only; i, f, g zero) | d c'], [batch, 5·hidden].
extern "C" __global__ void lstm_out_bwd(const float* pre, const float* c_next, const float* g, float* out, int batch, int hidden) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= batch * hidden) return;
    int ex = k / hidden, j = k % hidden;
    float* o = out + (size_t)ex * 5 * hidden;
    float og = sigmoid_f(pre[(size_t)ex * 4 * hidden + 3 * hidden + j]), t = tanhf(c_next[k]);
    o[j] = 0.0f;
    o[hidden + j] = 0.0f;
    o[2 * hidden + j] = 0.0f;
    o[3 * hidden + j] = g[k] * t * og * (1.0f - og);
    o[4 * hidden + j] = g[k] * og * (1.0f - t * t);
}
