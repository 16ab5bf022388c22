#include <stddef.h>

/* Out-of-place transpose; reads are contiguous, writes stride by rows (blocking fixes that). */
void transpose(int rows, int cols, const float *x, float *y)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            y[(size_t)j * (size_t)rows + (size_t)i] = x[(size_t)i * (size_t)cols + (size_t)j];
}
