// The Kanerva machines' addressing and readout on the GPU (f32 in and out, the solves in f64),
// as src/kernels/cpu/kanerva_manual.rs's `address`, `mix` and `address_backward` compute them on
// the CPU (the operands as src/kernels/cuda/kanerva/kanerva_address.rs packs them). Per example b
// and machine i:   G_i = R_iᵀR_i + λI,  w_i = G_i⁻¹ R_iᵀ z,  p_i = R_i w_i,  γ_i = η_i⁻² / Σ_j
// η_j⁻²,  μ = Σ_i γ_i p_i. r [B, k, c, m]; q [B, c + k] (each example's row: z | η).
//
// Each way, two launches. The first has a block per example and machine (B·k of them, so that
// PKM's few examples still fill the GPU): it writes what belongs to its machine alone (w_i, R̄_i)
// and, into `parts`, its share of what sums over the machines (γ_i p_i; R_i a and γ̄_i) with
// whether its G_i was positive definite. The second (`*_sum`, a warp per example) adds the shares
// in machine order, so that the sums do not depend on scheduling. A G_i that is not positive
// definite (non-finite means) gives NaN for all of its example's outputs: a graph replay cannot
// stop to report it; the NaN fails the trial.
// Built to PTX by build.rs with the `cuda` feature.

// The block's shared memory: L (m² doubles: the factor's strict lower triangle, G's diagonal),
// the factor's diagonal and the right-hand sides of w and a (m doubles each), then p_i and R_i a
// (c floats each, the backward's).
struct Work {
    double* L;
    double* diag;
    double* y;
    double* y_a;
    float* p;
    float* ra;
};

__device__ Work carve(int c, int m) {
    extern __shared__ double shared[];
    Work s;
    s.L = shared;
    s.diag = s.L + (size_t)m * m;
    s.y = s.diag + m;
    s.y_a = s.y + m;
    s.p = (float*)(s.y_a + m);
    s.ra = s.p + c;
    return s;
}

// A machine's share in `parts`: whether its G_i was positive definite (1 or 0), then what sums
// over the machines (forward: γ_i p_i, c floats; backward: γ̄_i, then R_i a, c floats).
__device__ int part_width(bool backward, int c) { return backward ? c + 2 : c + 1; }

__device__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Row and column (col ≤ row) of entry e of a lower triangle stored row by row.
__device__ void lower_entry(int e, int* row, int* col) {
    int p = (int)((sqrt(8.0 * e + 1.0) - 1.0) / 2.0);
    while (p * (p + 1) / 2 > e) --p;
    while ((p + 1) * (p + 2) / 2 <= e) ++p;
    *row = p;
    *col = e - p * (p + 1) / 2;
}

// L's lower triangle = that of R_iᵀR_i + λI, in f64 (the factorisation reads no other entry).
__device__ void gram(double* L, const float* ri, int c, int m, float lambda) {
    for (int e = threadIdx.x; e < m * (m + 1) / 2; e += blockDim.x) {
        int p, q;
        lower_entry(e, &p, &q);
        double g = p == q ? (double)lambda : 0.0;
        for (int a = 0; a < c; ++a) g += (double)ri[(size_t)a * m + p] * (double)ri[(size_t)a * m + q];
        L[(size_t)p * m + q] = g;
    }
}

// L ← the Cholesky factor of G (left-looking, a column at a time, a barrier each). G's diagonal
// stays in L and the factor's goes to `diag`, so that every thread works the column's pivot out
// for itself (the same sum in every thread) while the thread of row j writes it. Returns whether
// G was positive definite (every thread gets the same answer).
__device__ bool cholesky(double* L, double* diag, int m) {
    bool ok = true;
    for (int j = 0; j < m; ++j) {
        double d = L[(size_t)j * m + j];
        for (int p = 0; p < j; ++p) d -= L[(size_t)j * m + p] * L[(size_t)j * m + p];
        ok = ok && d > 0.0 && !isinf(d);
        const double root = sqrt(d);
        for (int i = j + threadIdx.x; i < m; i += blockDim.x) {
            if (i == j) {
                diag[j] = root;
                continue;
            }
            double t = L[(size_t)i * m + j];
            for (int p = 0; p < j; ++p) t -= L[(size_t)i * m + p] * L[(size_t)j * m + p];
            L[(size_t)i * m + j] = t / root;
        }
        __syncthreads();
    }
    return ok;
}

