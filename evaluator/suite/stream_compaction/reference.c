/* stream_compaction: order-preserving filter, out gets the selected elements, returns their count. */
int stream_compaction(int n, const float *in, float *out, float threshold) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (in[i] > threshold) {
            out[k++] = in[i];
        }
    }
    return k;
}
