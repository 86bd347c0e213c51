// The element-wise half of a GRU cell on the GPU (f32), as src/kernels/cuda/layers/gru_cell.rs
// computes it on the CPU (kernels::gru's formulas): `gi` and `gh` are [batch, 3·hidden], the input
// and recurrent halves laid out per example as [r, z, n] (PyTorch's order); `h` and `h'` are
// [batch, hidden]:
//   r = σ(gi_r + gh_r),  z = σ(gi_z + gh_z),  n = tanh(gi_n + r gh_n),  h' = n + z (h − n).
// One thread per (example, unit). Built to PTX by build.rs with the `cuda` feature.

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

extern "C" __global__ void gru_cell_fwd(const float* gi, const float* gh, const float* h, float* out, int batch,
                                        int hidden) {
    const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (size_t)batch * hidden) return;
    const size_t ex = k / hidden, j = k % hidden, row = ex * 3 * hidden;
    const float r = sigmoid_f(gi[row + j] + gh[row + j]);
    const float z = sigmoid_f(gi[row + hidden + j] + gh[row + hidden + j]);
    const float n = tanhf(gi[row + 2 * hidden + j] + r * gh[row + 2 * hidden + j]);
    out[k] = n + z * (h[k] - n);
}

// From g = d loss / d h': out = [d gi (batch 3·hidden) | d gh (batch 3·hidden) | d h (batch
// hidden)], each laid out as its operand.
extern "C" __global__ void gru_cell_bwd(const float* gi, const float* gh, const float* h, const float* g, float* out,
                                        int batch, int hidden) {
    const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t units = (size_t)batch * hidden;
    if (k >= units) return;
    const size_t ex = k / hidden, j = k % hidden, row = ex * 3 * hidden;
    const float r = sigmoid_f(gi[row + j] + gh[row + j]);
    const float z = sigmoid_f(gi[row + hidden + j] + gh[row + hidden + j]);
    const float nh = gh[row + 2 * hidden + j];
    const float n = tanhf(gi[row + 2 * hidden + j] + r * nh);
    const float gk = g[k];
    const float gn = gk * (1.0f - z) * (1.0f - n * n);
    const float gz = gk * (h[k] - n) * z * (1.0f - z);
    const float gr = gn * nh * r * (1.0f - r);
    float* g_gi = out + row;
    float* g_gh = out + 3 * units + row;
    g_gi[j] = gr;
    g_gi[hidden + j] = gz;
    g_gi[2 * hidden + j] = gn;
    g_gh[j] = gr;
    g_gh[hidden + j] = gz;
    g_gh[2 * hidden + j] = gn * r;
    out[6 * units + k] = gk * z;
}
