"""Shared pieces of the NN operator families: RVV type names, C source assembly, and vector math.

The vector math (exp, reciprocal, sigmoid, tanh, the normal CDF) is written from the math, not taken
from a library. Each generator returns the name of a `static inline` C helper it adds to a `CSource`;
helpers are keyed by (function, LMUL, parameters), so one source can hold several variants.

Error bounds (relative, f32 evaluation, measured by `approximation_error` and checked by the tests):

exp(x)   the full float range, as C's expf: +inf above ln(FLT_MAX) = 88.72, denormals below -87.34,
         exactly 0 below -103.97 (half the smallest denormal) and for -inf, NaN for NaN. x is clamped
         to [-104, 89] (n then fits the split below; the clamped ends still overflow to inf and
         underflow to 0), n = round(x*log2(e)) through the 1.5*2^23 shifter (one FMA; the low mantissa
         bits of the shifted value are n), r = x - n*ln2 in two steps (ln2 split into a short head,
         exact in n*head, and a tail), and e^r on [-ln2/2, ln2/2] by a polynomial fitted as a discrete
         minimax of the relative error (LP over 3001 points). `EXP_ERROR[d]` is the bound of degree d
         including f32 rounding. The result is 2^n * p(r) with 2^n split into 2^a * 2^b, a = floor(n/2),
         b = n - a (both normal for n in [-150, 128]): 2^a is added into the exponent bits of p(r)
         (exact), the multiplication by 2^b rounds once, to inf, a denormal or 0 as IEEE prescribes.
         A NaN lane is set back to NaN at the end (the clamp's vfmin/vfmax would turn it into a number).
         Cost: 5 vector operations per strip more than a clamp to the normal range.
         `tails` picks what a caller needs: "ieee" is the above; "nan" clamps to [-87.33, 88.72] (results
         FLT_MIN..FLT_MAX, 2^n added into the exponent bits of p(r), 2 operations fewer than "ieee") and
         keeps NaN, for tasks whose atol is far above FLT_MIN and that have no exact zeros (sigmoid, SiLU,
         tanh, GELU, log-softmax); "clamped" drops the NaN check too, for arguments that are never NaN
         (attention's and RWKV's differences of finite inputs).
1/d      `vfrec7` (7-bit estimate) refined by Newton steps r += r*(1 - d*r): 14 bits after one step,
         full f32 (~1 ulp) after two; 1/+inf is set to 0 (the step would make inf*0 = NaN: Phi's
         t = 1/(1 + |x|/2sqrt2) at x = inf). "div" uses `vfrdiv` instead (exact, but slow on the X60).
sigmoid  1/(1 + e^-x): relative error <= exp error (the factor e/(1+e) < 1) + reciprocal error.
tanh     sign(x) * (1 - e)/(1 + e) with e = e^(-2|x|): no overflow; near 0 the error is absolute,
         a few ulp of 1 (the task tolerances carry an atol for that).
Phi(x)   the normal CDF, for exact GELU x*Phi(x). With h = Phi(-|x|) = 0.5*e^(-x^2/2)*erfcx(|x|/sqrt2),
         Phi = 1 - h for x >= 0 and h for x < 0: no cancellation on either side. erfcx(z) (smooth,
         1 at 0, ~1/(z sqrt(pi)) at infinity) is a polynomial in t = 1/(1 + z/2), fitted as a minimax of
         the relative error on z in [0, 9.5] (beyond, e^(-z^2) underflows). `ERFCX_ERROR[d]` bounds it.

The minimax fits were made once, offline, as linear programs (minimize t subject to |w(x)(p(x) - f(x))|
<= t on the grid; scipy's HiGHS), the coefficients rounded to f32; `approximation_error` re-measures
the rounded polynomials with numpy, so the bounds above are checked, not just quoted.

Also here: fp16 scalar helpers (Zfh conversion, exact bit-level fallback without it), and what every
family shares: knob resolution with clear errors, Variant construction, signature / element-count
checks used for detection, register-type naming from SEW/LMUL/VLEN, and the elementwise vector loop.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from agent.offline.base import Knob, KnobValue, Variant
from core.errors import InvalidInput
from evaluator.tasks import KernelTask, Param
from knowledge.taxonomy import Technique

LMULS = (1, 2, 4, 8)
LN2_HI = 0.693145751953125  # 0x3f317200: n * LN2_HI is exact for |n| <= 2^8
LN2_LO = 1.428606820309417e-06  # ln2 - LN2_HI
SHIFTER = 12582912.0  # 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits
# The clamp of exp's argument: below -103.97 e^x rounds to 0 and above 88.73 to inf, so clamping to
# [-104, 89] changes no result; it keeps n = round(x*log2 e) in [-150, 128] for the 2^a * 2^b split.
EXP_LO, EXP_HI = -104.0, 89.0
NORMAL_LO, NORMAL_HI = -87.33, 88.72  # tails "nan", "clamped": 2^n stays normal (n in [-126, 128], r < 0 at 128)
FLT_MAX = 3.4028234663852886e38

# e^r on [-ln2/2, ln2/2], coefficients c0..cd (f32 values; c0 = 1 so e^0 is exactly 1: a row of one
# element gives softmax 1 and log-softmax 0 exactly, and online rescaling by e^0 loses nothing), and the
# measured relative error bound.
EXP_COEFFS: dict[int, tuple[float, ...]] = {
    3: (1.0, 1.0001962184906006, 0.504134476184845, 0.1651782989501953),
    4: (1.0, 0.9999670386314392, 0.5000315308570862, 0.16787420213222504, 0.04150296002626419),
    5: (
        1.0,
        0.9999996423721313,
        0.4999910891056061,
        0.16667751967906952,
        0.04190186411142349,
        0.008286552503705025,
    ),
    6: (
        1.0,
        1.0,
        0.4999995231628418,
        0.16666434705257416,
        0.04167598858475685,
        0.008375841192901134,
        0.001347975223325193,
    ),
}
EXP_ERROR: dict[int, float] = {3: 1.03e-4, 4: 3.0e-6, 5: 1.7e-7, 6: 9.5e-8}

# erfcx(z) as a polynomial in t = 1/(1 + z/2), z in [0, 9.5]; relative error bounds.
ERFCX_COEFFS: dict[int, tuple[float, ...]] = {
    5: (
        0.0005262362537905574,
        0.2729668915271759,
        0.34418126940727234,
        0.03634481504559517,
        0.5434654951095581,
        -0.19746766984462738,
    ),
    7: (
        -3.471699164947495e-05,
        0.2829873561859131,
        0.2726181447505951,
        0.30100563168525696,
        -0.005172846373170614,
        0.44290125370025635,
        -0.3918888568878174,
        0.09758440405130386,
    ),
}
ERFCX_ERROR: dict[int, float] = {5: 1.8e-5, 7: 6.5e-7}
ERFCX_A = 0.5  # t = 1/(1 + ERFCX_A*z)

RECIP_MODES = ("nr2", "div")
RECIP_ERROR = {"nr2": 2.4e-7, "div": 6e-8}


# ------------------------------------------------------------------------------------------ type names


def lmul_tag(lmul: int | str) -> str:
    """1 -> 'm1', 'f2' -> 'mf2' (fractional LMULs are written f2/f4/f8)."""
    return f"m{lmul}"


def suffix(kind: str, sew: int, lmul: int | str) -> str:
    """('f', 32, 4) -> 'f32m4', the intrinsic suffix."""
    return f"{kind}{sew}{lmul_tag(lmul)}"


def vtype(kind: str, sew: int, lmul: int | str) -> str:
    """('f', 32, 4) -> 'vfloat32m4_t'."""
    base = {"f": "float", "i": "int", "u": "uint"}[kind]
    return f"v{base}{sew}{lmul_tag(lmul)}_t"


def lmul_ratio(lmul: int | str) -> float:
    text = str(lmul)
    return 1.0 / int(text[1:]) if text.startswith("f") else float(text)


def mask_type(sew: int, lmul: int | str) -> str:
    """The vboolN_t of an SEW/LMUL pair: N = SEW / LMUL."""
    return f"vbool{int(sew / lmul_ratio(lmul))}_t"


def vlmax(sew: int, lmul: int | str, vlen: int) -> int:
    return int(vlen * lmul_ratio(lmul) // sew)


def c_float(v: float) -> str:
    """A float literal that round-trips to the same f32 value."""
    text = repr(float(v))
    if "e" not in text and "." not in text and "inf" not in text:
        text += ".0"
    return text + "f"


@dataclass
class CSource:
    """A candidate file being assembled: headers, static helpers (deduplicated by name), the kernel."""

    headers: tuple[str, ...] = ("riscv_vector.h", "stddef.h", "stdint.h")
    helpers: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, code: str) -> str:
        self.helpers.setdefault(name, code.strip("\n"))
        return name

    def render(self, kernel: str, comment: str = "") -> str:
        parts = []
        if comment:
            parts.append("/* " + comment.strip().replace("*/", "* /") + " */")
        parts.append("\n".join(f"#include <{h}>" for h in self.headers))
        parts.extend(self.helpers.values())
        parts.append(kernel.strip("\n"))
        return "\n\n".join(parts) + "\n"


# ---------------------------------------------------------------------------------------- vector math


def _horner(lines: list[str], s: str, t: str, var: str, x: str, coeffs: tuple[float, ...]) -> None:
    """Append C lines computing var = sum c_i x^i (Horner, one FMA per degree)."""
    top = len(coeffs) - 1
    lines.append(
        f"    {t} {var} = __riscv_vfmacc_vf_{s}(__riscv_vfmv_v_f_{s}({c_float(coeffs[top - 1])}, vl), "
        f"{c_float(coeffs[top])}, {x}, vl);"
    )
    for c in reversed(coeffs[: top - 1]):
        lines.append(f"    {var} = __riscv_vfmadd_vv_{s}({var}, {x}, __riscv_vfmv_v_f_{s}({c_float(c)}, vl), vl);")


EXP_TAILS = ("ieee", "nan", "clamped")


def exp_f32(src: CSource, lmul: int, degree: int, tails: str = "ieee") -> str:
    """Add `nn_exp_<sfx>_d<degree>_<tails>(x, vl)`: e^x on f32 lanes, relative error <= EXP_ERROR[degree];
    beyond the normal range as `tails` says (module notes: "ieee" as expf, "nan", "clamped")."""
    if degree not in EXP_COEFFS:
        raise InvalidInput(f"exp polynomial degree {degree} is not available", f"use one of {sorted(EXP_COEFFS)}")
    if tails not in EXP_TAILS:
        raise InvalidInput(f"exp tails {tails!r} are not available", f"use one of {EXP_TAILS}")
    s, t, it = suffix("f", 32, lmul), vtype("f", 32, lmul), vtype("i", 32, lmul)
    si, b = suffix("i", 32, lmul), int(32 / lmul_ratio(lmul))
    full_range, keep_nan = tails == "ieee", tails != "clamped"
    name = f"nn_exp_{s}_d{degree}_{tails}"
    lo, hi = (EXP_LO, EXP_HI) if full_range else (NORMAL_LO, NORMAL_HI)
    scaling = (
        "times 2^a (exponent bits) times 2^b (one rounding: inf, denormal or 0), a + b = n"
        if full_range
        else "2^n added into the exponent bits (results FLT_MIN..FLT_MAX)"
    )
    lines = [
        f"/* e^x: clamp to [{lo}, {hi}], n = round(x*log2e) by the 1.5*2^23 shifter, r = x - n*ln2 (two-part",
        f"   ln2), degree-{degree} minimax polynomial for e^r on [-ln2/2, ln2/2] (rel. error <= "
        f"{EXP_ERROR[degree]:.1e}),",
        f"   {scaling}; " + ("a NaN input stays NaN (the clamp would make it a number). */" if keep_nan else "*/"),
        f"static inline {t} {name}({t} x, size_t vl)",
        "{",
        *([f"    {mask_type(32, lmul)} nan = __riscv_vmfne_vv_{s}_b{b}(x, x, vl);"] if keep_nan else []),
        f"    {t} xc = __riscv_vfmin_vf_{s}(__riscv_vfmax_vf_{s}(x, {c_float(lo)}, vl), {c_float(hi)}, vl);",
        f"    {t} sh = __riscv_vfmadd_vf_{s}(xc, {c_float(1.0 / math.log(2.0))}, "
        f"__riscv_vfmv_v_f_{s}({c_float(SHIFTER)}, vl), vl);",
        f"    {t} n = __riscv_vfsub_vf_{s}(sh, {c_float(SHIFTER)}, vl);",
        f"    {t} r = __riscv_vfnmsac_vf_{s}(xc, {c_float(LN2_HI)}, n, vl);",
        f"    r = __riscv_vfnmsac_vf_{s}(r, {c_float(LN2_LO)}, n, vl);",
    ]
    _horner(lines, s, t, "p", "r", EXP_COEFFS[degree])
    # e = n << 23 (n in the top 9 bits, signed: the low mantissa bits of the shifted value are n)
    lines.append(f"    {it} e = __riscv_vsll_vx_{si}(__riscv_vreinterpret_v_{s}_{si}(sh), 23, vl);")
    if full_range:  # a = floor(n/2) = e >> 24; 2^b = bits((n - a + 127) << 23)
        lines += [
            f"    {it} a = __riscv_vsll_vx_{si}(__riscv_vsra_vx_{si}(e, 24, vl), 23, vl);",
            f"    {it} pa = __riscv_vadd_vv_{si}(__riscv_vreinterpret_v_{s}_{si}(p), a, vl);",
            f"    {it} sb = __riscv_vadd_vx_{si}(__riscv_vsub_vv_{si}(e, a, vl), 127 << 23, vl);",
            f"    {t} y = __riscv_vfmul_vv_{s}(__riscv_vreinterpret_v_{si}_{s}(pa), "
            f"__riscv_vreinterpret_v_{si}_{s}(sb), vl);",
        ]
    else:
        lines += [
            f"    {it} pe = __riscv_vadd_vv_{si}(__riscv_vreinterpret_v_{s}_{si}(p), e, vl);",
            f"    {t} y = __riscv_vreinterpret_v_{si}_{s}(pe);",
        ]
    nan = f'__riscv_vfmerge_vfm_{s}(y, __builtin_nanf(""), nan, vl)' if keep_nan else "y"
    lines += [f"    return {nan};", "}"]
    return src.add(name, "\n".join(lines))


def recip_f32(src: CSource, lmul: int, mode: str, of_inf: bool = False) -> str:
    """Add `nn_recip_<sfx>_<mode>(d, vl)`: 1/d by vfrec7 + two Newton steps ("nr2") or vfrdiv ("div");
    `of_inf`: d may be +inf (the Newton steps need 1/inf set to 0)."""
    if mode not in RECIP_MODES:
        raise InvalidInput(f"reciprocal mode {mode!r} is not available", f"use one of {RECIP_MODES}")
    s, t = suffix("f", 32, lmul), vtype("f", 32, lmul)
    name = f"nn_recip_{s}_{mode}" + ("_inf" if of_inf and mode == "nr2" else "")
    if mode == "div":
        body = f"    return __riscv_vfrdiv_vf_{s}(d, 1.0f, vl);"
    else:
        step = (
            f"    e = __riscv_vfnmsac_vv_{s}(__riscv_vfmv_v_f_{s}(1.0f, vl), d, r, vl);\n"
            f"    r = __riscv_vfmacc_vv_{s}(r, r, e, vl);"
        )
        # 1/+inf = 0 (the Newton step would give inf*0 = NaN); a caller's d is >= 1, inf or NaN
        inf = f"__riscv_vmfgt_vf_{s}_b{int(32 / lmul_ratio(lmul))}(d, {c_float(FLT_MAX)}, vl)"
        ret = f"__riscv_vfmerge_vfm_{s}(r, 0.0f, {inf}, vl)" if of_inf else "r"
        body = f"    {t} r = __riscv_vfrec7_v_{s}(d, vl);\n    {t} e;\n{step}\n{step}\n    return {ret};"
    code = f"/* 1/d ({mode}) */\nstatic inline {t} {name}({t} d, size_t vl)\n{{\n{body}\n}}"
    return src.add(name, code)


def sigmoid_f32(src: CSource, lmul: int, degree: int, recip: str) -> str:
    """Add a helper computing 1/(1 + e^-x)."""
    s, t = suffix("f", 32, lmul), vtype("f", 32, lmul)
    exp, rcp = exp_f32(src, lmul, degree, tails="nan"), recip_f32(src, lmul, recip)
    name = f"nn_sigmoid_{s}_d{degree}_{recip}"
    code = (
        f"static inline {t} {name}({t} x, size_t vl)\n{{\n"
        f"    {t} e = {exp}(__riscv_vfneg_v_{s}(x, vl), vl);\n"
        f"    return {rcp}(__riscv_vfadd_vf_{s}(e, 1.0f, vl), vl);\n}}"
    )
    return src.add(name, code)


def tanh_f32(src: CSource, lmul: int, degree: int, recip: str) -> str:
    """Add a helper computing tanh(x) = sign(x) (1 - e)/(1 + e), e = e^(-2|x|)."""
    s, t = suffix("f", 32, lmul), vtype("f", 32, lmul)
    exp, rcp = exp_f32(src, lmul, degree, tails="nan"), recip_f32(src, lmul, recip)
    name = f"nn_tanh_{s}_d{degree}_{recip}"
    code = (
        f"static inline {t} {name}({t} x, size_t vl)\n{{\n"
        f"    {t} e = {exp}(__riscv_vfmul_vf_{s}(__riscv_vfabs_v_{s}(x, vl), -2.0f, vl), vl);\n"
        f"    {t} q = __riscv_vfmul_vv_{s}(__riscv_vfrsub_vf_{s}(e, 1.0f, vl), "
        f"{rcp}(__riscv_vfadd_vf_{s}(e, 1.0f, vl), vl), vl);\n"
        f"    return __riscv_vfsgnj_vv_{s}(q, x, vl);\n}}"
    )
    return src.add(name, code)


def phi_f32(src: CSource, lmul: int, exp_degree: int, erfcx_degree: int, recip: str) -> str:
    """Add a helper computing the normal CDF Phi(x) (see the module notes)."""
    if erfcx_degree not in ERFCX_COEFFS:
        raise InvalidInput(f"erfcx degree {erfcx_degree} is not available", f"use one of {sorted(ERFCX_COEFFS)}")
    s, t = suffix("f", 32, lmul), vtype("f", 32, lmul)
    exp, rcp = exp_f32(src, lmul, exp_degree, tails="nan"), recip_f32(src, lmul, recip, of_inf=True)
    name = f"nn_phi_{s}_d{exp_degree}_e{erfcx_degree}_{recip}"
    half = tuple(0.5 * c for c in ERFCX_COEFFS[erfcx_degree])  # fold h = 0.5 * e * erfcx
    lines = [
        f"/* Phi(x): h = Phi(-|x|) = 0.5 e^(-x^2/2) erfcx(|x|/sqrt2), erfcx by a degree-{erfcx_degree} polynomial",
        f"   in t = 1/(1 + |x|/(2 sqrt2)) (rel. error <= {ERFCX_ERROR[erfcx_degree]:.1e}); Phi = x < 0 ? h : 1 - h. */",
        f"static inline {t} {name}({t} x, size_t vl)",
        "{",
        f"    {t} t = {rcp}(__riscv_vfmadd_vf_{s}(__riscv_vfabs_v_{s}(x, vl), "
        f"{c_float(ERFCX_A / math.sqrt(2.0))}, __riscv_vfmv_v_f_{s}(1.0f, vl), vl), vl);",
    ]
    _horner(lines, s, t, "p", "t", half)
    lines += [
        f"    {t} e = {exp}(__riscv_vfmul_vf_{s}(__riscv_vfmul_vv_{s}(x, x, vl), -0.5f, vl), vl);",
        f"    {t} h = __riscv_vfmul_vv_{s}(e, p, vl);",
        f"    return __riscv_vmerge_vvm_{s}(__riscv_vfrsub_vf_{s}(h, 1.0f, vl), h, "
        f"__riscv_vmflt_vf_{suffix('f', 32, lmul)}_b{int(32 / lmul_ratio(lmul))}(x, 0.0f, vl), vl);",
        "}",
    ]
    return src.add(name, "\n".join(lines))


# ------------------------------------------------------------------------------- error verification


def _f32_horner(coeffs: tuple[float, ...], x: object) -> object:
    import numpy as np

    xv = np.asarray(x, dtype=np.float32)
    p = np.full_like(xv, np.float32(coeffs[-1]))
    for c in reversed(coeffs[:-1]):
        p = (p * xv + np.float32(c)).astype(np.float32)
    return p


def approximation_error(which: str, degree: int, points: int = 20001) -> float:
    """Max relative error of an embedded polynomial, evaluated in f32 (numpy) against float64 math.

    `which` is "exp" (e^r on [-ln2/2, ln2/2]) or "erfcx" (erfcx(z) on [0, 9.5] via t = 1/(1 + z/2)).
    The tests assert these stay below EXP_ERROR / ERFCX_ERROR.
    """
    import numpy as np

    if which == "exp":
        r = np.linspace(-math.log(2) / 2 * 1.0005, math.log(2) / 2 * 1.0005, points)
        got = np.asarray(_f32_horner(EXP_COEFFS[degree], r), dtype=np.float64)
        return float(np.max(np.abs(got / np.exp(r) - 1.0)))
    if which == "erfcx":
        z = np.linspace(0.0, 9.5, points)
        want = np.array([math.erfc(v) * math.exp(v * v) for v in z])
        t = (1.0 / (1.0 + ERFCX_A * z)).astype(np.float32)
        got = np.asarray(_f32_horner(ERFCX_COEFFS[degree], t), dtype=np.float64)
        return float(np.max(np.abs(got / want - 1.0)))
    raise InvalidInput(f"unknown approximation {which!r}", "use 'exp' or 'erfcx'")


# ------------------------------------------------------------------------------- family scaffolding


def resolve_knobs(family: str, knobs: list[Knob], given: dict[str, KnobValue]) -> dict[str, KnobValue]:
    """Defaults filled in; an unknown knob or a value outside the knob's list is an InvalidInput."""
    by_name = {k.name: k for k in knobs}
    for name, value in given.items():
        if name not in by_name:
            raise InvalidInput(
                f"family {family!r}: unknown knob {name!r}", f"known knobs: {', '.join(by_name) or 'none'}"
            )
        if value not in by_name[name].values:
            raise InvalidInput(
                f"family {family!r}: knob {name!r} cannot be {value!r}",
                f"use one of {by_name[name].values}",
            )
    return {k.name: given.get(k.name, k.default) for k in knobs}


