/* Two-way merge of sorted runs (the merge step of merge sort). */
void merge_sorted(int n, int m, const float *a, const float *b, float *out)
{
    int i = 0, j = 0, o = 0;
    while (i < n && j < m)
        out[o++] = (b[j] < a[i]) ? b[j++] : a[i++];
    while (i < n)
        out[o++] = a[i++];
    while (j < m)
        out[o++] = b[j++];
}
