/* LUT4 reference: each byte replaced by lut[byte & 15]. */
#include <stdint.h>

void rb_lut4(int n, const uint8_t *lut, uint8_t *ptr) {
    for (int i = 0; i < n; i++) ptr[i] = lut[ptr[i] & 15];
}
