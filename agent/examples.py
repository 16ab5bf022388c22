"""Could a mined example hunk stand in a candidate as written? The evaluator's own static rules decide.

A thought's example is code from another project (often another ISA): a generator that copies its
`__asm__ __volatile__("" ::: "memory")` barrier, its `#include <immintrin.h>` or a `[[likely]]` is rejected
before anything runs. The hunk is checked with the rules of evaluator/safety.py that hold for a fragment on
its own (directives and includes, inline asm, attributes, pragmas, spellings, function pointers); calls are
not judged, since a fragment's helpers are defined elsewhere. The prompt shows what breaks a rule.
"""

from __future__ import annotations

from evaluator.safety import (
    _TOKEN_RE,
    _check_asm,
    _check_attributes,
    _check_function_pointers,
    _check_pragmas,
    _check_spellings,
    check_directives,
    logical_lines,
)

MAX_PROBLEMS = 3


def example_source(example: str) -> str:
    """The code a rendered example hunk leaves after the change: added and context lines, unprefixed."""
    out = []
    for line in example.split("\n"):
        if line.startswith(("+", " ")):
            out.append(line[1:])
        elif line == "":
            out.append("")
    return "\n".join(out)


def example_problems(example: str, extra_headers: frozenset[str] = frozenset()) -> list[str]:
    """The candidate rules the example breaks as written (at most MAX_PROBLEMS, each once)."""
    code = example_source(example)
    if not code.strip():
        return []
    found = check_directives(code, extra_headers)
    lines = logical_lines(code)
    pragmas = [(ln, text.strip()) for ln, text in lines if text.lstrip().startswith("#pragma")]
    tokens = [(ln, tok) for ln, text in lines if not text.lstrip().startswith("#") for tok in _TOKEN_RE.findall(text)]
    found += _check_pragmas(pragmas) + _check_spellings(tokens) + _check_asm(tokens)
    found += _check_attributes(tokens) + _check_function_pointers(tokens)
    return list(dict.fromkeys(v.message for v in found))[:MAX_PROBLEMS]
