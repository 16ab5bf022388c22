"""Generate the C harness for a task (templates/harness.c.in plus a task-specific block).

The harness links four copies of the kernel: the reference (`eok_ref_<fn>`, correctness), the plain
baseline (`eok_base_<fn>`, the reference built with the target's baseline flags, `clang -O3`), the
competent baseline (`eok_comp_<fn>`, the reference built with the flags the task's tolerance allows:
`evaluator.toolchain.competent_cflags`) and the candidate (`<fn>`). The renaming is done with -D when
compiling reference.c, so reference and candidate live in separate translation units and neither can see
the other's static helpers.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from evaluator.tasks import C_TYPES, KernelTask, Param

TEMPLATE = Path(__file__).resolve().parent / "templates" / "harness.c.in"
HARNESS_VERSION = "6"  # bump when generated code or template semantics change: part of every cache key
MARKER = "/* @EOK_TASK@ */"

_GEN_CODES = {
    "uniform": "EOK_GEN_UNIFORM",
    "positive": "EOK_GEN_UNIFORM",
    "normal": "EOK_GEN_NORMAL",
    "int": "EOK_GEN_INT",
    "sorted": "EOK_GEN_SORTED",
    "fp16": "EOK_GEN_FP16",
    "q8_0": "EOK_GEN_Q8_0",
    "q4_0": "EOK_GEN_Q4_0",
    "boxes": "EOK_GEN_BOXES",
    "zeros": "EOK_GEN_ZEROS",
    "ties": "EOK_GEN_TIES",
}
_INT_RANGES = {
    "int8_t": (-128, 127),
    "uint8_t": (0, 255),
    "int16_t": (-32768, 32767),
    "uint16_t": (0, 65535),
}


def ref_name(task: KernelTask) -> str:
    return f"eok_ref_{task.function_name}"


def base_name(task: KernelTask) -> str:
    return f"eok_base_{task.function_name}"


def comp_name(task: KernelTask) -> str:
    return f"eok_comp_{task.function_name}"


def prototype(task: KernelTask, name: str | None = None) -> str:
    params = ", ".join(p.c_decl for p in task.params) or "void"
    return f"{task.return_type} {name or task.function_name}({params})"


def candidate_prelude(task: KernelTask) -> str:
    """Force-included into the candidate TU: a signature mismatch becomes a compile error there."""
    return f"#include <stddef.h>\n#include <stdint.h>\n{prototype(task)};\n"


def generate(task: KernelTask) -> str:
    """The complete harness.c for `task`."""
    template = TEMPLATE.read_text()
    if MARKER not in template:
        raise RuntimeError(f"{TEMPLATE} lacks the {MARKER} marker")
    return template.replace(MARKER, _task_block(task))


def _c_num(v: float) -> str:
    if math.isinf(v):
        return "__builtin_inf()" if v > 0 else "-__builtin_inf()"
    if math.isnan(v):
        return '__builtin_nan("")'
    text = repr(float(v))
    return text if any(c in text for c in ".e") else text + ".0"


def _range(task: KernelTask, p: Param) -> tuple[float, float]:
    arg = task.args[p.name]
    if arg.range is not None:
        return arg.range
    gen = arg.gen or "uniform"
    if gen == "positive":
        return (0.1, 2.0)
    if gen in ("q8_0", "q4_0"):
        return (0.002, 0.02)  # the fp16 block scale d: typical of quantized weights and activations
    if p.type.kind != "float" and gen not in ("fp16",):
        lo, hi = _INT_RANGES.get(p.ctype, (-1000, 1000))
        return (0.0 if p.type.kind == "uint" else lo, hi)
    return (-1.0, 1.0)


def _buf_entry(task: KernelTask, p: Param, index: int) -> str:
    arg = task.args[p.name]
    kind = {"in": "EOK_IN", "out": "EOK_OUT", "inout": "EOK_INOUT"}[arg.kind]
    gen = _GEN_CODES[arg.gen or "uniform"]  # plain outputs are poisoned, not generated
    lo, hi = _range(task, p)
    scales = f"eok_scales_{index}, {len(arg.scales)}" if arg.scales else "0, 0"
    specials = f"eok_specials_{index}, {len(arg.specials)}, {arg.special_every}" if arg.specials else "0, 0, 0"
    return (
        f'{{"{p.name}", EOK_{p.type.code}, {kind}, {gen}, {_c_num(lo)}, {_c_num(hi)}, '
        f"{_c_num(arg.scale or 1.0)}, {int(arg.compare == 'fp16')}, {scales}, {specials}}}"
    )


def _special_arrays(task: KernelTask) -> list[str]:
    """The per-buffer value tables `_buf_entry` points at (docs/TASKS.md, "Special values")."""
    lines = []
    for i, p in enumerate(task.buffers):
        arg = task.args[p.name]
        for name, values in (("scales", arg.scales), ("specials", arg.specials)):
            if values:
                lines.append(f"static const double eok_{name}_{i}[] = {{{', '.join(map(_c_num, values))}}};")
    return lines


def _scalar_entry(task: KernelTask, p: Param) -> str:
    arg = task.args[p.name]
    if arg.value is not None:
        return f'{{"{p.name}", EOK_{p.type.code}, EOK_GEN_CONST, {_c_num(arg.value)}, 0.0, 1.0}}'
    lo, hi = _range(task, p)
    return f'{{"{p.name}", EOK_{p.type.code}, {_GEN_CODES[arg.gen or "uniform"]}, {_c_num(lo)}, {_c_num(hi)}, ' + (
        f"{_c_num(arg.scale or 1.0)}}}"
    )


def _c_expr(expr: str) -> str:
    """A spec expression as C: min/max become the harness's long long helpers."""
    return re.sub(r"\b(min|max)\s*\(", r"eok_\1(", expr)


