#include <math.h>
#include <stddef.h>

/* Rotary embedding on adjacent pairs (GPT-J style, ggml's default "normal" mode). The rotation of a
   pair depends only on the token and the pair index, so it is computed once and applied to all heads;
   in double, so this reference is the exact answer the tolerance is measured against. */
void rope(int n_tokens, int n_heads, int head_dim, int pos0, float theta_base, const float *x,
          float *y)
{
    int half = head_dim / 2;
    size_t token_stride = (size_t)n_heads * (size_t)head_dim;
    for (int t = 0; t < n_tokens; t++) {
        double pos = (double)pos0 + (double)t;
        for (int i = 0; i < half; i++) {
            double angle = pos * pow((double)theta_base, -2.0 * (double)i / (double)head_dim);
            float c = (float)cos(angle), s = (float)sin(angle);
            for (int h = 0; h < n_heads; h++) {
                size_t at = (size_t)t * token_stride + (size_t)h * (size_t)head_dim + 2 * (size_t)i;
                float x0 = x[at], x1 = x[at + 1];
                y[at] = x0 * c - x1 * s;
                y[at + 1] = x0 * s + x1 * c;
            }
        }
    }
}
