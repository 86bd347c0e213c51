// NAM's write rule on the GPU (f32), as src/kernels/cuda/nam/nam_write.rs computes it on the CPU
// (with kernels::nam_manual's per-memory formulas), in both of its layouts. One block per memory.
//
// The tape (NAM-TM's tapeWrite). Each row (an example's head) holds a tape T
// [len, d], a position p [len] and the packed q = [v (d) | pw | pe]:
//   old = Tᵀ p,  δ = pw v − pe old,  T' = T + p ⊗ δ;
// and from g = d loss / d T':
//   gδ = gᵀ p,  d v = pw gδ,  d pw = v · gδ,  d pe = −old · gδ,  g_old = −pe gδ,
//   d T = g + p ⊗ g_old,  d p[l] = g[l] · δ + T[l] · g_old.
// One block per row, its threads over the d features (a multiple of 32).
//
// The matrix (LSAM's namWR). Each memory M [dv, dk] is written at a unit key k [dk] with the
// packed q = [v (dv) | pw | pe]:
//   mk = M k,  δ = pw v − pe mk,  M' = M + δ ⊗ k;
// and from g = d loss / d M':
//   gδ = g k,  d v = pw gδ,  d pw = v · gδ,  d pe = −mk · gδ,  g_mk = −pe gδ,
//   d M = g + g_mk ⊗ k,  d k = gᵀ δ + Mᵀ g_mk.
// One block per memory, a warp per row of M (its lanes over the key's columns).
//
// Built to PTX by build.rs with the `cuda` feature.

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The block's d pw and d pe into out[0], out[1]: each thread's shares summed over its warp, then
// thread 0 adds the warps' (partial: two floats per warp of shared memory). Every thread calls it.
__device__ void tape_gate_grads(float gpw, float gpe, float* partial, float* out) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
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
        out[0] = sw;
        out[1] = se;
    }
}

// Per cell: d p[l] = g[l] · δ + T[l] · g_old, a warp per cell, its lanes over the features.
__device__ void tape_position_grads(const float* G, const float* T, const float* delta, const float* g_old, float* gp,
                                    int len, int d) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int l = warp; l < len; l += warps) {
        float acc = 0.0f;
        for (int c = lane; c < d; c += 32) acc += G[(size_t)l * d + c] * delta[c] + T[(size_t)l * d + c] * g_old[c];
        acc = warp_sum(acc);
        if (lane == 0) gp[l] = acc;
    }
}

// Row r of a tape backward: its operands and where its gradients go in the packed output
// out = [d T (rows len d) | d p (rows len) | d q (rows (d + 2))].
struct TapeBwdRow {
    const float *T, *P, *Q, *G;
    float *gT, *gp, *gq;
    float pw, pe;
};

__device__ TapeBwdRow tape_bwd_row(const float* t, const float* p, const float* q, const float* g, float* out,
                                   int rows, int len, int d, int r) {
    const size_t tape = (size_t)len * d;
    const float* Q = q + (size_t)r * (d + 2);
    return {t + r * tape,
            p + (size_t)r * len,
            Q,
            g + r * tape,
            out + r * tape,
            out + (size_t)rows * tape + (size_t)r * len,
            out + (size_t)rows * tape + (size_t)rows * len + (size_t)r * (d + 2),
            Q[d],
            Q[d + 1]};
}

// Feature c's gradients from gδ = Σ_l p_l g_lc and old = Σ_l p_l T_lc: d v, this thread's shares of
// d pw and d pe, δ and g_old.
__device__ void tape_feature_grads(const TapeBwdRow& w, int c, float gd, float old, float& gpw, float& gpe,
                                   float* delta, float* g_old) {
    w.gq[c] = w.pw * gd;
    gpw += w.Q[c] * gd;
    gpe -= old * gd;
    delta[c] = w.pw * w.Q[c] - w.pe * old;
    g_old[c] = -w.pe * gd;
}

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


// out = [d T (rows len d) | d p (rows len) | d q (rows (d + 2))]. Dynamic shared memory:
// δ and g_old (2 d floats) and two partial sums per warp.
extern "C" __global__ void tape_write_bwd(const float* t, const float* p, const float* q, const float* g, float* out,
                                          int rows, int len, int d) {
    extern __shared__ float shared[];
    float* delta = shared;
    float* g_old = shared + d;
    float* partial = shared + 2 * d;  // [2][warps]
    if ((int)blockIdx.x >= rows) return;
    const TapeBwdRow w = tape_bwd_row(t, p, q, g, out, rows, len, d, blockIdx.x);
    const float *T = w.T, *P = w.P, *G = w.G;

    // Per feature: gδ, old, then its gradients and d T.
    float gpw = 0.0f, gpe = 0.0f;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float gd = 0.0f, old = 0.0f;
        for (int l = 0; l < len; ++l) {
            gd += P[l] * G[(size_t)l * d + c];
            old += P[l] * T[(size_t)l * d + c];
        }
        tape_feature_grads(w, c, gd, old, gpw, gpe, delta, g_old);
        for (int l = 0; l < len; ++l) w.gT[(size_t)l * d + c] = G[(size_t)l * d + c] + P[l] * g_old[c];
    }
    tape_gate_grads(gpw, gpe, partial, w.gq + d);
    tape_position_grads(G, T, delta, g_old, w.gp, len, d);
}

