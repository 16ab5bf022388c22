/* sgemm_64: C = A*B, all row-major, in the loop order a competent engineer writes first (i-p-j): the inner
   loop is an axpy of a contiguous row of B into a contiguous row of C, which -O3 vectorizes. The textbook
   i-j-p order walks B with stride n and stays scalar: a trap for the vectorizer, not a baseline. */
void sgemm_64(int m, int n, int k, const float *A, const float *B, float *C) {
    for (int i = 0; i < m; i++) {
        float *c = C + i * n;
        for (int j = 0; j < n; j++) {
            c[j] = 0.0f;
        }
        for (int p = 0; p < k; p++) {
            float a = A[i * k + p];
            const float *b = B + p * n;
            for (int j = 0; j < n; j++) {
                c[j] += a * b[j];
            }
        }
    }
}
