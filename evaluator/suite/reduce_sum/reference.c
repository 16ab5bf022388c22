/* Sum of a float vector, accumulated in double so the reference is accurate (see task.toml). */
float reduce_sum(int n, const float *x)
{
    double acc = 0.0;
    for (int i = 0; i < n; i++)
        acc += x[i];
    return (float)acc;
}
