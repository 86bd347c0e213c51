// The sum of up to 32 tensors of n elements each (f32), in one pass: a parameter's gradient
// from the gradients of its uses at every time step, as src/kernels/cuda/layers/sum_parts.rs
// computes it on the CPU. The pointers come by value in the kernel's parameters. Every part has one
// layout, of matrices of `mat` elements: element i (matrix i / mat; in it, row j / cols and column
// j % cols of j = i % mat) sits at i / mat * sm + j / cols * s0 + j % cols * s1 (a contiguous
// tensor: cols = mat = sm = s0 = n, s1 = 1; a transposed matrix: s0 = 1, s1 = rows; a stack of
// transposed matrices, as a pack's stacked weights read transposed: sm = rows · cols besides). The
// output is contiguous. With `accumulate`, the sum is added to what `out` holds (for more than 32
// parts). Grid-stride; built to PTX by build.rs with the `cuda` feature.

struct Parts {
    const float* p[32];
};

extern "C" __global__ void sum_parts(Parts parts, float* out, int count, int n, int cols, int s0, int s1, int mat,
                                     int sm, int accumulate) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x) {
        size_t j = i % mat;
        size_t at = i / mat * (size_t)sm + j / cols * (size_t)s0 + j % cols * (size_t)s1;
        float acc = accumulate ? out[i] : 0.0f;
        for (int k = 0; k < count; ++k) acc += parts.p[k][at];
        out[i] = acc;
    }
}
