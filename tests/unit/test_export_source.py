"""agent/export's text work: file-scope names prefixed, a KERNEL entry switched, ggml's RVV branch found."""

from __future__ import annotations

from agent.export.csource import file_scope_names, prefixed
from agent.export.openblas import entry_value, switch_entry

KERNEL = """\
#include <stdint.h>
#define LANES 8  /* a macro of the kernel's own */
typedef struct { float d; } blk_t;
static const int8_t table[4] = {1, 2, INT8_MAX, sizeof(blk_t)};
static float half_at(const uint8_t *p) { return (float)p[0] * LANES; } // "half_at" in a string stays
float q8_dot(int nb, const uint8_t *x, const uint8_t *y)
{
    float s = 0.0f;  /* half_at in a comment stays */
    for (int b = 0; b < nb; b++) s += half_at(x + b) * half_at(y + b) * table[b & 3];
    return s;
}
"""


def test_file_scope_names_are_prefixed_and_nothing_else() -> None:
    assert file_scope_names(KERNEL) == ["LANES", "blk_t", "table", "half_at", "q8_dot"]
    code, entry = prefixed(KERNEL, "q8_dot", "eok_q8")
    assert entry == "eok_q8"
    assert "float eok_q8(int nb" in code and "#define eok_q8_LANES 8" in code
    assert "eok_q8_half_at(x + b) * eok_q8_half_at(y + b) * eok_q8_table[b & 3]" in code
    # Names from headers and the initializer's uses are not declarations of the kernel's.
    assert "INT8_MAX, sizeof(eok_q8_blk_t)" in code and "uint8_t" in code
    assert '"half_at" in a string' in code and "half_at in a comment" in code


def test_kernel_entry_switch_keeps_the_rest_of_the_listing() -> None:
    listing = "SAXPYKERNEL  = axpy_vector.c\nSDOTKERNEL   = dot.c\nSDOTKERNEL   = dot_vector.c  # last wins\n"
    assert entry_value(listing, "SDOTKERNEL") == "dot_vector.c"
    new = switch_entry(listing, "SDOTKERNEL", "sdot_eok.c")
    assert new == listing.replace("dot_vector.c  #", "sdot_eok.c  #")
    assert entry_value(listing, "SNRM2KERNEL") is None
