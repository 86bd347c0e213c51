// A gated write a + w (b − a) on the GPU (f32), as src/kernels/cuda/layers/lerp.rs computes it on
// the CPU: `a` and `b` have `n` elements laid out alike, `w` one number per run of `per` elements
// (a batch's per-example weights, or one for all). A thread per element. Built to PTX and SASS
// by build.rs with the `cuda` feature.

// out = a + w (b − a), in the order of the spec's `a + w * (b - a)`.
extern "C" __global__ void lerp_fwd(const float* a, const float* b, const float* w, float* out, int n, int per) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = a[i] + w[i / per] * (b[i] - a[i]);
}

// out = [d a (n) | d b (n)] from g = d loss / d out: d b = w g, d a = g − w g (the sum of the
// add's g and the subtraction's −w g, as candle's backward of the three ops adds them).
extern "C" __global__ void lerp_bwd(const float* w, const float* g, float* out, int n, int per) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float wg = w[i / per] * g[i];
    out[i] = g[i] - wg;
    out[n + i] = wg;
}
