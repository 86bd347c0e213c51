// The Kanerva machines' addressing and readout on the GPU (f32 in and out, the solves in f64),
// as src/kernels/kanerva_manual.rs's `address`, `mix` and `address_backward` compute them on the
// CPU (the operands as src/kernels/kanerva_address_op.rs packs them). Per example b and machine i:
//   G_i = R_iᵀR_i + λI,  w_i = G_i⁻¹ R_iᵀ z,  p_i = R_i w_i,  γ_i = η_i⁻² / Σ_j η_j⁻²,  μ = Σ_i γ_i p_i.
// r [B, k, c, m]; q [B, c + k] (each example's row: z | η). A block per example, its machines in
// turn (μ and z̄ sum over them). A G_i that is not positive definite (non-finite means) gives NaN
// for the example's outputs: a graph replay cannot stop to report it; the NaN fails the trial.
// Built to PTX by build.rs with the `cuda` feature.

// The block's shared memory: the factor L (m² doubles) and a right-hand side y (m doubles), then
// w and a (m floats each), p, R a and the sums over machines (c floats each), γ̄ (k floats).
struct Work {
    double* L;
    double* y;
    float* w;
    float* a;
    float* p;
    float* ra;
    float* sum;
    float* g_gamma;
};

__device__ Work carve(int k, int c, int m) {
    extern __shared__ double shared[];
    Work s;
    s.L = shared;
    s.y = s.L + (size_t)m * m;
    s.w = (float*)(s.y + m);
    s.a = s.w + m;
    s.p = s.a + m;
    s.ra = s.p + c;
    s.sum = s.ra + c;
    s.g_gamma = s.sum + c;
    return s;
}

// L = R_iᵀR_i + λI (lower triangle and all) and y = R_iᵀz, in f64.
__device__ void gram_and_rhs(Work s, const float* ri, const float* z, int c, int m, float lambda) {
    for (int e = threadIdx.x; e < m * m; e += blockDim.x) {
        const int p = e / m, q = e % m;
        double g = p == q ? (double)lambda : 0.0;
        for (int a = 0; a < c; ++a) g += (double)ri[(size_t)a * m + p] * (double)ri[(size_t)a * m + q];
        s.L[e] = g;
    }
    for (int p = threadIdx.x; p < m; p += blockDim.x) {
        double t = 0.0;
        for (int a = 0; a < c; ++a) t += (double)ri[(size_t)a * m + p] * (double)z[a];
        s.y[p] = t;
    }
    __syncthreads();
}

// L ← its Cholesky factor (left-looking, a column at a time, as spd_solve.cu); returns whether
// the matrix was positive definite (every thread gets the same answer).
__device__ bool cholesky(double* L, int m) {
    bool ok = true;
    for (int j = 0; j < m; ++j) {
        for (int i = j + threadIdx.x; i < m; i += blockDim.x) {
            double t = L[(size_t)i * m + j];
            for (int p = 0; p < j; ++p) t -= L[(size_t)i * m + p] * L[(size_t)j * m + p];
            L[(size_t)i * m + j] = t;
        }
        __syncthreads();
        const double d = L[(size_t)j * m + j];
        ok = ok && d > 0.0 && !isinf(d);
        const double root = sqrt(d);
        __syncthreads();  // every thread has read the diagonal before it is overwritten
        for (int i = j + threadIdx.x; i < m; i += blockDim.x) L[(size_t)i * m + j] = i == j ? root : L[(size_t)i * m + j] / root;
        __syncthreads();
    }
    return ok;
}

// y ← (L Lᵀ)⁻¹ y: L z = y, then Lᵀ x = z. One thread works (m is a machine's few columns); the
// others wait at the barrier after.
__device__ void solve(const double* L, double* y, int m) {
    if (threadIdx.x == 0) {
        for (int i = 0; i < m; ++i) {
            double t = y[i];
            for (int p = 0; p < i; ++p) t -= L[(size_t)i * m + p] * y[p];
            y[i] = t / L[(size_t)i * m + i];
        }
        for (int i = m - 1; i >= 0; --i) {
            double t = y[i];
            for (int p = i + 1; p < m; ++p) t -= L[(size_t)p * m + i] * y[p];
            y[i] = t / L[(size_t)i * m + i];
        }
    }
    __syncthreads();
}

// γ_i from the example's noises.
__device__ float machine_weight(const float* eta, int k, int i) {
    float total = 0.0f;
    for (int j = 0; j < k; ++j) total += 1.0f / (eta[j] * eta[j]);
    return 1.0f / (eta[i] * eta[i]) / total;
}

