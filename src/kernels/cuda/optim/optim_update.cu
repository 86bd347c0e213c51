// The optimisers' updates on the GPU (f32), one kernel per parameter, the same operations in
// the same order as src/train/optim/*.rs (PyTorch's update rules). Each reads the gradient g,
// clamped to [-limit, limit] first when `clamp` is set (`clip_value`, PyTorch's
// clip_grad_value_), and rewrites the parameter p and its state buffers in place, n elements
// each, contiguous. Grid-stride loops; built to PTX by build.rs with the `cuda` feature.

// max then min, as the CPU's `v.max(lo).min(hi)`: fmaxf, like Rust's f32::max, returns the
// operand that is not NaN.
__device__ __forceinline__ float clamped(float g, int clamp, float limit) {
    return clamp ? fminf(fmaxf(g, -limit), limit) : g;
}

// RMSprop, not centred: v = alpha sq + (1 - alpha) g^2; step = g / (sqrt(v) + eps);
// with momentum u = mu b + step (b = u), without u = step; p = p - lr u.
extern "C" __global__ void rmsprop_update(const float* g, float* p, float* sq, float* b, int n, int with_momentum,
                                          int clamp, float alpha, float one_minus_alpha, float eps, float lr,
                                          float mu, float limit) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x) {
        float gi = clamped(g[i], clamp, limit);
        float v = sq[i] * alpha + gi * gi * one_minus_alpha;
        float step = gi / (sqrtf(v) + eps);
        float u = with_momentum ? b[i] * mu + step : step;
        sq[i] = v;
        if (with_momentum) b[i] = u;
        p[i] = p[i] - u * lr;
    }
}

// Adam as candle-nn's AdamW: m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
// p = p (1 - lr wd) - lr (m c0) / (sqrt(v c1) + eps), with the bias corrections c0, c1 of this
// update read from device memory (`corrections`, two elements), which the host rewrites before
// every update: a replayed CUDA graph must not bake in the values of the step it captured.
extern "C" __global__ void adam_update(const float* g, const float* corrections, float* p, float* m, float* v, int n,
                                       int clamp, float beta1, float one_minus_beta1, float beta2,
                                       float one_minus_beta2, float eps, float lr, float decay, float limit) {
    float c0 = corrections[0], c1 = corrections[1];
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x) {
        float gi = clamped(g[i], clamp, limit);
        float mi = m[i] * beta1 + gi * one_minus_beta1;
        float vi = v[i] * beta2 + gi * gi * one_minus_beta2;
        float adjusted = (mi * c0) / (sqrtf(vi * c1) + eps);
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - adjusted * lr;
    }
}

// SGD with momentum (the buffer starts at zeros, so the first update makes it g): b = mu b + g;
// p = p - lr b.
extern "C" __global__ void sgd_momentum_update(const float* g, float* p, float* b, int n, int clamp, float lr,
                                               float mu, float limit) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x) {
        float u = b[i] * mu + clamped(g[i], clamp, limit);
        b[i] = u;
        p[i] = p[i] - u * lr;
    }
}