def _locals(task: KernelTask) -> list[str]:
    """Declarations binding every parameter from the harness's arrays, in signature order."""
    lines: list[str] = []
    sizes = task.size_params
    buffers = [p.name for p in task.buffers]
    scalars = [p.name for p in task.scalars]
    for p in task.params:
        if p.role == "size":
            lines.append(f"{p.c_decl} = ({p.ctype})eok_sz[{sizes.index(p.name)}];")
        elif p.role == "scalar":
            field = "f64" if p.type.kind == "float" else "i64"
            lines.append(f"{p.c_decl} = ({p.ctype})eok_s[{scalars.index(p.name)}].{field};")
        else:
            cast = f"{'const ' if p.const else ''}{p.ctype} *"
            lines.append(f"{p.c_decl} = ({cast})eok_p[{buffers.index(p.name)}];")
    return lines


def _call_fn(task: KernelTask, with_markers: bool) -> str:
    args = ", ".join(p.name for p in task.params)
    ret = task.return_type
    name = "eok_model_call" if with_markers else "eok_call"
    extra = "" if with_markers else ", eok_value *eok_r"
    head = (
        f"static void {name}(int eok_which, const long long *eok_sz, void *const *eok_p, "
        f"const eok_value *eok_s{extra}) {{"
    )
    body = ["    " + line for line in _locals(task)]
    body.append("    (void)eok_sz; (void)eok_p; (void)eok_s;")
    if ret != "void":
        body.append(f"    {ret} eok_v = 0;")
    cases = [
        ("EOK_REF", ref_name(task)),
        ("EOK_BASE", base_name(task)),
        ("EOK_COMP", comp_name(task)),
        ("EOK_CAND", task.function_name),
    ]
    body.append("    switch (eok_which) {")
    for label, fn in cases:
        call = f"{fn}({args});" if ret == "void" else f"eok_v = {fn}({args});"
        if with_markers:
            call = f"eok_region_begin(); {call} eok_region_end();"
        body.append(f"    {'default' if label == 'EOK_CAND' else 'case ' + label}: {call} break;")
    body.append("    }")
    if ret != "void":
        if with_markers:
            body.append("    eok_sink = (double)eok_v;")
        else:
            field = "f64" if C_TYPES[ret].kind == "float" else "i64"
            cast = "double" if field == "f64" else "int64_t"
            body.append(f"    eok_r->{field} = ({cast})eok_v;")
    elif not with_markers:
        body.append("    (void)eok_r;")
    return "\n".join([head, *body, "}"])


