// Kernels with the faults the emulation exists to catch, one each (and one without), so that
// tests/integration/cuda_emulation.rs can show that it does.

// Correct: each warp sums its lanes' values; lane 0 writes the sum.
extern "C" __global__ void fault_free(const float* x, float* out) {
    float v = x[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) out[threadIdx.x >> 5] = v;
}

// A missing barrier: thread 0 writes what the others read, again and again (one unordered
// pair is enough for ThreadSanitizer; many make it certain to be seen).
extern "C" __global__ void fault_race(const float* x, float* out) {
    __shared__ float cell;
    float sum = 0.0f;
    for (int i = 0; i < 64; ++i) {
        if (threadIdx.x == 0) cell = x[i];
        // __syncthreads() belongs here, and after the read.
        sum += cell;
    }
    out[threadIdx.x] = sum;
}

// A write one past the end of its output (blockDim.x elements).
extern "C" __global__ void fault_overrun(const float* x, float* out) {
    out[threadIdx.x + 1] = x[threadIdx.x];
}

// Half of each warp returns before the other half's full-mask shuffle.
extern "C" __global__ void fault_shuffle_after_return(const float* x, float* out) {
    if ((threadIdx.x & 31) >= 16) return;
    float v = x[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    out[threadIdx.x] = v;
}

// The block's warps wait at different barriers (CUDA: "likely to hang or produce unintended
// side effects").
extern "C" __global__ void fault_divergent_barriers(const float* x, float* out) {
    if (threadIdx.x < 32) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = x[threadIdx.x];
}

// Uses a float of dynamic shared memory per thread: launched with less, it reads and writes
// past what the launch asked for.
extern "C" __global__ void fault_shared_overrun(const float* x, float* out) {
    extern __shared__ float staged[];
    staged[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = staged[blockDim.x - 1 - threadIdx.x];
}
