#include <math.h>

/* Euclidean norm. The double accumulator makes this reference the accurate answer the tolerance is
   measured against; inputs are bounded, so the overflow-avoiding scaling of BLAS snrm2 is not needed. */
float snrm2(int n, const float *x)
{
    double acc = 0.0;
    for (int i = 0; i < n; i++) {
        double v = x[i];
        acc += v * v;
    }
    return (float)sqrt(acc);
}
