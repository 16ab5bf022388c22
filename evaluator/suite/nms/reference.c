#include <stddef.h>
#include <stdint.h>

/* GCC contracts a*b + c across statements by default; the IoU below must be the exact sequence of
   roundings given in NOTES.md, so contraction is off (clang only contracts within one expression,
   and no expression here has a product feeding an addition). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

/* Strict total order of visit: higher score first, then lower index. */
static int visits_before(const float *scores, int32_t a, int32_t b)
{
    if (scores[a] != scores[b])
        return scores[a] > scores[b];
    return a < b;
}

/* Heap sort of idx[0..n) into visit order (in place, no scratch memory). The heap keeps the element
   that is visited last at its root, so repeatedly moving the root to the end sorts in visit order. */
static void sift_down(int32_t *idx, int root, int n, const float *scores)
{
    for (;;) {
        int child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && visits_before(scores, idx[child], idx[child + 1]))
            child++;
        if (!visits_before(scores, idx[root], idx[child]))
            return;
        int32_t t = idx[root];
        idx[root] = idx[child];
        idx[child] = t;
        root = child;
    }
}

static void sort_by_visit_order(int32_t *idx, int n, const float *scores)
{
    for (int i = n / 2 - 1; i >= 0; i--)
        sift_down(idx, i, n, scores);
    for (int end = n - 1; end > 0; end--) {
        int32_t t = idx[0];
        idx[0] = idx[end];
        idx[end] = t;
        sift_down(idx, 0, end, scores);
    }
}

static int suppresses(const float *kept, const float *cand, float iou_threshold)
{
    float ix1 = kept[0] > cand[0] ? kept[0] : cand[0];
    float iy1 = kept[1] > cand[1] ? kept[1] : cand[1];
    float ix2 = kept[2] < cand[2] ? kept[2] : cand[2];
    float iy2 = kept[3] < cand[3] ? kept[3] : cand[3];
    float iw = ix2 - ix1;
    float ih = iy2 - iy1;
    if (iw <= 0.0f || ih <= 0.0f)
        return 0;
    float inter = iw * ih;
    float area_k = (kept[2] - kept[0]) * (kept[3] - kept[1]);
    float area_c = (cand[2] - cand[0]) * (cand[3] - cand[1]);
    float uni = area_k + area_c;
    uni = uni - inter;
    return inter / uni > iou_threshold;
}

/* keep[] first holds every index in visit order; kept ones are then compacted to its front, which
   is safe because the write position never passes the read position. */
int nms(int n, float iou_threshold, const float *boxes, const float *scores, int32_t *keep)
{
    for (int i = 0; i < n; i++)
        keep[i] = i;
    sort_by_visit_order(keep, n, scores);
    int kept = 0;
    for (int r = 0; r < n; r++) {
        int32_t cand = keep[r];
        int ok = 1;
        for (int j = 0; j < kept && ok; j++)
            ok = !suppresses(boxes + 4 * (size_t)keep[j], boxes + 4 * (size_t)cand, iou_threshold);
        if (ok)
            keep[kept++] = cand;
    }
    return kept;
}