// tape_write_bwd with the tape's cells split among the block's warps (nam_write::
// tape_split_launch_shape: a warp per cell up to eight): each warp sums g·p and T·p over its cells
// for every feature, the block adds the warps' sums, and then as tape_write_bwd. One warp
// walking every cell alone was latency-bound (NAM-TM's 32 features: 22.9 µs a launch on the
// H100). Dynamic shared memory: the warps' sums (2 warps d floats), δ and g_old (2 d), and two
// partial sums per warp.
extern "C" __global__ void tape_write_bwd_split(const float* t, const float* p, const float* q, const float* g,
                                                float* out, int rows, int len, int d) {
    extern __shared__ float shared[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    float* part_gd = shared;                // [warps][d]
    float* part_old = part_gd + warps * d;  // [warps][d]
    float* delta = part_old + warps * d;
    float* g_old = delta + d;
    float* partial = g_old + d;  // [2][warps]
    if ((int)blockIdx.x >= rows) return;
    const TapeBwdRow w = tape_bwd_row(t, p, q, g, out, rows, len, d, blockIdx.x);
    const float *T = w.T, *P = w.P, *G = w.G;
    const size_t tape = (size_t)len * d;

    // This warp's cells, its lanes along the features.
    for (int c = lane; c < d; c += 32) {
        float gd = 0.0f, old = 0.0f;
        for (int l = warp; l < len; l += warps) {
            gd += P[l] * G[(size_t)l * d + c];
            old += P[l] * T[(size_t)l * d + c];
        }
        part_gd[warp * d + c] = gd;
        part_old[warp * d + c] = old;
    }
    __syncthreads();

    // Per feature: gδ and old over every cell, then as tape_write_bwd.
    float gpw = 0.0f, gpe = 0.0f;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float gd = 0.0f, old = 0.0f;
        for (int w = 0; w < warps; ++w) {
            gd += part_gd[w * d + c];
            old += part_old[w * d + c];
        }
        tape_feature_grads(w, c, gd, old, gpw, gpe, delta, g_old);
    }
    tape_gate_grads(gpw, gpe, partial, w.gq + d);

    // d T = g + p g_old, every thread along the tape.
    for (size_t e = threadIdx.x; e < tape; e += blockDim.x) w.gT[e] = G[e] + P[e / d] * g_old[e % d];
    tape_position_grads(G, T, delta, g_old, w.gp, len, d);
}

extern "C" __global__ void nam_write_fwd(const float* m, const float* k, const float* q, float* out, int count, int dv,
                                         int dk) {
    const int i = blockIdx.x;
    if (i >= count) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const size_t size = (size_t)dv * dk;
    const float* M = m + i * size;
    const float* K = k + (size_t)i * dk;
    const float* Q = q + (size_t)i * (dv + 2);
    float* O = out + i * size;
    const float pw = Q[dv], pe = Q[dv + 1];
    for (int r = warp; r < dv; r += warps) {
        const float* row = M + (size_t)r * dk;
        float mk = 0.0f;
        for (int c = lane; c < dk; c += 32) mk += row[c] * K[c];
        mk = warp_sum(mk);
        const float delta = pw * Q[r] - pe * mk;
        for (int c = lane; c < dk; c += 32) O[(size_t)r * dk + c] = row[c] + delta * K[c];
    }
}

// out = [d M (count dv dk) | d k (count dk) | d q (count (dv + 2))]. Dynamic shared memory:
// each warp's partial d k (warps dk floats) and two partial sums per warp.
extern "C" __global__ void nam_write_bwd(const float* m, const float* k, const float* q, const float* g, float* out,
                                         int count, int dv, int dk) {
    extern __shared__ float shared[];
    const int i = blockIdx.x;
    if (i >= count) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    float* gk_part = shared + (size_t)warp * dk;  // this warp's own, read by all after the barrier
    float* partial = shared + (size_t)warps * dk;  // [2][warps]
    const size_t size = (size_t)dv * dk;
    const float* M = m + i * size;
    const float* K = k + (size_t)i * dk;
    const float* Q = q + (size_t)i * (dv + 2);
    const float* G = g + i * size;
    float* gM = out + i * size;
    float* gk = out + (size_t)count * size + (size_t)i * dk;
    float* gq = out + (size_t)count * size + (size_t)count * dk + (size_t)i * (dv + 2);
    const float pw = Q[dv], pe = Q[dv + 1];

    for (int c = lane; c < dk; c += 32) gk_part[c] = 0.0f;
    float gpw = 0.0f, gpe = 0.0f;  // lane 0's
    for (int r = warp; r < dv; r += warps) {
        const float* row = M + (size_t)r * dk;
        const float* grow = G + (size_t)r * dk;
        float gd = 0.0f, mk = 0.0f;
        for (int c = lane; c < dk; c += 32) {
            gd += grow[c] * K[c];
            mk += row[c] * K[c];
        }
        gd = warp_sum(gd);
        mk = warp_sum(mk);
        const float delta = pw * Q[r] - pe * mk, g_mk = -pe * gd;
        if (lane == 0) {
            gq[r] = pw * gd;
            gpw += Q[r] * gd;
            gpe -= mk * gd;
        }
        for (int c = lane; c < dk; c += 32) {
            gk_part[c] += grow[c] * delta + row[c] * g_mk;
            gM[(size_t)r * dk + c] = grow[c] + g_mk * K[c];
        }
    }
    if (lane == 0) {
        partial[warp] = gpw;
        partial[warps + warp] = gpe;
    }
    __syncthreads();
    for (int c = threadIdx.x; c < dk; c += blockDim.x) {
        float s = 0.0f;
        for (int w = 0; w < warps; ++w) s += shared[(size_t)w * dk + c];
        gk[c] = s;
    }
    if (threadIdx.x == 0) {
        float sw = 0.0f, se = 0.0f;
        for (int w = 0; w < warps; ++w) {
            sw += partial[w];
            se += partial[warps + w];
        }
        gq[dv] = sw;
        gq[dv + 1] = se;
    }
}
