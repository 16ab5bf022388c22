/* Scale a vector in place. */
void sscal(int n, float a, float *x)
{
    for (int i = 0; i < n; i++)
        x[i] = a * x[i];
}
