// samRead's outer product attention on the GPU (f32), as src/kernels/cuda/sam/sam_attend.rs
// computes it on the CPU. The input y is one example's normalised projection [n, 3nq] per example,
// batch-major (B examples): row e holds [q[., e] | k[., e] | v[., e]], so q[s, e] = y[e, s],
// k[j, e] = y[e, nq + j], v[j, f] = y[f, 2nq + j]. With A[s, e, j] = tanh(q[s, e] k[j, e]):
//   R[s, e, f] = sum_j A[s, e, j] v[j, f]            (output [B, nq, n, n])
// and from G = d loss / d R, with gA[s, e, j] = sum_f G[s, e, f] v[j, f]:
//   d q[s, e] = sum_j gA[s, e, j] (1 - A[s, e, j]^2) k[j, e]
//   d k[j, e] = sum_s gA[s, e, j] (1 - A[s, e, j]^2) q[s, e]
//   d v[j, f] = sum_{s, e} A[s, e, j] G[s, e, f]
// v's columns sit 3nq floats apart in y, so neither kernel reads them across a warp's lanes
// from global memory (a warp's load would touch 32 sectors; the first form of these kernels
// did, and made STM's config B 20 % slower than candle's ops): the forward stages v, and the
// backward reads G along its rows. Launch shapes: src/kernels/cuda/launch_shape.rs; the shapes that
// fit (nq <= MAX_QUERIES, the shared memory): sam_attend::fits_a_block. Built to PTX by
// build.rs with the `cuda` feature.

// The most queries the kernels take: the backward keeps a register per query.
#define MAX_QUERIES 16

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The block's threads copy example yb's v, transposed, into vt ([nq][n]: v[j, f]) in shared
// memory; the caller synchronises before reading it.
__device__ void stage_v(const float* yb, float* vt, int n, int nq) {
    for (int i = threadIdx.x; i < nq * n; i += blockDim.x) {
        int j = i / n, f = i % n;
        vt[i] = yb[(size_t)f * 3 * nq + 2 * nq + j];
    }
}

// out[b, s, e, f] = R[s, e, f] of example b. A block per (b, s), B nq blocks: it stages the
// query's weights A[s, ., .] (n nq) and v transposed (nq n) in shared memory (2 nq n floats),
// then writes the query's n n outputs along f, each a sum of nq products.
extern "C" __global__ void sam_attend_fwd(const float* y, float* out, int batch, int n, int nq) {
    extern __shared__ float shared[];
    float* weights = shared;          // [n][nq]: A[s, e, j]
    float* vt = shared + n * nq;      // [nq][n]: v[j, f]
    int b = blockIdx.x / nq, s = blockIdx.x % nq;
    if (b >= batch) return;
    int w3 = 3 * nq;
    const float* yb = y + (size_t)b * n * w3;
    stage_v(yb, vt, n, nq);
    for (int i = threadIdx.x; i < n * nq; i += blockDim.x) {
        int e = i / nq, j = i % nq;
        weights[i] = tanhf(yb[(size_t)e * w3 + s] * yb[(size_t)e * w3 + nq + j]);
    }
    __syncthreads();
    float* ob = out + ((size_t)b * nq + s) * n * n;
    for (int i = threadIdx.x; i < n * n; i += blockDim.x) {
        int e = i / n, f = i % n;
        float acc = 0.0f;
        for (int j = 0; j < nq; ++j) acc += weights[e * nq + j] * vt[j * n + f];
        ob[i] = acc;
    }
}

