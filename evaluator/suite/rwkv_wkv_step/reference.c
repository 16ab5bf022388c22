#include <math.h>

/* One token of the RWKV-4 time-mixing recurrence in its overflow-free form: the state keeps
   numerator aa and denominator bb scaled by exp(-pp), pp being the largest exponent seen so far. */
void rwkv_wkv_step(int c, const float *k, const float *v, const float *w, const float *u, float *aa,
                   float *bb, float *pp, float *wkv)
{
    for (int i = 0; i < c; i++) {
        /* output: the current token weighted by exp(u + k), the past by the stored state */
        float ww = u[i] + k[i];
        float p = pp[i] > ww ? pp[i] : ww;
        float e1 = expf(pp[i] - p);
        float e2 = expf(ww - p);
        wkv[i] = (e1 * aa[i] + e2 * v[i]) / (e1 * bb[i] + e2);
        /* state: decay the past by exp(w) (w < 0), add the current token with weight exp(k) */
        ww = w[i] + pp[i];
        p = ww > k[i] ? ww : k[i];
        e1 = expf(ww - p);
        e2 = expf(k[i] - p);
        aa[i] = e1 * aa[i] + e2 * v[i];
        bb[i] = e1 * bb[i] + e2;
        pp[i] = p;
    }
}
