// The Kanerva machines' write after their addressing on the GPU (f32), as
// src/kernels/cpu/kanerva_manual.rs's `write` and `write_backward` compute it on the CPU (the
// operands as src/kernels/cuda/kanerva/kanerva_write.rs packs them). Per example b and machine i:
//   u = V_i w_i,  β_i = 1 / (w_iᵀu + η_i²),  R_i' = R_i + β_i δ uᵀ,  V_i' = V_i − β_i u uᵀ.
// r [B, k, c, m], v [B, k, m, m], p [B, k·m + c + k] (each example's row: w | δ | η).
// Built to PTX by build.rs with the `cuda` feature.

// u = V_i w_i into shared memory (every thread calls it; it ends at a barrier), and β_i.
__device__ float gain(const float* vi, const float* w, float eta, float* u, int m) {
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
        float s = 0.0f;
        for (int l = 0; l < m; ++l) s += vi[(size_t)j * m + l] * w[l];
        u[j] = s;
    }
    __syncthreads();
    float q = 0.0f;
    for (int j = 0; j < m; ++j) q += w[j] * u[j];
    return 1.0f / (q + eta * eta);
}

// A block per example and machine (blocks past batch · k return); shared memory: u (m floats).
// out = [R' (B k c m) | V' (B k m m)].
extern "C" __global__ void kanerva_write_fwd(const float* r, const float* v, const float* p, float* out, int batch,
                                             int k, int c, int m) {
    extern __shared__ float u[];
    const int block = blockIdx.x;
    if (block >= batch * k) return;
    const int b = block / k, i = block % k;
    const int width = k * m + c + k;
    const float* row = p + (size_t)b * width;
    const float* w = row + (size_t)i * m;
    const float* delta = row + (size_t)k * m;
    const float eta = row[(size_t)k * m + c + i];
    const float* vi = v + (size_t)block * m * m;
    const float* ri = r + (size_t)block * c * m;
    const float beta = gain(vi, w, eta, u, m);
    float* rn = out + (size_t)block * c * m;
    for (int e = threadIdx.x; e < c * m; e += blockDim.x) {
        const int a = e / m, j = e % m;
        rn[e] = ri[e] + delta[a] * (u[j] * beta);
    }
    float* vn = out + (size_t)batch * k * c * m + (size_t)block * m * m;
    for (int e = threadIdx.x; e < m * m; e += blockDim.x) {
        const int a = e / m, j = e % m;
        vn[e] = vi[e] - u[a] * u[j] * beta;  // (u uᵀ) β: exactly symmetric
    }
}

// A block per example (blocks past the batch return), its machines in turn, since δ̄ sums over
// them. g = [R̄' (B k c m) | V̄' (B k m m)]; out = [V̄ (B k m m) | p̄ (B, k·m + c + k)] (R̄ = R̄' is
// the caller's). Shared memory: u, ū, V̄'u (m floats each), R̄'u and δ̄ (c each).
extern "C" __global__ void kanerva_write_bwd(const float* v, const float* p, const float* g, float* out, int batch,
                                             int k, int c, int m) {
    extern __shared__ float shared[];
    float* u = shared;
    float* gu = u + m;
    float* gvn_u = gu + m;
    float* grn_u = gvn_u + m;
    float* g_delta = grn_u + c;
    const int b = blockIdx.x;
    if (b >= batch) return;
    const int width = k * m + c + k;
    const float* row = p + (size_t)b * width;
    const float* delta = row + (size_t)k * m;
    float* g_row = out + (size_t)batch * k * m * m + (size_t)b * width;
    for (int a = threadIdx.x; a < c; a += blockDim.x) g_delta[a] = 0.0f;
    for (int i = 0; i < k; ++i) {
        const size_t machine = (size_t)b * k + i;
        const float* w = row + (size_t)i * m;
        const float eta = row[(size_t)k * m + c + i];
        const float* vi = v + machine * m * m;
        const float* grn = g + machine * c * m;
        const float* gvn = g + (size_t)batch * k * c * m + machine * m * m;
        float* gvi = out + machine * m * m;
        const float beta = gain(vi, w, eta, u, m);
        // R' = R + β δ uᵀ: δ̄ += β R̄' u, ū = β R̄'ᵀ δ, β̄ = δᵀ R̄' u.
        for (int a = threadIdx.x; a < c; a += blockDim.x) {
            float s = 0.0f;
            for (int j = 0; j < m; ++j) s += grn[(size_t)a * m + j] * u[j];
            grn_u[a] = s;
            g_delta[a] += beta * s;
        }
        // V' = V − β u uᵀ: ū −= β (V̄' + V̄'ᵀ) u, β̄ −= uᵀ V̄' u.
        for (int j = threadIdx.x; j < m; j += blockDim.x) {
            float t = 0.0f, s = 0.0f, st = 0.0f;
            for (int a = 0; a < c; ++a) t += grn[(size_t)a * m + j] * delta[a];
            for (int l = 0; l < m; ++l) {
                s += gvn[(size_t)j * m + l] * u[l];
                st += gvn[(size_t)l * m + j] * u[l];
            }
            gvn_u[j] = s;
            gu[j] = beta * t - beta * s - beta * st;
        }
        __syncthreads();
        float g_beta = 0.0f;
        for (int a = 0; a < c; ++a) g_beta += delta[a] * grn_u[a];
        for (int j = 0; j < m; ++j) g_beta -= u[j] * gvn_u[j];
        // β = 1 / (wᵀu + η²): q̄ = −β² β̄, η̄ = 2η q̄.
        const float g_q = -beta * beta * g_beta;
        if (threadIdx.x == 0) g_row[(size_t)k * m + c + i] = 2.0f * eta * g_q;
        // q = wᵀu: w̄ = q̄ u + Vᵀ ū', ū' = ū + q̄ w; u = V w: V̄ = V̄' + ū' wᵀ.
        for (int e = threadIdx.x; e < m * m; e += blockDim.x) {
            const int a = e / m, j = e % m;
            gvi[e] = gvn[e] + (gu[a] + g_q * w[a]) * w[j];
        }
        for (int j = threadIdx.x; j < m; j += blockDim.x) {
            float s = 0.0f;
            for (int l = 0; l < m; ++l) s += vi[(size_t)l * m + j] * (gu[l] + g_q * w[l]);
            g_row[(size_t)i * m + j] = s + g_q * u[j];
        }
        // The next machine rewrites u, ū and V̄'u.
        __syncthreads();
    }
    for (int a = threadIdx.x; a < c; a += blockDim.x) g_row[(size_t)k * m + a] = g_delta[a];
}
