/* sdot: sequential float accumulation, as a straightforward C loop would do it. */
float sdot(int n, const float *x, const float *y) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        sum += x[i] * y[i];
    }
    return sum;
}
