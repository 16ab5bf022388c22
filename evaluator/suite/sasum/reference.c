#include <math.h>

/* Sum of absolute values (BLAS sasum, unit stride). Double accumulation: see task.toml. */
float sasum(int n, const float *x)
{
    double acc = 0.0;
    for (int i = 0; i < n; i++)
        acc += fabsf(x[i]);
    return (float)acc;
}
