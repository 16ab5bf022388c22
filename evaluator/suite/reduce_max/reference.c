/* Largest element; n >= 1. */
float reduce_max(int n, const float *x)
{
    float m = x[0];
    for (int i = 1; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}
