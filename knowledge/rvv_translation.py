"""NEON, SSE/AVX/AVX-512 and SVE intrinsics (and the common x86/Arm/POWER assembly mnemonics) -> RVV v1.0.

A fixed table, not an LLM guess: a thought evidenced on another ISA carries the RVV form of its key
intrinsics (`Thought.rvv_equivalents`), so an RVV prompt or the offline generator can reuse the idea.
Names follow the RVV C intrinsics v1.0 specification (riscv-non-isa/rvv-intrinsic-doc). LMUL is written
as m1 throughout: with VLEN=256 (SpacemiT X60) one m1 register holds 8 f32, the width of an AVX register;
a kernel picks its own LMUL. `vl` comes from `__riscv_vsetvl_e<sew>m1(n - i)`, which also handles the tail.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# element suffix -> (RVV type letters, SEW)
_NEON_T = {
    "f32": ("f32", 32),
    "f16": ("f16", 16),
    "f64": ("f64", 64),
    "s8": ("i8", 8),
    "u8": ("u8", 8),
    "s16": ("i16", 16),
    "u16": ("u16", 16),
    "s32": ("i32", 32),
    "u32": ("u32", 32),
    "s64": ("i64", 64),
    "u64": ("u64", 64),
}
_X86_T = {
    "ps": ("f32", 32),
    "pd": ("f64", 64),
    "ph": ("f16", 16),
    "epi8": ("i8", 8),
    "epu8": ("u8", 8),
    "epi16": ("i16", 16),
    "epu16": ("u16", 16),
    "epi32": ("i32", 32),
    "epu32": ("u32", 32),
    "epi64": ("i64", 64),
}


def _float(t: str) -> bool:
    return t.startswith("f")


def _wide(t: str) -> str:
    """The type twice as wide (i8 -> i16m2): the destination of a widening operation."""
    return f"{t[0]}{int(t[1:]) * 2}m2"


def _op(t: str, fop: str, iop: str, form: str = "vv") -> str:
    return f"__riscv_{fop if _float(t) else iop}_{form}_{t}m1"


# Each rule: (pattern over the intrinsic name with a `t` group for the element suffix, types table, builder).
_Rule = tuple[re.Pattern[str], dict[str, tuple[str, int]], Callable[[str, int], str]]


def _rules() -> list[tuple[str, dict[str, tuple[str, int]], Callable[[str, int], str]]]:
    n, x = _NEON_T, _X86_T
    nt = r"_(?P<t>[fsu]\d+)"
    xt = r"_(?P<t>ps|pd|ph|ep[iu]\d+)"
    red = "__riscv_vfredusum_vs_{t}m1_{t}m1 then __riscv_vfmv_f_s_{t}m1_{t} (once, after the loop)"
    return [
        # loads, stores, broadcasts
        (rf"^vld1q?{nt}$", n, lambda t, w: f"__riscv_vle{w}_v_{t}m1"),
        (rf"^vld1q?_dup{nt}$", n, lambda t, w: _bcast(t)),
        (rf"^vst1q?{nt}$", n, lambda t, w: f"__riscv_vse{w}_v_{t}m1"),
        (rf"^vld([234])q?{nt}$", n, lambda t, w: f"__riscv_vlseg{{2,3,4}}e{w}_v_{t}m1x{{2,3,4}}"),
        (rf"^v(?:dup|mov)q?_n{nt}$", n, lambda t, w: _bcast(t)),
        (rf"^_mm(?:256|512)?_loadu?{xt}$|^_mm(?:256|512)?_loadu?_si(?:128|256|512)$", x, _load),
        (rf"^_mm(?:256|512)?_storeu?{xt}$|^_mm(?:256|512)?_storeu?_si(?:128|256|512)$", x, _store),
        (rf"^_mm(?:256|512)?_set1{xt}$|^_mm(?:256|512)?_broadcast_s[sd]$", x, lambda t, w: _bcast(t)),
        (rf"^_mm(?:256|512)?_setzero{xt}$|^_mm(?:256|512)?_setzero_si\d+$", x, lambda t, w: _bcast(t)),
        (rf"^svld1{nt}$", n, lambda t, w: f"__riscv_vle{w}_v_{t}m1"),
        (rf"^svst1{nt}$", n, lambda t, w: f"__riscv_vse{w}_v_{t}m1"),
        (rf"^svdup_n{nt}$", n, lambda t, w: _bcast(t)),
        # fused multiply-add
        (rf"^v(?:fma|mla)q?{nt}$", n, lambda t, w: _op(t, "vfmacc", "vmacc")),
        (
            rf"^v(?:fma|mla)q?_n{nt}$",
            n,
            lambda t, w: _op(t, "vfmacc", "vmacc", "vf" if _float(t) else "vx"),
        ),
        (rf"^v(?:fms|mls)q?{nt}$", n, lambda t, w: _op(t, "vfnmsac", "vnmsac")),
        (rf"^_mm(?:256|512)?_fmadd{xt}$", x, lambda t, w: _op(t, "vfmacc", "vmacc") + " (c += a*b)"),
        (rf"^_mm(?:256|512)?_fnmadd{xt}$", x, lambda t, w: _op(t, "vfnmsac", "vnmsac") + " (c -= a*b)"),
        (rf"^_mm(?:256|512)?_fmsub{xt}$", x, lambda t, w: _op(t, "vfmsac", "vmsac") + " (a*b - c)"),
        (rf"^svml[as]{nt}_[mxz]$", n, lambda t, w: _op(t, "vfmacc", "vmacc")),
        (rf"^svmad{nt}_[mxz]$", n, lambda t, w: _op(t, "vfmadd", "vmadd")),
        # arithmetic
        (rf"^vaddq?{nt}$|^svadd{nt}_[mxz]$", n, lambda t, w: _op(t, "vfadd", "vadd")),
        (rf"^vsubq?{nt}$|^svsub{nt}_[mxz]$", n, lambda t, w: _op(t, "vfsub", "vsub")),
        (rf"^vmulq?{nt}$|^svmul{nt}_[mxz]$", n, lambda t, w: _op(t, "vfmul", "vmul")),
        (rf"^vmulq?_n{nt}$", n, lambda t, w: _op(t, "vfmul", "vmul", "vf" if _float(t) else "vx")),
        (rf"^vdivq?{nt}$", n, lambda t, w: _op(t, "vfdiv", "vdiv")),
        (rf"^vmaxq?{nt}$", n, lambda t, w: _op(t, "vfmax", "vmax")),
        (rf"^vminq?{nt}$", n, lambda t, w: _op(t, "vfmin", "vmin")),
        (rf"^vabsq?{nt}$", n, lambda t, w: f"__riscv_vfabs_v_{t}m1"),
        (rf"^vnegq?{nt}$", n, lambda t, w: f"__riscv_vfneg_v_{t}m1"),
        (rf"^vsqrtq?{nt}$", n, lambda t, w: f"__riscv_vfsqrt_v_{t}m1"),
        (rf"^_mm(?:256|512)?_add{xt}$", x, lambda t, w: _op(t, "vfadd", "vadd")),
        (rf"^_mm(?:256|512)?_sub{xt}$", x, lambda t, w: _op(t, "vfsub", "vsub")),
        (
            rf"^_mm(?:256|512)?_mul{xt}$|^_mm(?:256|512)?_mullo{xt}$",
            x,
            lambda t, w: _op(t, "vfmul", "vmul"),
        ),
        (rf"^_mm(?:256|512)?_div{xt}$", x, lambda t, w: _op(t, "vfdiv", "vdiv")),
        (rf"^_mm(?:256|512)?_max{xt}$", x, lambda t, w: _op(t, "vfmax", "vmax")),
        (rf"^_mm(?:256|512)?_min{xt}$", x, lambda t, w: _op(t, "vfmin", "vmin")),
        (rf"^_mm(?:256|512)?_sqrt{xt}$", x, lambda t, w: f"__riscv_vfsqrt_v_{t}m1"),
        (r"^_mm(?:256|512)?_and_(?:si\d+|ps)$|^vandq?_[su]\d+$", x, lambda t, w: "__riscv_vand_vv_u8m1"),
        (r"^_mm(?:256|512)?_or_(?:si\d+|ps)$|^vorrq?_[su]\d+$", x, lambda t, w: "__riscv_vor_vv_u8m1"),
        (r"^_mm(?:256|512)?_xor_(?:si\d+|ps)$|^veorq?_[su]\d+$", x, lambda t, w: "__riscv_vxor_vv_u8m1"),
        (
            rf"^_mm(?:256|512)?_srli{xt}$|^vshrq?_n_u\d+$",
            x,
            lambda t, w: "__riscv_vsrl_vx (unsigned shift)",
        ),
        (rf"^_mm(?:256|512)?_slli{xt}$|^vshlq?_n_[su]\d+$", x, lambda t, w: "__riscv_vsll_vx"),
        # reductions
        (rf"^vaddvq?{nt}$|^svaddv{nt}$", n, lambda t, w: red.format(t=t) if _float(t) else _ired(t)),
        (rf"^vmaxvq?{nt}$|^svmaxv{nt}$", n, lambda t, w: f"__riscv_vfredmax_vs_{t}m1_{t}m1"),
        (rf"^vminvq?{nt}$|^svminv{nt}$", n, lambda t, w: f"__riscv_vfredmin_vs_{t}m1_{t}m1"),
        # widening multiply / integer dot products
        (rf"^vmull{nt}$|^vmull_high{nt}$", n, lambda t, w: f"__riscv_vwmul_vv_{_wide(t)}"),
        (rf"^vmlal{nt}$|^vmlal_high{nt}$", n, lambda t, w: f"__riscv_vwmacc_vv_{_wide(t)}"),
        (r"^vdotq?_(?:lane_)?s32$|^svdot_s32$", n, lambda t, w: _dot("i8")),
        (r"^vdotq?_(?:lane_)?u32$|^svdot_u32$", n, lambda t, w: _dot("u8")),
        (r"^vpaddlq?_s\d+$|^vpadalq?_s\d+$", n, lambda t, w: "__riscv_vwredsum_vs (widening sum)"),
        (r"^_mm(?:256|512)?_maddubs_epi16$", x, lambda t, w: "__riscv_vwmulsu_vv_i16m2 (u8 x i8 -> i16)"),
        (r"^_mm(?:256|512)?_madd_epi16$", x, lambda t, w: "__riscv_vwmacc_vv_i32m2 (i16 x i16 -> i32)"),
        (r"^_mm(?:256|512)?_dpbusds?_epi32$", x, lambda t, w: _dot("u8/i8 (vwmulsu)")),
        # conversions
        (
            r"^_mm(?:256|512)?_cvtph_ps$|^vcvt_f32_f16$",
            x,
            lambda t, w: "__riscv_vfwcvt_f_f_v_f32m2 (Zvfhmin)",
        ),
        (
            r"^_mm(?:256|512)?_cvtps_ph$|^vcvt_f16_f32$",
            x,
            lambda t, w: "__riscv_vfncvt_f_f_w_f16m1 (Zvfhmin)",
        ),
        (r"^_mm(?:256|512)?_cvtepi32_ps$|^vcvtq_f32_s32$", x, lambda t, w: "__riscv_vfcvt_f_x_v_f32m1"),
        (
            r"^_mm(?:256|512)?_cvtt?ps_epi32$|^vcvtq_s32_f32$",
            x,
            lambda t, w: "__riscv_vfcvt_rtz_x_f_v_i32m1",
        ),
        (r"^_mm(?:256|512)?_cvtepi8_epi16$|^vmovl_s8$", x, lambda t, w: "__riscv_vsext_vf2_i16m2"),
        (r"^_mm(?:256|512)?_cvtepu8_epi16$|^vmovl_u8$", x, lambda t, w: "__riscv_vzext_vf2_u16m2"),
        (r"^vreinterpretq?_\w+$|^_mm(?:256|512)?_cast\w+$", n, lambda t, w: "__riscv_vreinterpret_v_*"),
        # shuffles, selects, compares
        (
            r"^_mm(?:256|512)?_(?:shuffle|permute\w*|permutevar\w*|unpack\w+)_(?:ps|pd|epi\d+)$",
            x,
            lambda t, w: "__riscv_vrgather_vv (index vector) or __riscv_vslideup/vslidedown_vx",
        ),
        (
            r"^vqtbl[1-4]q?_[su]8$|^vtbl[1-4]_[su]8$",
            n,
            lambda t, w: "__riscv_vrgather_vv_u8m1 (table lookup)",
        ),
        (
            r"^v(?:zip|uzp|trn)[12]q?_\w+$|^vextq?_\w+$|^vrev\d+q?_\w+$",
            n,
            lambda t, w: "__riscv_vrgather_vv or __riscv_vslideup/vslidedown_vx",
        ),
        (r"^vbslq?_\w+$|^_mm(?:256|512)?_blendv_\w+$", n, lambda t, w: "__riscv_vmerge_vvm (mask select)"),
        (
            r"^_mm(?:256|512)?_cmp\w*_ps$|^vc(?:gt|lt|ge|le|eq)q?_f32$",
            x,
            lambda t, w: "__riscv_vmflt_vv_f32m1_b32 / vmfeq / vmfle",
        ),
        (r"^_mm_prefetch$", x, lambda t, w: "__builtin_prefetch (no RVV intrinsic; Zicbop prefetch.r)"),
    ]


def _bcast(t: str) -> str:
    return f"__riscv_vfmv_v_f_{t}m1" if _float(t) else f"__riscv_vmv_v_x_{t}m1"


def _ired(t: str) -> str:
    return f"__riscv_vredsum_vs_{t}m1_{t}m1 then __riscv_vmv_x_s_{t}m1_{t}"


def _dot(src: str) -> str:
    return f"__riscv_vwmacc_vv_i16m2 on {src} then __riscv_vwredsum_vs_i16m2_i32m1 (RVV 1.0 has no 4-way int8 dot)"


def _load(t: str, w: int) -> str:
    return f"__riscv_vle{w}_v_{t}m1" if t else "__riscv_vle8_v_u8m1"


def _store(t: str, w: int) -> str:
    return f"__riscv_vse{w}_v_{t}m1" if t else "__riscv_vse8_v_u8m1"


# Predicates and masks become `vl`, at the element width they govern: SVE's `svwhilelt_b64` covers 64-bit
# lanes (e64), `_b16` 16-bit ones; an AVX-512 mask intrinsic's width is its type suffix (`_ps` e32, `_pd` e64).
_SVE_PRED_SEW = re.compile(r"^svwhile(?:lt|le|lo|ls)_b(8|16|32|64)")
_X86_SUFFIX_SEW = re.compile(r"_(?:p([sdh])|ep[iu](8|16|32|64)|s([sd]))$")
_X86_LETTER_SEW = {"s": 32, "d": 64, "h": 16}


def _vl_for_tail(sew: int) -> str:
    return f"__riscv_vsetvl_e{sew}m1(n - i) (vl is the predicate: no mask for the tail)"


def _mask_equivalent(name: str) -> str:
    m = _X86_SUFFIX_SEW.search(name)
    sew = (_X86_LETTER_SEW[m.group(1) or m.group(3)] if not m.group(2) else int(m.group(2))) if m else 0
    vl = f"__riscv_vsetvl_e{sew}m1(n - i)" if sew else "__riscv_vsetvl_e<sew>m1(n - i) at the lanes' width"
    return f"{vl} for a tail; __riscv_vmflt/... masks with _m intrinsics for conditions"


def _hadd(t: str) -> str:
    """A horizontal float add, at its element type (`_pd`: f64); Arm's `faddp` does not say (f32 noted)."""
    return f"__riscv_vfredusum_vs_{t}m1_{t}m1 then __riscv_vfmv_f_s_{t}m1_{t} (reduce once, after the loop)"


