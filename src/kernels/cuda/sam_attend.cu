// samRead's outer product attention on the GPU (f32), as src/kernels/sam_attend_op.rs computes
// it on the CPU. The input y is one example's normalised projection [n, 3nq] per example,
// batch-major (B examples): row e holds [q[., e] | k[., e] | v[., e]], so q[s, e] = y[e, s],
// k[j, e] = y[e, nq + j], v[j, f] = y[f, 2nq + j]. With A[s, e, j] = tanh(q[s, e] k[j, e]):
//   R[s, e, f] = sum_j A[s, e, j] v[j, f]            (output [B, nq, n, n])
// and from G = d loss / d R, with gA[s, e, j] = sum_f G[s, e, f] v[j, f]:
//   d q[s, e] = sum_j gA[s, e, j] (1 - A[s, e, j]^2) k[j, e]
//   d k[j, e] = sum_s gA[s, e, j] (1 - A[s, e, j]^2) q[s, e]
//   d v[j, f] = sum_{s, e} A[s, e, j] G[s, e, f]
// The forward a thread per output element, the backward a warp per gradient element; built to
// PTX by build.rs with the `cuda` feature.

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

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// gy[b, e, c] = d loss / d y[e, c] of example b, from y and G ([B, nq, n, n]); one warp per
// element, `total` = B n 3nq warps. Column c < nq is q[c, e]'s gradient, nq <= c < 2nq
// k[c - nq, e]'s, and the rest v[c - 2nq, e]'s. Each is a sum of nq n products (768 for STM's
// config B): a thread each summing them alone left the card nearly idle (B n 3nq = 73 728
// threads, 24 % slower than candle's ops there), so the lanes of a warp share them and add up.
// A warp past the last element returns whole (the shuffles need every lane of a live warp).
extern "C" __global__ void sam_attend_bwd(const float* y, const float* g, float* gy, int total, int n, int nq) {
    size_t at = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (at >= (size_t)total) return;
    int idx = (int)at;
    int w3 = 3 * nq;
    int c = idx % w3, e = (idx / w3) % n, b = idx / (w3 * n);
    const float* yb = y + (size_t)b * n * w3;
    const float* gb = g + (size_t)b * nq * n * n;
    const float* row = yb + (size_t)e * w3;
    float acc = 0.0f;
    if (c < 2 * nq) {
        // q's column (s = c) sums over the keys j, k's (j = c - nq) over the queries s, of
        // (1 - A^2) (k or q) gA[s, e, j], with gA[s, e, j] = sum_f G[s, e, f] v[j, f]: the lanes
        // split f, each weighting its part of gA by the pair's factor.
        bool is_q = c < nq;
        int s_first = is_q ? c : 0, s_last = is_q ? c + 1 : nq;
        int j_first = is_q ? 0 : c - nq, j_last = is_q ? nq : c - nq + 1;
        for (int s = s_first; s < s_last; ++s) {
            const float* grow = gb + ((size_t)s * n + e) * n;
            float q = row[s];
            for (int j = j_first; j < j_last; ++j) {
                float k = row[nq + j];
                float a = tanhf(q * k);
                float factor = (1.0f - a * a) * (is_q ? k : q);
                float ga = 0.0f;
                for (int f = lane; f < n; f += 32) ga += grow[f] * yb[(size_t)f * w3 + 2 * nq + j];
                acc += factor * ga;
            }
        }
    } else {
        // v[j, f] with j = c - 2nq and f = e: sum over every query s and row e2, the lanes
        // splitting the nq n pairs.
        int j = c - 2 * nq, f = e;
        for (int t = lane; t < nq * n; t += 32) {
            int s = t / n, e2 = t % n;
            const float* r2 = yb + (size_t)e2 * w3;
            acc += tanhf(r2[s] * r2[nq + j]) * gb[((size_t)s * n + e2) * n + f];
        }
    }
    acc = warp_sum(acc);
    if (lane == 0) gy[idx] = acc;
}
