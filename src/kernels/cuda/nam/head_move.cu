// NAM-TM's head transition on the GPU (f32), as src/kernels/cuda/nam/head_move.rs computes it on
// the CPU. Each row (an example's head) holds a position p over L cells and its move
// probabilities m (n_moves = 3: LEFT, NO-OP, RIGHT; 4: and JUMP, with the jump position j):
//   next[l] = m0 p[l + 1] + m1 p[l] + m2 p[l - 1] + m3 j[l]      (indices mod L)
// and from g = d loss / d next:
//   d p[l] = m0 g[l - 1] + m1 g[l] + m2 g[l + 1];  d m0 = sum_l g[l] p[l + 1],
//   d m1 = sum_l g[l] p[l],  d m2 = sum_l g[l] p[l - 1],  d m3 = sum_l g[l] j[l];  d j = m3 g.
// Without JUMP, `j` is any buffer of the position's size (never read). Built to PTX by build.rs
// with the `cuda` feature.

// One thread per (row, cell).
extern "C" __global__ void head_move_fwd(const float* p, const float* m, const float* j, float* out, int rows, int len,
                                         int n_moves) {
    // size_t: past the last thread of a grid rounded up near 2^31 an int would wrap negative.
    size_t at = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (at >= (size_t)rows * len) return;
    int idx = (int)at;
    int r = idx / len, l = idx % len;
    const float* pr = p + (size_t)r * len;
    const float* mr = m + (size_t)r * n_moves;
    float next = mr[0] * pr[(l + 1) % len] + mr[1] * pr[l] + mr[2] * pr[(l + len - 1) % len];
    if (n_moves == 4) next += mr[3] * j[idx];
    out[idx] = next;
}

// One thread per row; out = [d p (rows len) | d m (rows n_moves) | d j (rows len, with JUMP)].
extern "C" __global__ void head_move_bwd(const float* p, const float* m, const float* g, const float* j, float* out,
                                         int rows, int len, int n_moves) {
    size_t at = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (at >= (size_t)rows) return;
    int r = (int)at;
    const float* pr = p + (size_t)r * len;
    const float* mr = m + (size_t)r * n_moves;
    const float* gr = g + (size_t)r * len;
    float* gp = out + (size_t)r * len;
    float* gm = out + (size_t)rows * len + (size_t)r * n_moves;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int l = 0; l < len; ++l) {
        int prev = (l + len - 1) % len, next = (l + 1) % len;
        gp[l] = mr[0] * gr[prev] + mr[1] * gr[l] + mr[2] * gr[next];
        acc[0] += gr[l] * pr[next];
        acc[1] += gr[l] * pr[l];
        acc[2] += gr[l] * pr[prev];
    }
    if (n_moves == 4) {
        const float* jr = j + (size_t)r * len;
        float* gj = out + (size_t)rows * (len + n_moves) + (size_t)r * len;
        for (int l = 0; l < len; ++l) {
            acc[3] += gr[l] * jr[l];
            gj[l] = mr[3] * gr[l];
        }
    }
    for (int k = 0; k < n_moves; ++k) gm[k] = acc[k];
}

// Sums v over the 32 lanes of a warp, every lane getting the sum, in a fixed order.
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// head_move_bwd with a warp per row (eight to a block of 256), its lanes striding along the
// cells, so that the row's loads and the position's gradient are coalesced and the moves' sums
// are warp sums (head_move_bwd's thread walks its row alone: 32.6 µs a launch for NAM-TM's
// example on the H100). Runs where head_move::HEAD_MOVE_WARPS has it.
extern "C" __global__ void head_move_bwd_warps(const float* p, const float* m, const float* g, const float* j, float* out,
                                         int rows, int len, int n_moves) {
    size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    // The test is the same for a warp's 32 lanes, so a warp that goes on has all of them for
    // the shuffles of warp_sum.
    if (warp >= (size_t)rows) return;
    int r = (int)warp;
    const float* pr = p + (size_t)r * len;
    const float* mr = m + (size_t)r * n_moves;
    const float* gr = g + (size_t)r * len;
    const float* jr = j + (size_t)r * len;
    float* gp = out + (size_t)r * len;
    float* gm = out + (size_t)rows * len + (size_t)r * n_moves;
    float* gj = out + (size_t)rows * (len + n_moves) + (size_t)r * len;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int l = lane; l < len; l += 32) {
        int prev = (l + len - 1) % len, next = (l + 1) % len;
        float gl = gr[l];
        gp[l] = mr[0] * gr[prev] + mr[1] * gl + mr[2] * gr[next];
        acc[0] += gl * pr[next];
        acc[1] += gl * pr[l];
        acc[2] += gl * pr[prev];
        if (n_moves == 4) {
            acc[3] += gl * jr[l];
            gj[l] = mr[3] * gl;
        }
    }
    for (int k = 0; k < n_moves; ++k) {
        float sum = warp_sum(acc[k]);
        if (lane == 0) gm[k] = sum;
    }
}
