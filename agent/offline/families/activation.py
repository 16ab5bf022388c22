"""Elementwise transcendental activations: exp, sigmoid, SiLU, tanh, GELU (tanh form and exact erf form).

Applies to any `void f(int n, const float *x, float *y)` task with n elements in and out whose reference
computes one of these functions (read from the reference code, the description, then the name). The
kernel streams x in vector chunks of VLMAX(e32, LMUL), `unroll` independent chunks per iteration so the
in-order X60 can overlap their dependency chains, and a vsetvl loop for the tail. The math is in
rvv_math (error bounds there); knobs: LMUL, unroll, exp polynomial degree, reciprocal method, and the
erfcx degree for exact GELU.
"""

from __future__ import annotations

import re

from agent.offline.base import Knob, KnobValue, Variant, register
from agent.offline.families import rvv_math as rm
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Technique

KINDS = ("exp", "sigmoid", "silu", "tanh", "gelu_tanh", "gelu_erf")
GELU_C = 0.7978845608028654  # sqrt(2/pi)
GELU_C3 = 0.044715


def unary_f32(task: KernelTask) -> tuple[str, str, str] | None:
    """(n, x, y) names when the task is `void f(int n, const float *x, float *y)` with n elements each."""
    ps = task.params
    if task.return_type != "void" or len(ps) != 3:
        return None
    n, x, y = ps
    if n.role != "size" or not rm.is_f32_pointer(x, const=True) or not rm.is_f32_pointer(y, const=False):
        return None
    return (n.name, x.name, y.name) if rm.all_counts_equal(task, [x.name, y.name], n.name) else None


def activation_kind(task: KernelTask) -> str | None:
    """Which activation the reference computes, or None."""
    if unary_f32(task) is None:
        return None
    ref, desc, name = rm.squash(task.reference_code), rm.squash(task.description.lower()), task.name.lower()
    if "erff(" in ref or "erf(" in desc:
        return "gelu_erf"
    if "tanhf(" in ref and "0.044715" in ref:
        return "gelu_tanh"
    if "tanhf(" in ref or "tanh(x" in desc:
        return "tanh"
    if re.search(r"=(\w+)/\(1\.0f?\+expf\(-\1\)\)", ref) or "silu" in name or "swish" in desc:
        return "silu"
    if re.search(r"=1\.0f?/\(1\.0f?\+expf\(-\w+\)\)", ref) or "sigmoid" in name:
        return "sigmoid"
    if re.search(r"\w+\[\w+\]=expf\(\w+(\[\w+\])?\);", ref) and ref.count("expf(") == 1:
        return "exp"
    return None


@register
class ActivationFamily:
    name = "activation"

    def applies(self, task: KernelTask) -> bool:
        return activation_kind(task) is not None

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        kind = activation_kind(task) or "exp"
        rtol = max(task.tolerance.rtol, 1e-7)
        # Defaults from the modeled-X60 sweep (scripts/bench_offline_nn.py): the longer the function, the
        # more registers each chain needs, so exact GELU prefers LMUL 1 and tanh-GELU two chains.
        out = [
            rm.knob("lmul", [1, 2, 4, 8], Technique.VECTOR_LENGTH, 1 if kind == "gelu_erf" else 2),
            rm.knob("unroll", [1, 2, 4, 8], Technique.UNROLL, 2 if kind == "gelu_tanh" else 4),
            rm.knob("exp_degree", rm.exp_degrees(rtol), Technique.APPROXIMATION, 5 if kind == "gelu_erf" else 4),
        ]
        if kind != "exp":
            out.append(rm.knob("recip", list(rm.RECIP_MODES), Technique.APPROXIMATION, "nr2"))
        if kind == "gelu_erf":
            out.append(rm.knob("erfcx_degree", sorted(rm.ERFCX_COEFFS), Technique.APPROXIMATION, 5))
        return out

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        kind = activation_kind(task)
        names = unary_f32(task)
        if kind is None or names is None:
            raise rm.InvalidInput(f"task {task.name!r} is not an activation this family implements")
        spec = self.knobs(task, target)
        k = rm.resolve_knobs(self.name, spec, knobs)
        src = rm.CSource()
        fn = _value_helper(src, kind, k)
        kernel = rm.elementwise_loop(task, names, int(k["lmul"]), int(k["unroll"]), fn)
        desc = f"{kind} via RVV: LMUL m{k['lmul']}, unroll {k['unroll']}, exp degree {k['exp_degree']}"
        code = src.render(kernel, f"{task.name}: {desc} (offline generator, family activation).")
        return rm.make_variant(
            self.name, spec, k, code, desc, (Technique.VECTORIZE, Technique.APPROXIMATION, Technique.TAIL_HANDLING)
        )


def _value_helper(src: rm.CSource, kind: str, k: dict[str, KnobValue]) -> str:
    """Add the helper computing the activation of one vector; return its name."""
    lmul, deg = int(k["lmul"]), int(k["exp_degree"])
    s, t = rm.suffix("f", 32, lmul), rm.vtype("f", 32, lmul)
    if kind == "exp":
        return rm.exp_f32(src, lmul, deg)
    recip = str(k["recip"])
    if kind == "sigmoid":
        return rm.sigmoid_f32(src, lmul, deg, recip)
    if kind == "tanh":
        return rm.tanh_f32(src, lmul, deg, recip)
    if kind == "gelu_erf":
        phi = rm.phi_f32(src, lmul, deg, int(k["erfcx_degree"]), recip)
        body = f"    return __riscv_vfmul_vv_{s}(x, {phi}(x, vl), vl);"
    else:
        exp, rcp = rm.exp_f32(src, lmul, deg, tails="nan"), rm.recip_f32(src, lmul, recip)
        if kind == "silu":  # x / (1 + e^-x)
            arg = f"__riscv_vfneg_v_{s}(x, vl)"
        else:  # gelu_tanh: 0.5x(1 + tanh(u)) = x / (1 + e^(-2u)), u = c x (1 + 0.044715 x^2)
            arg = (
                f"__riscv_vfmul_vv_{s}(x, __riscv_vfmadd_vf_{s}(__riscv_vfmul_vv_{s}(x, x, vl), "
                f"{rm.c_float(-2.0 * GELU_C * GELU_C3)}, __riscv_vfmv_v_f_{s}({rm.c_float(-2.0 * GELU_C)}, vl), "
                "vl), vl)"
            )
        body = (
            f"    {t} e = {exp}({arg}, vl);\n"
            f"    return __riscv_vfmul_vv_{s}(x, {rcp}(__riscv_vfadd_vf_{s}(e, 1.0f, vl), vl), vl);"
        )
    name = f"nn_{kind}_{s}"
    return src.add(name, f"static inline {t} {name}({t} x, size_t vl)\n{{\n{body}\n}}")
