/* 5-tap FIR filter (a 1-D valid convolution): each output is the taps' dot product with a window of x. */
void fir5(int n, const float *x, const float *c, float *y) {
  for (int i = 0; i < n; i++) {
    float s = 0.0f;
    for (int k = 0; k < 5; k++) s += c[k] * x[i + k];
    y[i] = s;
  }
}