def _valid_fn(task: KernelTask) -> str:
    lines = [
        "static long long eok_valid(int eok_b_, const long long *eok_sz, const eok_value *eok_r) {",
        *[f"    long long {n} = eok_sz[{i}]; (void){n};" for i, n in enumerate(task.size_params)],
        "    long long ret = eok_r->i64; (void)ret; (void)eok_sz;",
        "    switch (eok_b_) {",
    ]
    for i, p in enumerate(task.buffers):
        valid = task.args[p.name].valid
        if valid:
            lines.append(f"    case {i}: return (long long)({_c_expr(valid)});")
    lines += ["    default: return -1;", "    }", "}"]
    return "\n".join(lines)


def _task_block(task: KernelTask) -> str:
    nsp, nbuf, nsc = len(task.size_params), len(task.buffers), len(task.scalars)
    ret_code = "EOK_NONE" if task.return_type == "void" else f"EOK_{C_TYPES[task.return_type].code}"
    size_rows = ", ".join("{" + ", ".join([*(str(s[n]) for n in task.size_params), "0"]) + "}" for s in task.sizes)
    count_rows = ", ".join("{" + ", ".join([*(str(c[p.name]) for p in task.buffers), "0"]) + "}" for c in task.counts)
    names = ", ".join([*(f'"{n}"' for n in task.size_params), "0"])
    bufs = ",\n    ".join([*(_buf_entry(task, p, i) for i, p in enumerate(task.buffers)), "{0}"])
    scalars = ",\n    ".join([*(_scalar_entry(task, p) for p in task.scalars), "{0}"])
    tol = task.tolerance
    return "\n".join(
        [
            f"/* ---- task {task.name}: generated by evaluator/harness.py v{HARNESS_VERSION} ---- */",
            f"#define EOK_NSIZES {len(task.sizes)}",
            f"#define EOK_NSP {nsp}",
            f"#define EOK_NBUF {nbuf}",
            f"#define EOK_NSCALAR {nsc}",
            f"#define EOK_BENCH {task.bench_index}",
            f"#define EOK_RET_TYPE {ret_code}",
            "",
            f"{prototype(task)};",
            f"{prototype(task, ref_name(task))};",
            f"{prototype(task, base_name(task))};",
            f"{prototype(task, comp_name(task))};",
            "",
            f"static const char *const eok_size_names[EOK_NSP + 1] = {{{names}}};",
            f"static const long long eok_size_values[EOK_NSIZES][EOK_NSP + 1] = {{{size_rows}}};",
            f"static const long long eok_counts[EOK_NSIZES][EOK_NBUF + 1] = {{{count_rows}}};",
            *_special_arrays(task),
            f"static const eok_buf_spec eok_bufs[EOK_NBUF + 1] = {{\n    {bufs}}};",
            f"static const eok_scalar_spec eok_scalars[EOK_NSCALAR + 1] = {{\n    {scalars}}};",
            f"static const double eok_rtol = {_c_num(tol.rtol)}, eok_atol = {_c_num(tol.atol)};",
            f"static const double eok_norm_tol = {_c_num(tol.norm_bound)};",
            "static volatile double eok_sink;",
            "",
            _valid_fn(task),
            "",
            _call_fn(task, with_markers=False),
            "",
            _call_fn(task, with_markers=True),
            "/* ---- end of task block ---- */",
        ]
    )