def make_variant(
    family: str,
    knobs: list[Knob],
    setting: dict[str, KnobValue],
    code: str,
    description: str,
    base: tuple[Technique, ...] = (Technique.VECTORIZE, Technique.TAIL_HANDLING),
) -> Variant:
    """A Variant whose techniques are the family's base ones plus every knob set away from its default."""
    techniques = list(base)
    for k in knobs:
        if setting[k.name] != k.default and k.technique not in techniques:
            techniques.append(k.technique)
    return Variant(family=family, knobs=dict(setting), code=code, techniques=techniques, description=description)


def knob(
    name: str, values: list[KnobValue], technique: Technique, default: KnobValue, also: tuple[Technique, ...] = ()
) -> Knob:
    """A Knob whose default is guaranteed to be one of its values (the first one otherwise); `also` lists
    further techniques the knob applies (an unroll that creates independent accumulators, ...)."""
    return Knob(
        name=name,
        values=values,
        technique=technique,
        default=default if default in values else values[0],
        also=list(also),
    )


def exp_degrees(rtol: float, amplification: float = 1.0) -> list[int]:
    """exp polynomial degrees whose error, times how much the kernel amplifies it, is under rtol/2."""
    ok = [d for d in sorted(EXP_COEFFS) if EXP_ERROR[d] * amplification <= 0.5 * rtol]
    return ok or [max(EXP_COEFFS)]