// gy[b, e, c] = d loss / d y[e, c] of example b, from y and G ([B, nq, n, n]). Two kinds of
// block of 8 warps (256 threads), one launch:
// - blocks [0, B ceil(n / 8)): a warp per row e of an example, the gradients of q[., e] and
//   k[., e]. Its lanes split f along G's rows G[s, e, .] (coalesced), with v transposed in
//   shared memory (nq n floats), and sum gA[s, e, .] across the warp; lane j then owns the
//   pair (s, j): its factor (1 - A^2) gA, k[j, e]'s gradient, and q[s, e]'s share.
// - the B ceil(n / 32) blocks after them: a block per 32 columns f of an example, v[., f]'s
//   gradients, sum over the nq n rows (s, e) of A[s, e, j] G[s, e, f]: lane f reads along G's
//   rows, the warps split the rows, lanes j < nq compute A[s, e, j] once and shuffle it to the
//   others, and the warps' partial sums ([8][nq][32] in shared memory) are added in a fixed
//   order, so the result does not depend on scheduling.
extern "C" __global__ void sam_attend_bwd(const float* y, const float* g, float* gy, int batch, int n, int nq) {
    extern __shared__ float shared[];
    int w3 = 3 * nq;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int row_blocks = batch * ((n + 7) / 8);
    if ((int)blockIdx.x < row_blocks) {
        int per_example = (n + 7) / 8;
        int b = blockIdx.x / per_example, e = (blockIdx.x % per_example) * 8 + warp;
        const float* yb = y + (size_t)b * n * w3;
        float* vt = shared; // [nq][n]: v[j, f]
        stage_v(yb, vt, n, nq);
        __syncthreads();
        if (e >= n) return; // a whole warp: the shuffles below need every lane of a live one
        const float* row = yb + (size_t)e * w3;
        const float* gb = g + (size_t)b * nq * n * n;
        float k_own = lane < nq ? row[nq + lane] : 0.0f;
        float q_own = lane < nq ? row[lane] : 0.0f;
        float dq_own = 0.0f, dk_own = 0.0f;
        for (int s = 0; s < nq; ++s) {
            const float* grow = gb + ((size_t)s * n + e) * n;
            float ga[MAX_QUERIES];
#pragma unroll
            for (int j = 0; j < MAX_QUERIES; ++j) ga[j] = 0.0f;
            for (int f = lane; f < n; f += 32) {
                float gf = grow[f];
#pragma unroll
                for (int j = 0; j < MAX_QUERIES; ++j)
                    if (j < nq) ga[j] += gf * vt[j * n + f];
            }
            // Every lane holds gA[s, e, j] for every j; lane j keeps its own.
            float mine = 0.0f;
#pragma unroll
            for (int j = 0; j < MAX_QUERIES; ++j) {
                if (j < nq) {
                    float total = warp_sum(ga[j]);
                    if (j == lane) mine = total;
                }
            }
            float q = __shfl_sync(0xffffffffu, q_own, s);
            float factor = 0.0f;
            if (lane < nq) {
                float a = tanhf(q * k_own);
                factor = mine * (1.0f - a * a);
                dk_own += factor * q;
            }
            float dq = warp_sum(factor * k_own);
            if (lane == s) dq_own = dq;
        }
        if (lane < nq) {
            gy[((size_t)b * n + e) * w3 + lane] = dq_own;
            gy[((size_t)b * n + e) * w3 + nq + lane] = dk_own;
        }
        return;
    }
    int col_block = blockIdx.x - row_blocks, tiles = (n + 31) / 32;
    int b = col_block / tiles, f = (col_block % tiles) * 32 + lane;
    if (b >= batch) return;
    const float* yb = y + (size_t)b * n * w3;
    const float* gb = g + (size_t)b * nq * n * n;
    float acc[MAX_QUERIES];
#pragma unroll
    for (int j = 0; j < MAX_QUERIES; ++j) acc[j] = 0.0f;
    for (int r = warp; r < nq * n; r += 8) {
        int s = r / n, e = r % n;
        float gf = f < n ? gb[(size_t)r * n + f] : 0.0f;
        const float* row = yb + (size_t)e * w3;
        float a_own = lane < nq ? tanhf(row[s] * row[nq + lane]) : 0.0f;
#pragma unroll
        for (int j = 0; j < MAX_QUERIES; ++j)
            if (j < nq) acc[j] += __shfl_sync(0xffffffffu, a_own, j) * gf;
    }
    float* partial = shared; // [8][nq][32]
#pragma unroll
    for (int j = 0; j < MAX_QUERIES; ++j)
        if (j < nq) partial[(warp * nq + j) * 32 + lane] = acc[j];
    __syncthreads();
    for (int i = threadIdx.x; i < nq * 32; i += blockDim.x) {
        int j = i / 32, l = i % 32, fi = (col_block % tiles) * 32 + l;
        float total = 0.0f;
        for (int w = 0; w < 8; ++w) total += partial[(w * nq + j) * 32 + l];
        if (fi < n) gy[((size_t)b * n + fi) * w3 + 2 * nq + j] = total;
    }
}