// y ← (L Lᵀ)⁻¹ y by one whole warp: L z = y, then Lᵀ x = z, a row at a time, the lanes sharing
// each row's dot product. Lane l takes the entries p ≡ l (mod 32) and writes y[i] for i ≡ l, so
// every y[p] a lane reads it wrote itself: the rows need no barrier between them. The block
// meets at a barrier before anything else reads y.
__device__ void solve_by_warp(const double* L, const double* diag, double* y, int m) {
    const int lane = threadIdx.x % 32;
    for (int i = 0; i < m; ++i) {
        double t = 0.0;
        for (int p = lane; p < i; p += 32) t += L[(size_t)i * m + p] * y[p];
        t = warp_sum(t);
        if (lane == i % 32) y[i] = (y[i] - t) / diag[i];
    }
    for (int i = m - 1; i >= 0; --i) {
        double t = 0.0;
        for (int p = lane; p < m; p += 32) {
            if (p > i) t += L[(size_t)p * m + i] * y[p];
        }
        t = warp_sum(t);
        if (lane == i % 32) y[i] = (y[i] - t) / diag[i];
    }
}

// γ_i from the example's noises.
__device__ float machine_weight(const float* eta, int k, int i) {
    float total = 0.0f;
    for (int j = 0; j < k; ++j) total += 1.0f / (eta[j] * eta[j]);
    return 1.0f / (eta[i] * eta[i]) / total;
}

// Whether every machine of an example was positive definite, from its k shares.
__device__ bool all_solved(const float* part, int k, int width) {
    bool ok = true;
    for (int i = 0; i < k; ++i) ok = ok && part[(size_t)i * width] != 0.0f;
    return ok;
}

// The block's example b and machine i (block = b·k + i), R_i and the example's query z.
struct MachineBlock {
    int block, b, i;
    const float* ri;
    const float* z;
};

__device__ MachineBlock machine_block(const float* r, const float* q, int k, int c, int m) {
    const int block = blockIdx.x;
    return {block, block / k, block % k, r + (size_t)block * c * m, q + (size_t)(block / k) * (c + k)};
}

// A block per example and machine (blocks past B·k return), of at least one warp.
// out = [w (B k m) | μ (B c)]: this writes w_i; kanerva_address_fwd_sum writes μ.
extern "C" __global__ void kanerva_address_fwd(const float* r, const float* q, float* out, float* parts, int batch,
                                               int k, int c, int m, float lambda) {
    if ((int)blockIdx.x >= batch * k) return;
    const auto [block, b, i, ri, z] = machine_block(r, q, k, c, m);
    Work s = carve(c, m);
    gram(s.L, ri, c, m, lambda);
    for (int p = threadIdx.x; p < m; p += blockDim.x) {
        double t = 0.0;
        for (int a = 0; a < c; ++a) t += (double)ri[(size_t)a * m + p] * (double)z[a];
        s.y[p] = t;
    }
    __syncthreads();
    const bool ok = cholesky(s.L, s.diag, m);
    if (threadIdx.x < 32) solve_by_warp(s.L, s.diag, s.y, m);
    __syncthreads();
    for (int p = threadIdx.x; p < m; p += blockDim.x) out[(size_t)block * m + p] = (float)s.y[p];
    const float gamma = machine_weight(z + c, k, i);
    float* part = parts + (size_t)block * part_width(false, c);
    for (int a = threadIdx.x; a < c; a += blockDim.x) {
        float t = 0.0f;
        for (int p = 0; p < m; ++p) t += ri[(size_t)a * m + p] * (float)s.y[p];
        part[1 + a] = gamma * t;
    }
    if (threadIdx.x == 0) part[0] = ok ? 1.0f : 0.0f;
}

// A warp per example (warps past B return): μ = Σ_i γ_i p_i, machine by machine; an example with
// a machine that was not positive definite gets NaN for μ and all its w.
extern "C" __global__ void kanerva_address_fwd_sum(const float* parts, float* out, int batch, int k, int c, int m) {
    const int b = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (b >= batch) return;
    const int width = part_width(false, c);
    const float* part = parts + (size_t)b * k * width;
    const bool ok = all_solved(part, k, width);
    const float nan = __int_as_float(0x7fc00000);
    float* mu = out + (size_t)batch * k * m + (size_t)b * c;
    for (int a = lane; a < c; a += 32) {
        float t = 0.0f;
        for (int i = 0; i < k; ++i) t += part[(size_t)i * width + 1 + a];
        mu[a] = ok ? t : nan;
    }
    if (!ok) {
        for (int e = lane; e < k * m; e += 32) out[(size_t)b * k * m + e] = nan;
    }
}

