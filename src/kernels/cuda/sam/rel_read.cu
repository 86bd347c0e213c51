// relRead on the GPU (f32), as src/kernels/cuda/sam/rel_read.rs computes it on the CPU (the tape's
// loops of src/prims/sam/rel_read.rs): Mr [batch, nq, d, d2], c [batch, nq], b [batch, d];
// p = softmax(c), u = p ⊗ b, v[j] = Σ_{q,i} u[q,i] Mr[q,i,j]. Backward from g = d loss / d v:
// d Mr = u ⊗ g, gu[q,i] = Σ_j Mr[q,i,j] g[j], gp[q] = Σ_i gu[q,i] b[i], d b[i] = Σ_q gu[q,i] p[q],
// d c = p ⊙ (gp − ⟨p, gp⟩). Blocks of 256 threads. Built to PTX and SASS by build.rs.

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// p = softmax(c) of one example into shared memory, by its block's first thread (nq is small).
__device__ void softmax_into(const float* c, int nq, float* p) {
    if (threadIdx.x == 0) {
        float max = c[0];
        for (int q = 1; q < nq; ++q) max = fmaxf(max, c[q]);
        float sum = 0.0f;
        for (int q = 0; q < nq; ++q) {
            p[q] = expf(c[q] - max);
            sum += p[q];
        }
        for (int q = 0; q < nq; ++q) p[q] /= sum;
    }
    __syncthreads();
}

// A block per example; shared: p (nq), b (d). A thread per output column j.
extern "C" __global__ void rel_read_fwd(const float* mr, const float* c, const float* b, float* v, int batch, int nq,
                                        int d, int d2) {
    extern __shared__ float shared[];
    const int ex = blockIdx.x;
    if (ex >= batch) return;
    float* p = shared;
    float* bs = shared + nq;
    for (int i = threadIdx.x; i < d; i += blockDim.x) bs[i] = b[(size_t)ex * d + i];
    softmax_into(c + (size_t)ex * nq, nq, p);
    const float* m = mr + (size_t)ex * nq * d * d2;
    for (int j = threadIdx.x; j < d2; j += blockDim.x) {
        float acc = 0.0f;
        for (int q = 0; q < nq; ++q)
            for (int i = 0; i < d; ++i) acc += (p[q] * bs[i]) * m[((size_t)q * d + i) * d2 + j];
        v[(size_t)ex * d2 + j] = acc;
    }
}

// out = [d Mr (batch nq d d2) | gu (batch nq d)]. A block per (example, slot q); shared: p (nq).
// A warp per row i of the slot: its lanes over the columns j, writing d Mr and summing gu.
extern "C" __global__ void rel_read_bwd_memory(const float* mr, const float* c, const float* g, const float* b,
                                               float* out, int batch, int nq, int d, int d2) {
    extern __shared__ float shared[];
    const int ex = blockIdx.x / nq, q = blockIdx.x % nq;
    if (ex >= batch) return;
    float* p = shared;
    softmax_into(c + (size_t)ex * nq, nq, p);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const float* gs = g + (size_t)ex * d2;
    float* gu = out + (size_t)batch * nq * d * d2 + ((size_t)ex * nq + q) * d;
    for (int i = warp; i < d; i += warps) {
        const size_t row = (((size_t)ex * nq + q) * d + i) * d2;
        const float u = p[q] * b[(size_t)ex * d + i];
        float acc = 0.0f;
        for (int j = lane; j < d2; j += 32) {
            acc += mr[row + j] * gs[j];
            out[row + j] = u * gs[j];
        }
        acc = warp_sum(acc);
        if (lane == 0) gu[i] = acc;
    }
}

// out = [d c (batch nq) | d b (batch d)] from gu. A block per example; shared: p, gp (nq each).
extern "C" __global__ void rel_read_bwd_inputs(const float* c, const float* b, const float* gu, float* out, int batch,
                                               int nq, int d) {
    extern __shared__ float shared[];
    const int ex = blockIdx.x;
    if (ex >= batch) return;
    float* p = shared;
    float* gp = shared + nq;
    softmax_into(c + (size_t)ex * nq, nq, p);
    const float* us = gu + (size_t)ex * nq * d;
    const float* bs = b + (size_t)ex * d;
    for (int q = threadIdx.x; q < nq; q += blockDim.x) {
        float acc = 0.0f;
        for (int i = 0; i < d; ++i) acc += us[(size_t)q * d + i] * bs[i];
        gp[q] = acc;
    }
    float* gb = out + (size_t)batch * nq + (size_t)ex * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float acc = 0.0f;
        for (int q = 0; q < nq; ++q) acc += us[(size_t)q * d + i] * p[q];
        gb[i] = acc;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float dot = 0.0f;
        for (int q = 0; q < nq; ++q) dot += p[q] * gp[q];
        for (int q = 0; q < nq; ++q) out[(size_t)ex * nq + q] = p[q] * (gp[q] - dot);
    }
}