// out = [w (B k m) | μ (B c)].
extern "C" __global__ void kanerva_address_fwd(const float* r, const float* q, float* out, int batch, int k, int c,
                                               int m, float lambda) {
    const int b = blockIdx.x;
    if (b >= batch) return;
    Work s = carve(k, c, m);
    const float* z = q + (size_t)b * (c + k);
    const float* eta = z + c;
    for (int a = threadIdx.x; a < c; a += blockDim.x) s.sum[a] = 0.0f;
    bool ok = true;
    for (int i = 0; i < k; ++i) {
        const float* ri = r + ((size_t)b * k + i) * c * m;
        gram_and_rhs(s, ri, z, c, m, lambda);
        ok = cholesky(s.L, m) && ok;
        solve(s.L, s.y, m);
        float* w_out = out + ((size_t)b * k + i) * m;
        for (int p = threadIdx.x; p < m; p += blockDim.x) {
            s.w[p] = (float)s.y[p];
            w_out[p] = s.w[p];
        }
        __syncthreads();
        const float gamma = machine_weight(eta, k, i);
        for (int a = threadIdx.x; a < c; a += blockDim.x) {
            float t = 0.0f;
            for (int p = 0; p < m; ++p) t += ri[(size_t)a * m + p] * s.w[p];
            s.sum[a] += gamma * t;
        }
        // The next machine rewrites L, y and w.
        __syncthreads();
    }
    const float nan = __int_as_float(0x7fc00000);
    float* mu = out + (size_t)batch * k * m + (size_t)b * c;
    for (int a = threadIdx.x; a < c; a += blockDim.x) mu[a] = ok ? s.sum[a] : nan;
    if (!ok) {
        for (int e = threadIdx.x; e < k * m; e += blockDim.x) out[(size_t)b * k * m + e] = nan;
    }
}

// g = [w̄ (B k m) | μ̄ (B c)]; out = [R̄ (B k c m) | q̄ (B, c + k)]. With ḡ_p = γ_i μ̄ and
// a = G_i⁻¹ (R_iᵀ ḡ_p + w̄_i): R̄_i = (ḡ_p − R_i a) w_iᵀ + (z − p_i) aᵀ, z̄ = Σ_i R_i a, and η̄ from
// γ̄_i = μ̄ · p_i.
extern "C" __global__ void kanerva_address_bwd(const float* r, const float* q, const float* g, float* out, int batch,
                                               int k, int c, int m, float lambda) {
    const int b = blockIdx.x;
    if (b >= batch) return;
    Work s = carve(k, c, m);
    const float* z = q + (size_t)b * (c + k);
    const float* eta = z + c;
    const float* g_mu = g + (size_t)batch * k * m + (size_t)b * c;
    float* g_q = out + (size_t)batch * k * c * m + (size_t)b * (c + k);
    for (int a = threadIdx.x; a < c; a += blockDim.x) s.sum[a] = 0.0f;
    bool ok = true;
    for (int i = 0; i < k; ++i) {
        const float* ri = r + ((size_t)b * k + i) * c * m;
        const float* g_w = g + ((size_t)b * k + i) * m;
        float* g_ri = out + ((size_t)b * k + i) * c * m;
        const float gamma = machine_weight(eta, k, i);
        gram_and_rhs(s, ri, z, c, m, lambda);
        ok = cholesky(s.L, m) && ok;
        solve(s.L, s.y, m);
        for (int p = threadIdx.x; p < m; p += blockDim.x) s.w[p] = (float)s.y[p];
        __syncthreads();
        // p_i = R_i w_i; a's right-hand side R_iᵀ ḡ_p + w̄_i (in y: w is kept in floats).
        for (int a = threadIdx.x; a < c; a += blockDim.x) {
            float t = 0.0f;
            for (int p = 0; p < m; ++p) t += ri[(size_t)a * m + p] * s.w[p];
            s.p[a] = t;
        }
        for (int p = threadIdx.x; p < m; p += blockDim.x) {
            double t = (double)g_w[p];
            for (int a = 0; a < c; ++a) t += (double)ri[(size_t)a * m + p] * (double)(gamma * g_mu[a]);
            s.y[p] = t;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            float t = 0.0f;
            for (int a = 0; a < c; ++a) t += g_mu[a] * s.p[a];
            s.g_gamma[i] = t;
        }
        solve(s.L, s.y, m);
        for (int p = threadIdx.x; p < m; p += blockDim.x) s.a[p] = (float)s.y[p];
        __syncthreads();
        for (int a = threadIdx.x; a < c; a += blockDim.x) {
            float t = 0.0f;
            for (int p = 0; p < m; ++p) t += ri[(size_t)a * m + p] * s.a[p];
            s.ra[a] = t;
            s.sum[a] += t;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < c * m; e += blockDim.x) {
            const int a = e / m, p = e % m;
            g_ri[e] = (gamma * g_mu[a] - s.ra[a]) * s.w[p] + (z[a] - s.p[a]) * s.a[p];
        }
        // The next machine rewrites L, y, w, p, a and R a.
        __syncthreads();
    }
    const float nan = __int_as_float(0x7fc00000);
    for (int a = threadIdx.x; a < c; a += blockDim.x) g_q[a] = ok ? s.sum[a] : nan;
    // η̄_i = −2 π̄_i / η_i³ with π_i = η_i⁻², π̄_i = (γ̄_i − Σ_j γ̄_j γ_j) / Σ_j π_j.
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        float total = 0.0f, mean = 0.0f;
        for (int j = 0; j < k; ++j) {
            total += 1.0f / (eta[j] * eta[j]);
            mean += s.g_gamma[j] * machine_weight(eta, k, j);
        }
        const float g_pi = (s.g_gamma[i] - mean) / total;
        g_q[c + i] = ok ? -2.0f * g_pi / (eta[i] * eta[i] * eta[i]) : nan;
    }
    if (!ok) {
        for (size_t e = threadIdx.x; e < (size_t)k * c * m; e += blockDim.x) out[(size_t)b * k * c * m + e] = nan;
    }
}
