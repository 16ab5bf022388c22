/* softmax: three passes per row (max, exp and sum, scale), libm expf. */
#include <math.h>

void softmax(int rows, int cols, const float *x, float *y) {
    for (int r = 0; r < rows; r++) {
        const float *in = x + (long)r * cols;
        float *out = y + (long)r * cols;
        float mx = in[0];
        for (int i = 1; i < cols; i++) {
            mx = in[i] > mx ? in[i] : mx;
        }
        float sum = 0.0f;
        for (int i = 0; i < cols; i++) {
            out[i] = expf(in[i] - mx);
            sum += out[i];
        }
        float inv = 1.0f / sum;
        for (int i = 0; i < cols; i++) {
            out[i] *= inv;
        }
    }
}
