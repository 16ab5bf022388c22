#include <math.h>

/* Euclidean norm without overflow or underflow, as BLAS snrm2 promises. BLAS reaches it by scaling
   (LAPACK's snrm2 keeps three sums of squares at different scales); for float inputs a double
   accumulator is just as safe (every float's square is an ordinary double) and is the accurate answer
   the tolerance is measured against. */
float snrm2(int n, const float *x)
{
    double acc = 0.0;
    for (int i = 0; i < n; i++) {
        double v = x[i];
        acc += v * v;
    }
    return (float)sqrt(acc);
}
