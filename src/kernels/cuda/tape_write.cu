// NAM-TM's tape write on the GPU (f32), as src/kernels/tape_write_op.rs computes it on the CPU
// (with kernels::nam_manual's per-row formulas). Each row (an example's head) holds a tape T
// [len, d], a position p [len] and the packed q = [v (d) | pw | pe]:
//   old = Tᵀ p,  δ = pw v − pe old,  T' = T + p ⊗ δ;
// and from g = d loss / d T':
//   gδ = gᵀ p,  d v = pw gδ,  d pw = v · gδ,  d pe = −old · gδ,  g_old = −pe gδ,
//   d T = g + p ⊗ g_old,  d p[l] = g[l] · δ + T[l] · g_old.
// One block per row, its threads over the d features (a multiple of 32). Built to PTX by
// build.rs with the `cuda` feature.

extern "C" __global__ void tape_write_fwd(const float* t, const float* p, const float* q, float* out, int rows,
                                          int len, int d) {
    const int r = blockIdx.x;
    if (r >= rows) return;
    const size_t tape = (size_t)len * d;
    const float* T = t + r * tape;
    const float* P = p + (size_t)r * len;
    const float* Q = q + (size_t)r * (d + 2);
    float* O = out + r * tape;
    const float pw = Q[d], pe = Q[d + 1];
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float old = 0.0f;
        for (int l = 0; l < len; ++l) old += P[l] * T[(size_t)l * d + c];
        const float delta = pw * Q[c] - pe * old;
        for (int l = 0; l < len; ++l) O[(size_t)l * d + c] = T[(size_t)l * d + c] + P[l] * delta;
    }
}

__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// out = [d T (rows len d) | d p (rows len) | d q (rows (d + 2))]. Dynamic shared memory:
// δ and g_old (2 d floats) and two partial sums per warp.
extern "C" __global__ void tape_write_bwd(const float* t, const float* p, const float* q, const float* g, float* out,
                                          int rows, int len, int d) {
    extern __shared__ float shared[];
    float* delta = shared;
    float* g_old = shared + d;
    float* partial = shared + 2 * d;  // [2][warps]
    const int r = blockIdx.x;
    if (r >= rows) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const size_t tape = (size_t)len * d;
    const float* T = t + r * tape;
    const float* P = p + (size_t)r * len;
    const float* Q = q + (size_t)r * (d + 2);
    const float* G = g + r * tape;
    float* gT = out + r * tape;
    float* gp = out + (size_t)rows * tape + (size_t)r * len;
    float* gq = out + (size_t)rows * tape + (size_t)rows * len + (size_t)r * (d + 2);
    const float pw = Q[d], pe = Q[d + 1];

    // Per feature: gδ, old, d v, this thread's share of d pw and d pe, δ, g_old and d T.
    float gpw = 0.0f, gpe = 0.0f;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float gd = 0.0f, old = 0.0f;
        for (int l = 0; l < len; ++l) {
            gd += P[l] * G[(size_t)l * d + c];
            old += P[l] * T[(size_t)l * d + c];
        }
        gq[c] = pw * gd;
        gpw += Q[c] * gd;
        gpe -= old * gd;
        delta[c] = pw * Q[c] - pe * old;
        const float go = -pe * gd;
        g_old[c] = go;
        for (int l = 0; l < len; ++l) gT[(size_t)l * d + c] = G[(size_t)l * d + c] + P[l] * go;
    }
    gpw = warp_sum(gpw);
    gpe = warp_sum(gpe);
    if (lane == 0) {
        partial[warp] = gpw;
        partial[warps + warp] = gpe;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float sw = 0.0f, se = 0.0f;
        for (int w = 0; w < warps; ++w) {
            sw += partial[w];
            se += partial[warps + w];
        }
        gq[d] = sw;
        gq[d + 1] = se;
    }

    // Per cell: d p[l] = g[l] · δ + T[l] · g_old, a warp per cell, its lanes over the features.
    for (int l = warp; l < len; l += warps) {
        float acc = 0.0f;
        for (int c = lane; c < d; c += 32) acc += G[(size_t)l * d + c] * delta[c] + T[(size_t)l * d + c] * g_old[c];
        acc = warp_sum(acc);
        if (lane == 0) gp[l] = acc;
    }
}