def is_f32_pointer(p: Param, const: bool | None = None) -> bool:
    return p.pointer and p.ctype == "float" and (const is None or p.const == const)


def all_counts_equal(task: KernelTask, names: list[str], expr: str) -> bool:
    """True when every named buffer holds exactly `expr` (a size-parameter expression) elements at every size."""
    for size, counts in zip(task.sizes, task.counts, strict=True):
        want = _eval_size_expr(expr, size)
        if any(counts.get(n) != want for n in names):
            return False
    return True


def _eval_size_expr(expr: str, size: dict[str, int]) -> int:
    # Only products/sums of size names and integers are used by the families: a tiny safe evaluator.
    import ast

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return size[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
            a, b = ev(node.left), ev(node.right)
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
            return ops[type(node.op)] if type(node.op) in ops else a // b
        raise ValueError(expr)

    try:
        return ev(ast.parse(expr, mode="eval"))
    except (KeyError, ValueError, SyntaxError):
        return -1


def squash(code: str) -> str:
    """Reference code with all whitespace removed, for semantic pattern checks."""
    return re.sub(r"\s+", "", code)


def elementwise_loop(task: KernelTask, names: tuple[str, str, str], lmul: int, unroll: int, fn: str) -> str:
    """The kernel `y[i] = fn(x[i])` over n floats: `unroll` full chunks per step, then a vsetvl tail loop."""
    n, x, y = names
    s, t = suffix("f", 32, lmul), vtype("f", 32, lmul)
    lines = [task.signature, "{", f"    size_t len = {n} > 0 ? (size_t){n} : 0, i = 0;"]
    if unroll > 1:
        lines.append(f"    const size_t vm = __riscv_vsetvlmax_e32m{lmul}();")
        lines.append(f"    for (; i + {unroll} * vm <= len; i += {unroll} * vm) {{")
        for u in range(unroll):
            off = f" + {u} * vm" if u else ""
            lines.append(f"        {t} v{u} = __riscv_vle32_v_{s}({x} + i{off}, vm);")
        lines += [f"        v{u} = {fn}(v{u}, vm);" for u in range(unroll)]
        for u in range(unroll):
            off = f" + {u} * vm" if u else ""
            lines.append(f"        __riscv_vse32_v_{s}({y} + i{off}, v{u}, vm);")
        lines.append("    }")
    lines += [
        "    while (i < len) {",
        f"        size_t vl = __riscv_vsetvl_e32m{lmul}(len - i);",
        f"        __riscv_vse32_v_{s}({y} + i, {fn}(__riscv_vle32_v_{s}({x} + i, vl), vl), vl);",
        "        i += vl;",
        "    }",
        "}",
    ]
    return "\n".join(lines)


def fit_lmul(sew: int, lanes: int, vlen: int) -> int | str:
    """The smallest LMUL (1, 2, .. or 'f2', 'f4', 'f8') whose VLMAX at this SEW holds `lanes` elements."""
    for lm in ("f8", "f4", "f2", 1, 2, 4, 8):
        if isinstance(lm, str) and int(lm[1:]) * sew > 64:
            continue  # fractional LMUL 1/F needs SEW <= ELEN / F (ELEN 64)
        if vlmax(sew, lm, vlen) >= lanes:
            return lm
    raise InvalidInput(f"{lanes} lanes of e{sew} do not fit in LMUL 8 at VLEN {vlen}", "use a smaller block")


def lmul_times(lmul: int | str, factor: int) -> int | str:
    """LMUL scaled by `factor` (2 or 4 for widening), e.g. ('f2', 2) -> 1, (1, 4) -> 4."""
    ratio = lmul_ratio(lmul) * factor
    if ratio >= 1:
        if ratio > 8:
            raise InvalidInput(f"LMUL {lmul} x {factor} exceeds 8", "use a smaller LMUL")
        return int(ratio)
    return f"f{round(1 / ratio)}"


def half_to_float_helper(src: CSource) -> str:
    """Add `nn_half_at(p)`: the little-endian IEEE binary16 at p (2-byte aligned) as a float (Zfh
    conversion when the target has it, else exact bit manipulation: normal, subnormal, inf/NaN)."""
    code = """/* fp16 (little endian, any alignment) -> float */
static inline float nn_half_at(const uint8_t *p)
{
#if defined(__riscv_zfh) || defined(__riscv_zfhmin)
    /* ggml blocks (34 / 18 bytes) keep their fp16 scale 2-byte aligned: one flh + fcvt.s.h */
    _Float16 h;
    memcpy(&h, __builtin_assume_aligned(p, 2), sizeof h);
    return (float)h;
#else
    uint32_t h = (uint32_t)p[0] | ((uint32_t)p[1] << 8);
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, s = (h & 0x8000u) << 16;
    if (e == 0) {
        float v = (float)m * 0x1p-24f;
        return s ? -v : v;
    }
    uint32_t bits = s | ((e == 31 ? 255u : e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
#endif
}"""
    return src.add("nn_half_at", code)


def float_to_half_helper(src: CSource) -> str:
    """Add `nn_half_bits(f)`: float -> binary16 bits, round to nearest even (fcvt.h.s with Zfh, else bits)."""
    code = """/* float -> fp16 bits, round to nearest even; overflow to inf */
static inline uint16_t nn_half_bits(float f)
{
#if defined(__riscv_zfh) || defined(__riscv_zfhmin)
    _Float16 h = (_Float16)f;
    uint16_t b;
    memcpy(&b, &h, sizeof b);
    return b;
#else
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(s | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u)
        return (uint16_t)(s | 0x7c00u);
    uint32_t m, sh;
    if (a >= 0x38800000u) {
        m = a - 0x38000000u; /* rebias the exponent by 112 */
        sh = 13;
    } else {
        if (a <= 0x33000000u)
            return (uint16_t)s;
        m = (a & 0x7fffffu) | 0x800000u;
        sh = 126u - (a >> 23);
    }
    uint32_t q = m >> sh, rem = m & ((1u << sh) - 1u), halfway = 1u << (sh - 1u);
    q += (rem > halfway || (rem == halfway && (q & 1u)));
    return (uint16_t)(s | q);
#endif
}"""
    return src.add("nn_half_bits", code)
