"""Generate the C harness for a task (templates/harness.c.in plus a task-specific block).

The same source is compiled twice. The trusted build (-DEOK_TRUSTED) links the reference
(`eok_ref_<fn>`, renamed with -D when compiling reference.c), the plain baseline (`eok_base_<fn>`, the
reference built with the target's baseline flags, `clang -O3`) and the competent baseline
(`eok_comp_<fn>`, built with the flags the task's tolerance allows: `toolchain.competent_cflags`) and,
with -DEOK_LIBRARY, a built library's routine through its adapter (`eok_lib_<fn>`): it generates inputs
and expected outputs and runs the baselines for timing. The
candidate build links the candidate (`<fn>`) alone: it only reads inputs and writes raw outputs. No
candidate code is ever in the process that makes inputs or expected outputs (docs/EVALUATION.md).
"""

from __future__ import annotations

import math
from pathlib import Path

from evaluator.tasks import C_TYPES, KernelTask, Param

TEMPLATE = Path(__file__).resolve().parent / "templates" / "harness.c.in"
HARNESS_VERSION = "9"  # bump when generated code or template semantics change: part of every cache key
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


def lib_name(task: KernelTask) -> str:
    """The library adapter's name (evaluator/upstream/baseline.py), linked only with -DEOK_LIBRARY."""
    return f"eok_lib_{task.function_name}"


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
    specials = (
        f"eok_specials_{index}, {len(arg.specials)}, {arg.special_every or 0}, {_c_num(arg.special_fraction or 0.0)}"
        if arg.specials
        else "0, 0, 0, 0.0"
    )
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
    for i, p in enumerate(task.scalars):
        if values := task.args[p.name].values:
            lines.append(f"static const double eok_svalues_{i}[] = {{{', '.join(map(_c_num, values))}}};")
    return lines


def _scalar_entry(task: KernelTask, p: Param, index: int) -> str:
    arg = task.args[p.name]
    # per listed size (docs/TASKS.md, "Library-grade contracts"); left out when unused, so the entries of
    # tasks without `values` are what they were
    values = f", eok_svalues_{index}, {len(arg.values)}" if arg.values else ""
    if arg.value is not None:
        return f'{{"{p.name}", EOK_{p.type.code}, EOK_GEN_CONST, {_c_num(arg.value)}, 0.0, 1.0{values}}}'
    lo, hi = _range(task, p)
    return f'{{"{p.name}", EOK_{p.type.code}, {_GEN_CODES[arg.gen or "uniform"]}, {_c_num(lo)}, {_c_num(hi)}, ' + (
        f"{_c_num(arg.scale or 1.0)}{values}}}"
    )


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


def _call_fn(task: KernelTask) -> str:
    """eok_call(which, ...): the reference and the baselines in the trusted build, the candidate otherwise.

    Timed kernels (baseline, candidate) run between the region markers the cost model looks for.
    """
    args = ", ".join(p.name for p in task.params)
    ret = task.return_type
    head = (
        "static void eok_call(int eok_which, const long long *eok_sz, void *const *eok_p, "
        "const eok_value *eok_s, eok_value *eok_r) {"
    )
    body = ["    " + line for line in _locals(task)]
    body.append("    (void)eok_sz; (void)eok_p; (void)eok_s; (void)eok_which;")
    if ret != "void":
        body.append(f"    {ret} eok_v = 0;")

    def call(fn: str, marked: bool) -> str:
        text = f"{fn}({args});" if ret == "void" else f"eok_v = {fn}({args});"
        return f"eok_region_begin(); {text} eok_region_end();" if marked else text

    body += [
        "#ifdef EOK_TRUSTED",
        f"    if (eok_which == EOK_REF) {{ {call(ref_name(task), False)} }}",
        f"    else if (eok_which == EOK_COMP) {{ {call(comp_name(task), True)} }}",
        "#ifdef EOK_LIBRARY",
        f"    else if (eok_which == EOK_LIB) {{ {call(lib_name(task), True)} }}",
        "#endif",
        f"    else {{ {call(base_name(task), True)} }}",
        "#else",
        f"    {call(task.function_name, True)}",
        "#endif",
    ]
    if ret != "void":
        field = "f64" if C_TYPES[ret].kind == "float" else "i64"
        cast = "double" if field == "f64" else "int64_t"
        body.append(f"    eok_r->{field} = ({cast})eok_v;")
    else:
        body.append("    (void)eok_r;")
    return "\n".join([head, *body, "}"])


def _task_block(task: KernelTask) -> str:
    nsp, nbuf, nsc = len(task.size_params), len(task.buffers), len(task.scalars)
    ret_code = "EOK_NONE" if task.return_type == "void" else f"EOK_{C_TYPES[task.return_type].code}"
    bufs = ",\n    ".join([*(_buf_entry(task, p, i) for i, p in enumerate(task.buffers)), "{0}"])
    scalars = ",\n    ".join([*(_scalar_entry(task, p, i) for i, p in enumerate(task.scalars)), "{0}"])
    return "\n".join(
        [
            f"/* ---- task {task.name}: generated by evaluator/harness.py v{HARNESS_VERSION} ---- */",
            f"#define EOK_NSP {nsp}",
            f"#define EOK_NBUF {nbuf}",
            f"#define EOK_NSCALAR {nsc}",
            f"#define EOK_RET_TYPE {ret_code}",
            "",
            "#ifdef EOK_TRUSTED",
            f"{prototype(task, ref_name(task))};",
            f"{prototype(task, base_name(task))};",
            f"{prototype(task, comp_name(task))};",
            "#ifdef EOK_LIBRARY",
            f"{prototype(task, lib_name(task))};",
            "#endif",
            "#else",
            f"{prototype(task)};",
            "#endif",
            "",
            *_special_arrays(task),
            f"static const eok_buf_spec eok_bufs[EOK_NBUF + 1] = {{\n    {bufs}}};",
            f"__attribute__((unused)) static const eok_scalar_spec eok_scalars[EOK_NSCALAR + 1] = {{\n    {scalars}}};",
            "",
            _call_fn(task),
            "/* ---- end of task block ---- */",
        ]
    )