# Alternatives become separate patterns: each may name its own element-type group `t`.
# Assembly mnemonics (OpenBLAS's x86, Arm and POWER kernels are mostly assembly): precision from the suffix
# (x86 ps/pd, POWER sp/dp) or, for Arm, not known from the mnemonic alone (written f32 with a note).
_ASM: list[tuple[re.Pattern[str], Callable[[str], str]]] = [
    (re.compile(r"^vfn?madd(?:132|213|231)?(?P<t>p[sd])$"), lambda t: _op(t, "vfmacc", "vmacc") + " (c += a*b)"),
    (re.compile(r"^vfn?msub(?:132|213|231)?(?P<t>p[sd])$"), lambda t: _op(t, "vfmsac", "vmsac")),
    (re.compile(r"^v?mov[ua](?P<t>p[sd])$"), lambda t: f"__riscv_vle{_w(t)}_v_{t}m1 / __riscv_vse{_w(t)}_v_{t}m1"),
    (re.compile(r"^vbroadcasts(?P<t>[sd])$"), lambda t: _bcast(t)),
    (re.compile(r"^v?add(?P<t>p[sd])$"), lambda t: _op(t, "vfadd", "vadd")),
    (re.compile(r"^v?mul(?P<t>p[sd])$"), lambda t: _op(t, "vfmul", "vmul")),
    (re.compile(r"^v?hadd(?P<t>p[sd])$"), _hadd),
    (re.compile(r"^vpdpbusds?$"), lambda t: _dot("u8/i8 (vwmulsu)")),
    (re.compile(r"^xvmadd[am](?P<t>[sd]p)$"), lambda t: _op(t, "vfmacc", "vmacc") + " (c += a*b)"),
    (re.compile(r"^xvmul(?P<t>[sd]p)$"), lambda t: _op(t, "vfmul", "vmul")),
    (re.compile(r"^xvadd(?P<t>[sd]p)$"), lambda t: _op(t, "vfadd", "vadd")),
    (re.compile(r"^lxv(?:d2x|w4x|x|p)?$"), lambda t: "__riscv_vle32_v_f32m1 / __riscv_vle64_v_f64m1"),
    (re.compile(r"^stxv(?:d2x|w4x|x|p)?$"), lambda t: "__riscv_vse32_v_f32m1 / __riscv_vse64_v_f64m1"),
    (re.compile(r"^fmla$"), lambda t: "__riscv_vfmacc_vv_f32m1 (or _f64m1: the element size is in the operands)"),
    (re.compile(r"^fmul$"), lambda t: "__riscv_vfmul_vv_f32m1 (or _f64m1)"),
    (re.compile(r"^faddp$"), lambda t: _hadd("f32") + " (or f64: the element size is in the operands)"),
    (re.compile(r"^ld1r$"), lambda t: "__riscv_vfmv_v_f_f32m1 (broadcast a scalar load)"),
    (re.compile(r"^ld[1-4]$"), lambda t: "__riscv_vle32_v_f32m1 (ld2-4: __riscv_vlseg{2,3,4}e32_v_f32m1x{2,3,4})"),
    (re.compile(r"^st[1-4]$"), lambda t: "__riscv_vse32_v_f32m1 (st2-4: __riscv_vsseg{2,3,4}e32_v_f32m1x{2,3,4})"),
    (re.compile(r"^(?:prfm|prefetcht[0-2]|prefetchnta|dcbt)$"), lambda t: "__builtin_prefetch (Zicbop prefetch.r)"),
]
_ASM_T = {"ps": "f32", "pd": "f64", "s": "f32", "d": "f64", "sp": "f32", "dp": "f64"}


