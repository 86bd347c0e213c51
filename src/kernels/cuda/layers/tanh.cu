// tanh on the GPU (f32), as src/kernels/cuda/layers/tanh.rs computes it on the CPU: the forward,
// and the backward from the forward's output, d x = g (1 - y²). Grid-stride over `n` elements,
// blocks of 256 threads. Built to PTX by build.rs with the `cuda` feature.

extern "C" __global__ void tanh_fwd(const float* x, float* y, int n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = tanhf(x[i]);
}

extern "C" __global__ void tanh_bwd(const float* y, const float* g, float* dx, int n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x)
        dx[i] = g[i] * (1.0f - y[i] * y[i]);
}
