// `X = A⁻¹ B` for a batch of symmetric positive definite `A` on the GPU (f32 in and out, f64
// inside), as src/kernels/cuda/kanerva/spd_solve.rs computes it on the CPU: the Cholesky factor `A
// = L Lᵀ` (only the lower triangle of `A` is read), then `L z = b` and `Lᵀ x = z`. One block per
// system; its threads share each column of the factorisation and each row of the
// substitutions, so a system costs about 6n barriers. Built to PTX by build.rs with the `cuda`
// feature.
//
// Operands: `a` [batch, n, n], `b` [batch, n, r], `x` [batch, n, r], all contiguous. The
// factor and the right-hand sides live in `work`: the block's dynamic shared memory when they
// fit (`global_work` is then unused), else `global_work`, n² + n r doubles per system. A
// matrix that is not positive definite gives NaN for its whole solution: a graph replay cannot
// stop to report an error, and the NaN fails the trial at its loss.

extern "C" __global__ void spd_solve_f32(const float* a, const float* b, float* x, double* global_work, int n, int r,
                                         int use_shared) {
    extern __shared__ double shared_work[];
    __shared__ int not_positive_definite;
    const size_t nn = (size_t)n * n, nr = (size_t)n * r;
    double* L = use_shared ? shared_work : global_work + blockIdx.x * (nn + nr);
    double* y = L + nn;
    const float* A = a + blockIdx.x * nn;
    const float* B = b + blockIdx.x * nr;
    float* X = x + blockIdx.x * nr;
    const int tid = threadIdx.x, threads = blockDim.x;

    if (tid == 0) not_positive_definite = 0;
    for (size_t i = tid; i < nn; i += threads) L[i] = (double)A[i];
    for (size_t i = tid; i < nr; i += threads) y[i] = (double)B[i];
    __syncthreads();

    // Left-looking Cholesky, a column at a time: L[i][j] = (A[i][j] − Σ_{p<j} L[i][p] L[j][p]) /
    // L[j][j] for i ≥ j, with L[j][j] the square root of its own such sum. L[i][j] holds A[i][j]
    // until its column is reached.
    for (int j = 0; j < n; ++j) {
        for (int i = j + tid; i < n; i += threads) {
            double s = L[(size_t)i * n + j];
            for (int p = 0; p < j; ++p) s -= L[(size_t)i * n + p] * L[(size_t)j * n + p];
            L[(size_t)i * n + j] = s;
        }
        __syncthreads();
        const double d = L[(size_t)j * n + j];
        // `!(d > 0)` also catches NaN, as the CPU's `s <= 0 || !s.is_finite()`.
        if (tid == 0 && (!(d > 0.0) || isinf(d))) not_positive_definite = 1;
        const double root = sqrt(d);
        __syncthreads();  // every thread has read the diagonal before it is overwritten
        for (int i = j + tid; i < n; i += threads) L[(size_t)i * n + j] = i == j ? root : L[(size_t)i * n + j] / root;
        __syncthreads();
    }

    // L z = b, a row at a time: once row i is final, take its share out of the rows below.
    for (int i = 0; i < n; ++i) {
        const double inv = 1.0 / L[(size_t)i * n + i];
        for (int c = tid; c < r; c += threads) y[(size_t)i * r + c] *= inv;
        __syncthreads();
        const size_t below = (size_t)(n - i - 1) * r;
        for (size_t e = tid; e < below; e += threads) {
            const size_t p = i + 1 + e / r, c = e % r;
            y[p * r + c] -= L[p * n + i] * y[(size_t)i * r + c];
        }
        __syncthreads();
    }

    // Lᵀ x = z, from the last row up: row p < i of Lᵀ x holds L[i][p] x[i].
    for (int i = n - 1; i >= 0; --i) {
        const double inv = 1.0 / L[(size_t)i * n + i];
        for (int c = tid; c < r; c += threads) y[(size_t)i * r + c] *= inv;
        __syncthreads();
        const size_t above = (size_t)i * r;
        for (size_t e = tid; e < above; e += threads) {
            const size_t p = e / r, c = e % r;
            y[p * r + c] -= L[(size_t)i * n + p] * y[(size_t)i * r + c];
        }
        __syncthreads();
    }

    const float nan = __int_as_float(0x7fc00000);
    for (size_t i = tid; i < nr; i += threads) X[i] = not_positive_definite ? nan : (float)y[i];
}
