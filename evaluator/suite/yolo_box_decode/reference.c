#include <math.h>
#include <stddef.h>

static float sigmoid(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

/* Decode one YOLOv3 detection head (see NOTES.md): planar network output in, one record of
   (cx, cy, w, h, objectness, class scores...) per anchor and grid cell out. */
void yolo_box_decode(int anchors, int classes, int h, int w, int stride, const float *x,
                     const float *anchor_wh, float *y)
{
    int fields = 5 + classes;
    size_t plane = (size_t)h * (size_t)w;
    for (int a = 0; a < anchors; a++) {
        const float *xa = x + (size_t)a * (size_t)fields * plane;
        float aw = anchor_wh[2 * a], ah = anchor_wh[2 * a + 1];
        for (int gy = 0; gy < h; gy++) {
            for (int gx = 0; gx < w; gx++) {
                size_t cell = (size_t)gy * (size_t)w + (size_t)gx;
                float *out = y + (((size_t)a * plane) + cell) * (size_t)fields;
                out[0] = (sigmoid(xa[0 * plane + cell]) + (float)gx) * (float)stride;
                out[1] = (sigmoid(xa[1 * plane + cell]) + (float)gy) * (float)stride;
                out[2] = expf(xa[2 * plane + cell]) * aw;
                out[3] = expf(xa[3 * plane + cell]) * ah;
                for (int f = 4; f < fields; f++)
                    out[f] = sigmoid(xa[(size_t)f * plane + cell]);
            }
        }
    }
}
