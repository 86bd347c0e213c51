// samRead's outer product attention on the GPU (f32), as src/kernels/sam_attend_op.rs computes
// it on the CPU. The input y is one example's normalised projection [n, 3nq] per example,
// batch-major (B examples): row e holds [q[., e] | k[., e] | v[., e]], so q[s, e] = y[e, s],
// k[j, e] = y[e, nq + j], v[j, f] = y[f, 2nq + j]. With A[s, e, j] = tanh(q[s, e] k[j, e]):
//   R[s, e, f] = sum_j A[s, e, j] v[j, f]            (output [B, nq, n, n])
// and from G = d loss / d R, with gA[s, e, j] = sum_f G[s, e, f] v[j, f]:
//   d q[s, e] = sum_j gA[s, e, j] (1 - A[s, e, j]^2) k[j, e]
//   d k[j, e] = sum_s gA[s, e, j] (1 - A[s, e, j]^2) q[s, e]
//   d v[j, f] = sum_{s, e} A[s, e, j] G[s, e, f]
// One thread per output element; built to PTX by build.rs with the `cuda` feature.

// out[b, s, e, f] = R[s, e, f] of example b; `total` = B nq n n threads.
extern "C" __global__ void sam_attend_fwd(const float* y, float* out, int total, int n, int nq) {
    // size_t: past the last thread of a grid rounded up near 2^31 an int would wrap negative.
    size_t at = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (at >= (size_t)total) return;
    int idx = (int)at;
    int f = idx % n, e = (idx / n) % n, s = (idx / (n * n)) % nq, b = idx / (n * n * nq);
    int w3 = 3 * nq;
    const float* yb = y + (size_t)b * n * w3;
    const float* row = yb + (size_t)e * w3;
    const float* vrow = yb + (size_t)f * w3 + 2 * nq;
    float q = row[s], acc = 0.0f;
    for (int j = 0; j < nq; ++j) acc += tanhf(q * row[nq + j]) * vrow[j];
    out[idx] = acc;
}

// gy[b, e, c] = d loss / d y[e, c] of example b, from y and G ([B, nq, n, n]); `total` = B n 3nq
// threads. Column c < nq is q[c, e]'s gradient, nq <= c < 2nq k[c - nq, e]'s, and the rest
// v[c - 2nq, e]'s.
extern "C" __global__ void sam_attend_bwd(const float* y, const float* g, float* gy, int total, int n, int nq) {
    size_t at = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (at >= (size_t)total) return;
    int idx = (int)at;
    int w3 = 3 * nq;
    int c = idx % w3, e = (idx / w3) % n, b = idx / (w3 * n);
    const float* yb = y + (size_t)b * n * w3;
    const float* gb = g + (size_t)b * nq * n * n;
    const float* row = yb + (size_t)e * w3;
    float acc = 0.0f;
    if (c < 2 * nq) {
        // q's column (s = c) sums over the keys j; k's (j = c - nq) over the queries s.
        bool is_q = c < nq;
        int first = is_q ? c : 0, last = is_q ? c + 1 : nq;
        for (int s = first; s < last; ++s) {
            const float* grow = gb + ((size_t)s * n + e) * n;
            float q = row[s];
            int j_first = is_q ? 0 : c - nq, j_last = is_q ? nq : c - nq + 1;
            for (int j = j_first; j < j_last; ++j) {
                float k = row[nq + j];
                float ga = 0.0f;
                for (int f = 0; f < n; ++f) ga += grow[f] * yb[(size_t)f * w3 + 2 * nq + j];
                float a = tanhf(q * k);
                acc += ga * (1.0f - a * a) * (is_q ? k : q);
            }
        }
    } else {
        // v[j, f] with j = c - 2nq and f = e: sum over every query s and row e2.
        int j = c - 2 * nq, f = e;
        for (int s = 0; s < nq; ++s) {
            for (int e2 = 0; e2 < n; ++e2) {
                const float* r2 = yb + (size_t)e2 * w3;
                acc += tanhf(r2[s] * r2[nq + j]) * gb[((size_t)s * n + e2) * n + f];
            }
        }
    }
    gy[idx] = acc;
}