// g = [w̄ (B k m) | μ̄ (B c)]; out = [R̄ (B k c m) | q̄ (B, c + k)]. With ḡ_p = γ_i μ̄ and
// a = G_i⁻¹ (R_iᵀ ḡ_p + w̄_i): R̄_i = (ḡ_p − R_i a) w_iᵀ + (z − p_i) aᵀ, z̄ = Σ_i R_i a, and η̄ from
// γ̄_i = μ̄ · p_i. A block per example and machine (blocks past B·k return), of at least two
// warps (w's and a's solves run side by side): this writes R̄_i; kanerva_address_bwd_sum writes q̄.
extern "C" __global__ void kanerva_address_bwd(const float* r, const float* q, const float* g, float* out,
                                               float* parts, int batch, int k, int c, int m, float lambda) {
    if ((int)blockIdx.x >= batch * k) return;
    const auto [block, b, i, ri, z] = machine_block(r, q, k, c, m);
    Work s = carve(c, m);
    const float* g_w = g + (size_t)block * m;
    const float* g_mu = g + (size_t)batch * k * m + (size_t)b * c;
    const float gamma = machine_weight(z + c, k, i);
    gram(s.L, ri, c, m, lambda);
    // w's right-hand side R_iᵀz and a's R_iᵀ ḡ_p + w̄_i: a's needs no w, so both solves run at once.
    for (int p = threadIdx.x; p < m; p += blockDim.x) {
        double t = 0.0, t_a = (double)g_w[p];
        for (int a = 0; a < c; ++a) {
            t += (double)ri[(size_t)a * m + p] * (double)z[a];
            t_a += (double)ri[(size_t)a * m + p] * (double)(gamma * g_mu[a]);
        }
        s.y[p] = t;
        s.y_a[p] = t_a;
    }
    __syncthreads();
    const bool ok = cholesky(s.L, s.diag, m);
    if (threadIdx.x < 32) {
        solve_by_warp(s.L, s.diag, s.y, m);
    } else if (threadIdx.x < 64) {
        solve_by_warp(s.L, s.diag, s.y_a, m);
    }
    __syncthreads();
    float* part = parts + (size_t)block * part_width(true, c);
    for (int a = threadIdx.x; a < c; a += blockDim.x) {
        float t = 0.0f, t_a = 0.0f;
        for (int p = 0; p < m; ++p) {
            t += ri[(size_t)a * m + p] * (float)s.y[p];
            t_a += ri[(size_t)a * m + p] * (float)s.y_a[p];
        }
        s.p[a] = t;
        s.ra[a] = t_a;
        part[2 + a] = t_a;
    }
    __syncthreads();
    float* g_ri = out + (size_t)block * c * m;
    for (int e = threadIdx.x; e < c * m; e += blockDim.x) {
        const int a = e / m, p = e % m;
        g_ri[e] = (gamma * g_mu[a] - s.ra[a]) * (float)s.y[p] + (z[a] - s.p[a]) * (float)s.y_a[p];
    }
    if (threadIdx.x < 32) {
        float t = 0.0f;
        for (int a = threadIdx.x; a < c; a += 32) t += g_mu[a] * s.p[a];
        t = warp_sum(t);
        if (threadIdx.x == 0) {
            part[0] = ok ? 1.0f : 0.0f;
            part[1] = t;
        }
    }
}

// A warp per example (warps past B return): z̄ = Σ_i R_i a, machine by machine, and η̄ from every
// γ̄_i; an example with a machine that was not positive definite gets NaN for z̄, η̄ and all its R̄.
extern "C" __global__ void kanerva_address_bwd_sum(const float* q, const float* parts, float* out, int batch, int k,
                                                   int c, int m) {
    const int b = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (b >= batch) return;
    const int width = part_width(true, c);
    const float* part = parts + (size_t)b * k * width;
    const float* eta = q + (size_t)b * (c + k) + c;
    const bool ok = all_solved(part, k, width);
    const float nan = __int_as_float(0x7fc00000);
    float* g_q = out + (size_t)batch * k * c * m + (size_t)b * (c + k);
    for (int a = lane; a < c; a += 32) {
        float t = 0.0f;
        for (int i = 0; i < k; ++i) t += part[(size_t)i * width + 2 + a];
        g_q[a] = ok ? t : nan;
    }
    // η̄_i = −2 π̄_i / η_i³ with π_i = η_i⁻², π̄_i = (γ̄_i − Σ_j γ̄_j γ_j) / Σ_j π_j.
    for (int i = lane; i < k; i += 32) {
        float total = 0.0f, mean = 0.0f;
        for (int j = 0; j < k; ++j) {
            total += 1.0f / (eta[j] * eta[j]);
            mean += part[(size_t)j * width + 1] * machine_weight(eta, k, j);
        }
        const float g_pi = (part[(size_t)i * width + 1] - mean) / total;
        g_q[c + i] = ok ? -2.0f * g_pi / (eta[i] * eta[i] * eta[i]) : nan;
    }
    if (!ok) {
        for (size_t e = lane; e < (size_t)k * c * m; e += 32) out[(size_t)b * k * c * m + e] = nan;
    }
}