def _w(t: str) -> int:
    return int(t[1:])


def _asm_equivalent(name: str) -> str | None:
    for rx, build in _ASM:
        if m := rx.match(name):
            t = m.groupdict().get("t")
            return build(_ASM_T[t] if t else "")
    return None


_RULES: list[_Rule] = [
    (re.compile("^" + alt.lstrip("^")), types, build) for pat, types, build in _rules() for alt in pat.split("|^")
]
_INTRINSIC_RX = re.compile(
    r"\b(?:_mm(?:256|512)?_\w+|v[a-z]+\d*q?_\w+|sv[a-z0-9]+_\w+|"
    r"vfn?m(?:add|sub)(?:132|213|231)?p[sd]|v?mov[ua]p[sd]|vbroadcasts[sd]|v?(?:add|mul|hadd)p[sd]|vpdpbusds?|"
    r"xv(?:madd[am]|mul|add)[sd]p|lxv(?:d2x|w4x|x|p)?|stxv(?:d2x|w4x|x|p)?|fmla|fmul|faddp|ld1r|ld[1-4]|st[1-4]|"
    r"prfm|prefetcht[0-2]|prefetchnta|dcbt)\b"
)
MAX_EQUIVALENTS = 12


def rvv_equivalent(name: str) -> str | None:
    """The RVV v1.0 form of one NEON/x86/SVE intrinsic, or None when the table has no entry."""
    if name.startswith("__riscv_"):
        return None
    if m := _SVE_PRED_SEW.match(name):
        return _vl_for_tail(int(m.group(1)))
    if m := re.match(r"^_mm(?:256|512)?_(?:hadd|reduce_add)_p([sd])$", name):
        return _hadd("f32" if m.group(1) == "s" else "f64")
    if re.match(r"^_mm(?:256|512)?_mask", name):
        return _mask_equivalent(name)
    if (asm := _asm_equivalent(name)) is not None:
        return asm
    for rx, types, build in _RULES:
        m = rx.match(name)
        if not m:
            continue
        t = (m.groupdict().get("t") or "").strip()
        rvv_t, sew = types.get(t, ("", 0))
        if t and not rvv_t:
            continue
        out = build(rvv_t, sew)
        if out:
            return out
    return None


def rvv_equivalents(code: str, limit: int = MAX_EQUIVALENTS) -> list[str]:
    """`"vfmaq_f32 -> __riscv_vfmacc_vv_f32m1"` for each distinct non-RVV intrinsic of `code` the table knows."""
    out: list[str] = []
    seen: set[str] = set()
    for name in _INTRINSIC_RX.findall(code):
        if name in seen:
            continue
        seen.add(name)
        rvv = rvv_equivalent(name)
        if rvv:
            out.append(f"{name} -> {rvv}")
            if len(out) >= limit:
                break
    return out
