#include <math.h>
#include <stddef.h>

/* One decode step of multi-head attention against a KV cache (see NOTES.md for the layout).
   Single pass with an online softmax: the running maximum m and sum l are updated per key and the
   output row, used as the accumulator, is rescaled whenever m grows; no scratch memory is needed. */
void attention_decode(int heads, int seq_len, int head_dim, const float *q, const float *k,
                      const float *v, float *out)
{
    float scale = 1.0f / sqrtf((float)head_dim);
    for (int h = 0; h < heads; h++) {
        const float *qh = q + (size_t)h * (size_t)head_dim;
        float *oh = out + (size_t)h * (size_t)head_dim;
        for (int d = 0; d < head_dim; d++)
            oh[d] = 0.0f;
        float m = -INFINITY, l = 0.0f;
        for (int t = 0; t < seq_len; t++) {
            size_t row = ((size_t)h * (size_t)seq_len + (size_t)t) * (size_t)head_dim;
            float s = 0.0f;
            for (int d = 0; d < head_dim; d++)
                s += qh[d] * k[row + d];
            s *= scale;
            if (s > m) {
                float r = expf(m - s); /* 0 on the first key: m = -inf */
                l *= r;
                for (int d = 0; d < head_dim; d++)
                    oh[d] *= r;
                m = s;
            }
            float p = expf(s - m);
            l += p;
            for (int d = 0; d < head_dim; d++)
                oh[d] += p * v[row + d];
        }
        for (int d = 0; d < head_dim; d++)
            oh[d] /= l;
    }
}
