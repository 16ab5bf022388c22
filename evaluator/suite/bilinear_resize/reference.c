#include <stddef.h>

/* Source coordinate and the two neighbours along one axis (see NOTES.md for the definition). */
static void source_index(int dst, float scale, int in, int *i0, int *i1, float *lambda)
{
    float s = ((float)dst + 0.5f) * scale - 0.5f;
    if (s < 0.0f)
        s = 0.0f;
    int lo = (int)s; /* s >= 0, so truncation is floor */
    if (lo > in - 1)
        lo = in - 1;
    *i0 = lo;
    *i1 = (lo < in - 1) ? lo + 1 : lo;
    *lambda = s - (float)lo;
}

void bilinear_resize(int c, int ih, int iw, int oh, int ow, const float *x, float *y)
{
    float sh = (float)ih / (float)oh;
    float sw = (float)iw / (float)ow;
    for (int ch = 0; ch < c; ch++) {
        const float *xc = x + (size_t)ch * (size_t)ih * (size_t)iw;
        float *yc = y + (size_t)ch * (size_t)oh * (size_t)ow;
        for (int oy = 0; oy < oh; oy++) {
            int y0, y1;
            float ly;
            source_index(oy, sh, ih, &y0, &y1, &ly);
            const float *r0 = xc + (size_t)y0 * (size_t)iw;
            const float *r1 = xc + (size_t)y1 * (size_t)iw;
            for (int ox = 0; ox < ow; ox++) {
                int x0, x1;
                float lx;
                source_index(ox, sw, iw, &x0, &x1, &lx);
                float top = (1.0f - lx) * r0[x0] + lx * r0[x1];
                float bot = (1.0f - lx) * r1[x0] + lx * r1[x1];
                yc[(size_t)oy * (size_t)ow + (size_t)ox] = (1.0f - ly) * top + ly * bot;
            }
        }
    }
}
