/* sgemm_64: textbook triple loop, C = A*B, all row-major. */
void sgemm_64(int m, int n, int k, const float *A, const float *B, float *C) {
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++) {
                acc += A[i * k + p] * B[p * n + j];
            }
            C[i * n + j] = acc;
        }
    }
}
