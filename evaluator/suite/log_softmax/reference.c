#include <math.h>
#include <stddef.h>

/* Numerically stable log-softmax of each row: subtract the row max before exponentiating. */
void log_softmax(int rows, int cols, const float *x, float *y)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * (size_t)cols;
        float *yr = y + (size_t)r * (size_t)cols;
        float mx = xr[0];
        for (int c = 1; c < cols; c++)
            mx = xr[c] > mx ? xr[c] : mx;
        float sum = 0.0f;
        for (int c = 0; c < cols; c++)
            sum += expf(xr[c] - mx);
        float shift = mx + logf(sum);
        for (int c = 0; c < cols; c++)
            yr[c] = xr[c] - shift;
    }
}
