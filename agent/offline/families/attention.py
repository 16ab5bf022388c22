"""Attention-side kernels: single-query attention against a KV cache, rotary embedding, RWKV-4 WKV step.

attention_decode `(heads, seq_len, head_dim, q, k, v, out)`, out[h] = softmax(q.K^T / sqrt(d)) V:
keys are taken in chunks of `chunk`. For a chunk, the scores are dot products over head_dim (vector FMAs,
`keys` keys at a time for independent chains, one reduction per key) kept in a small stack buffer; the
chunk's max updates the running max m, the running sum l and the output row are rescaled once per
chunk by exp(m_old - m_new) (online softmax by chunk, not by key), exp of the chunk's scores is one
vectorized pass, and p.V accumulates in registers over the chunk (the output row is loaded and stored
once per chunk). Knobs: lmul, keys (unroll), chunk (memory_access), exp_degree (approximation).

rope `(n_tokens, n_heads, head_dim, pos0, theta_base, x, y)`, adjacent pairs: frequencies per pair in
double (pow, like the reference) once per chunk of pairs; per token the angles are vectors, sin and cos
come from one range reduction (k = round(a*2/pi), three-part pi/2) and Taylor polynomials on
[-pi/4, pi/4] with the quadrant applied by swaps and sign flips; every head then rotates its pairs
in place in the interleaved layout: y = x*[c, c] + swap(x)*[-s, s], the pair swap being a 32-bit
rotation of 64-bit lanes. Knobs: lmul (pairs per vector), sincos_degree (approximation).

rwkv_wkv_step `(c, k, v, w, u, aa, bb, pp, wkv)`: the four exponentials of the stable WKV recurrence
vectorized over channels (rvv_math exp), division by reciprocal estimate + Newton steps or vfdiv.
"""

from __future__ import annotations

import math

from agent.offline.base import Knob, KnobValue, Variant, register
from agent.offline.families import rvv_math as rm
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Technique


def _f32_ptrs(task: KernelTask, n_sizes: int, n_scalars: int = 0) -> list[str] | None:
    ps = task.params
    roles = ["size"] * n_sizes + ["scalar"] * n_scalars
    if task.return_type != "void" or [p.role for p in ps[: len(roles)]] != roles:
        return None
    rest = ps[len(roles) :]
    if any(not p.pointer or p.ctype != "float" for p in rest):
        return None
    return [p.name for p in ps]


def attention_kind(task: KernelTask) -> str | None:
    ref = rm.squash(task.reference_code)
    names = _f32_ptrs(task, 3)
    if names and len(names) == 7:
        h, t, d, q, k, v, out = names
        counts = [f"{h}*{d}", f"{h}*{t}*{d}", f"{h}*{t}*{d}", f"{h}*{d}"]
        if all(rm.all_counts_equal(task, [b], e) for b, e in zip([q, k, v, out], counts, strict=True)):
            return "attention_decode" if "expf(" in ref and "sqrtf(" in ref else None
    names = _f32_ptrs(task, 4, 1)
    if names and len(names) == 7 and "cos(" in ref and "sin(" in ref and "pow(" in ref:
        nt, nh, hd = names[:3]
        if rm.all_counts_equal(task, names[5:], f"{nt}*{nh}*{hd}"):
            return "rope"
    names = _f32_ptrs(task, 1)
    if names and len(names) == 9 and ref.count("expf(") == 4:
        return "rwkv" if rm.all_counts_equal(task, names[1:], names[0]) else None
    return None


@register
class AttentionFamily:
    name = "attention"

    def applies(self, task: KernelTask) -> bool:
        return attention_kind(task) is not None

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        kind = attention_kind(task)
        rtol = max(task.tolerance.rtol, 1e-7)
        lm = Technique.VECTOR_LENGTH
        if kind == "attention_decode":
            return [
                rm.knob("lmul", [1, 2, 4], lm, 2),
                rm.knob("keys", [1, 2, 4], Technique.UNROLL, 4, also=(Technique.MULTI_ACCUMULATOR,)),
                rm.knob("chunk", [16, 32, 64, 128], Technique.MEMORY_ACCESS, 128),
                rm.knob("exp_degree", rm.exp_degrees(rtol, 2.0), Technique.APPROXIMATION, 4),
            ]
        if kind == "rope":
            degrees = [5, 7] if rtol >= 1e-4 else [7]
            return [rm.knob("lmul", [1, 2, 4], lm, 2), rm.knob("sincos_degree", degrees, Technique.APPROXIMATION, 5)]
        return [
            rm.knob("lmul", [1, 2, 4], lm, 2),
            rm.knob("exp_degree", rm.exp_degrees(rtol, 2.0), Technique.APPROXIMATION, 4),
            rm.knob("recip", list(rm.RECIP_MODES), Technique.APPROXIMATION, "nr2"),
        ]

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        kind = attention_kind(task)
        if kind is None:
            raise rm.InvalidInput(f"task {task.name!r} is not an attention kernel this family implements")
        spec = self.knobs(task, target)
        k = rm.resolve_knobs(self.name, spec, knobs)
        names = [p.name for p in task.params]
        src = rm.CSource(headers=("riscv_vector.h", "math.h", "stddef.h", "stdint.h"))
        build = {"attention_decode": _attention, "rope": _rope, "rwkv": _rwkv}[kind]
        kernel = build(task, names, k, src, target.vlen)
        desc = f"{kind}: " + ", ".join(f"{a} {b}" for a, b in k.items())
        code = src.render(kernel, f"{task.name}: {desc} (offline generator, family attention).")
        return rm.make_variant(self.name, spec, k, code, desc, (Technique.VECTORIZE, Technique.APPROXIMATION))


# ------------------------------------------------------------------------------- attention_decode


def _attention(task: KernelTask, names: list[str], k: dict[str, KnobValue], src: rm.CSource, vlen: int) -> str:
    heads, seq, hd, q, kk, v, out = names
    lmul, keys, chunk = int(k["lmul"]), int(k["keys"]), int(k["chunk"])
    s, t = rm.suffix("f", 32, lmul), rm.vtype("f", 32, lmul)
    exp = rm.exp_f32(src, lmul, int(k["exp_degree"]), tails="clamped")
    red = "__riscv_vfmv_s_f_f32m1(0.0f, 1)"

    def dots(u: int) -> list[str]:
        """Scores of keys t0+tt .. t0+tt+u-1 into sb[tt..]."""
        lines = [f"                {t} d{j} = __riscv_vfmv_v_f_{s}(0.0f, vm);" for j in range(u)]
        lines += [
            "                for (size_t e = 0, vl; e < D; e += vl) {",
            f"                    vl = __riscv_vsetvl_e32m{lmul}(D - e);",
            f"                    {t} qv = __riscv_vle32_v_{s}(qh + e, vl);",
        ]
        lines += [
            f"                    d{j} = __riscv_vfmacc_vv_{s}_tu(d{j}, qv, "
            f"__riscv_vle32_v_{s}(kh + (size_t)(t0 + tt + {j}) * D + e, vl), vl);"
            for j in range(u)
        ]
        lines.append("                }")
        lines += [
            f"                sb[tt + {j}] = scale * __riscv_vfmv_f_s_f32m1_f32("
            f"__riscv_vfredusum_vs_{s}_f32m1(d{j}, {red}, vm));"
            for j in range(u)
        ]
        return lines

    score_loop = ["            int tt = 0;"]
    if keys > 1:
        score_loop += [f"            for (; tt + {keys} <= nt; tt += {keys}) {{", *dots(keys), "            }"]
    score_loop += ["            for (; tt < nt; tt++) {", *dots(1), "            }"]
    lines = [
        task.signature,
        "{",
        f"    const size_t D = {hd} > 0 ? (size_t){hd} : 0;",
        f"    const size_t vm = __riscv_vsetvlmax_e32m{lmul}();",
        f"    const float scale = 1.0f / sqrtf((float){hd});",
        f"    float sb[{chunk}];",
        f"    for (int h = 0; h < {heads}; h++) {{",
        f"        const float *qh = {q} + (size_t)h * D;",
        f"        const float *kh = {kk} + (size_t)h * (size_t){seq} * D;",
        f"        const float *vh = {v} + (size_t)h * (size_t){seq} * D;",
        f"        float *oh = {out} + (size_t)h * D;",
        "        for (size_t e = 0, vl; e < D; e += vl) {",
        f"            vl = __riscv_vsetvl_e32m{lmul}(D - e);",
        f"            __riscv_vse32_v_{s}(oh + e, __riscv_vfmv_v_f_{s}(0.0f, vl), vl);",
        "        }",
        "        float m = -INFINITY, l = 0.0f;",
        f"        for (int t0 = 0; t0 < {seq}; t0 += {chunk}) {{",
        f"            const int nt = {seq} - t0 < {chunk} ? {seq} - t0 : {chunk};",
        *score_loop,
        "            /* chunk max, rescale of the running sum and output, exp of the scores in place */",
        "            float cm = sb[0];",
        "            for (int i = 1; i < nt; i++)",
        "                cm = sb[i] > cm ? sb[i] : cm;",
        "            const float mn = cm > m ? cm : m;",
        "            const float corr = expf(m - mn); /* 0 for the first chunk: m = -inf */",
        "            m = mn;",
        f"            {t} ps = __riscv_vfmv_v_f_{s}(0.0f, vm);",
        "            for (size_t i = 0, vl; i < (size_t)nt; i += vl) {",
        f"                vl = __riscv_vsetvl_e32m{lmul}((size_t)nt - i);",
        f"                {t} p = {exp}(__riscv_vfsub_vf_{s}(__riscv_vle32_v_{s}(sb + i, vl), mn, vl), vl);",
        f"                __riscv_vse32_v_{s}(sb + i, p, vl);",
        f"                ps = __riscv_vfadd_vv_{s}_tu(ps, ps, p, vl);",
        "            }",
        f"            l = l * corr + __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_{s}_f32m1(ps, {red}, vm));",
        "            /* out = out*corr + sum_t p_t V[t], the output chunk held in registers over the keys */",
        "            for (size_t e = 0, vl; e < D; e += vl) {",
        f"                vl = __riscv_vsetvl_e32m{lmul}(D - e);",
        f"                {t} o0 = __riscv_vfmul_vf_{s}(__riscv_vle32_v_{s}(oh + e, vl), corr, vl);",
        f"                {t} o1 = __riscv_vfmv_v_f_{s}(0.0f, vl);",
        "                const float *vp = vh + (size_t)t0 * D + e;",
        "                int i = 0;",
        "                for (; i + 2 <= nt; i += 2) {",
        f"                    o0 = __riscv_vfmacc_vf_{s}(o0, sb[i], __riscv_vle32_v_{s}(vp + (size_t)i * D, vl), vl);",
        f"                    o1 = __riscv_vfmacc_vf_{s}(o1, sb[i + 1], "
        f"__riscv_vle32_v_{s}(vp + (size_t)(i + 1) * D, vl), vl);",
        "                }",
        "                if (i < nt)",
        f"                    o0 = __riscv_vfmacc_vf_{s}(o0, sb[i], __riscv_vle32_v_{s}(vp + (size_t)i * D, vl), vl);",
        f"                __riscv_vse32_v_{s}(oh + e, __riscv_vfadd_vv_{s}(o0, o1, vl), vl);",
        "            }",
        "        }",
        "        const float inv = 1.0f / l;",
        "        for (size_t e = 0, vl; e < D; e += vl) {",
        f"            vl = __riscv_vsetvl_e32m{lmul}(D - e);",
        f"            __riscv_vse32_v_{s}(oh + e, __riscv_vfmul_vf_{s}(__riscv_vle32_v_{s}(oh + e, vl), inv, vl), vl);",
        "        }",
        "    }",
        "}",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- rope


def _pio2_parts() -> tuple[float, float, float]:
    """pi/2 = P1 + P2 + P3 with P1, P2 short enough that k*P1 and k*P2 are exact in f32 for |k| < 2^12."""
    import numpy as np

    def cut(v: float, bits: int) -> float:
        e = math.floor(math.log2(abs(v)))
        q = 2.0 ** (e - bits + 1)
        return float(round(v / q) * q)

    p1 = cut(math.pi / 2, 12)
    p2 = cut(math.pi / 2 - p1, 12)
    p3 = float(np.float32(math.pi / 2 - p1 - p2))
    return p1, p2, p3


def _sincos(src: rm.CSource, lmul: int, degree: int) -> str:
    """Add `nn_sincos_<sfx>_d<deg>(a, &s, &c, vl)`: sin and cos of f32 lanes, |a| < 6000 radians (k*P1 and
    k*P2 stay exact for |k| < 2^12); the absolute error is that of the polynomials plus ~ulp(a)."""
    s, t = rm.suffix("f", 32, lmul), rm.vtype("f", 32, lmul)
    si, ti, mask = rm.suffix("i", 32, lmul), rm.vtype("i", 32, lmul), rm.mask_type(32, lmul)
    p1, p2, p3 = _pio2_parts()
    sin_c = [(-1) ** n / math.factorial(2 * n + 1) for n in range(1, (degree - 1) // 2 + 1)]
    cos_c = [(-1) ** n / math.factorial(2 * n) for n in range(1, (degree + 1) // 2 + 1)]
    name = f"nn_sincos_{s}_d{degree}"

    def poly(var: str, coeffs: list[float]) -> list[str]:
        lines = [f"    {t} {var} = __riscv_vfmv_v_f_{s}({rm.c_float(coeffs[-1])}, vl);"]
        for c in reversed(coeffs[:-1]):
            lines.append(
                f"    {var} = __riscv_vfmadd_vv_{s}({var}, r2, __riscv_vfmv_v_f_{s}({rm.c_float(c)}, vl), vl);"
            )
        return lines

    lines = [
        "/* sin/cos: k = round(a*2/pi) by the 1.5*2^23 shifter, r = a - k*pi/2 (three-part pi/2), Taylor",
        f"   polynomials of degree {degree} / {degree + 1} on [-pi/4, pi/4], quadrant k mod 4 by swap and sign. */",
        f"static inline void {name}({t} a, {t} *sn, {t} *cs, size_t vl)",
        "{",
        f"    {t} sh = __riscv_vfmadd_vf_{s}(a, {rm.c_float(2.0 / math.pi)}, __riscv_vfmv_v_f_{s}(12582912.0f, "
        "vl), vl);",
        f"    {t} kf = __riscv_vfsub_vf_{s}(sh, 12582912.0f, vl);",
        f"    {t} r = __riscv_vfnmsac_vf_{s}(a, {rm.c_float(p1)}, kf, vl);",
        f"    r = __riscv_vfnmsac_vf_{s}(r, {rm.c_float(p2)}, kf, vl);",
        f"    r = __riscv_vfnmsac_vf_{s}(r, {rm.c_float(p3)}, kf, vl);",
        f"    {t} r2 = __riscv_vfmul_vv_{s}(r, r, vl);",
        *poly("ps", sin_c),
        f"    {t} sr = __riscv_vfmacc_vv_{s}(r, __riscv_vfmul_vv_{s}(r, r2, vl), ps, vl);",
        *poly("pc", cos_c),
        f"    {t} cr = __riscv_vfmadd_vv_{s}(pc, r2, __riscv_vfmv_v_f_{s}(1.0f, vl), vl);",
        f"    {ti} q = __riscv_vreinterpret_v_{s}_{si}(sh); /* low bits: k mod 4 */",
        f"    {mask} odd = __riscv_vmsne_vx_{si}_b{mask[5:-2]}(__riscv_vand_vx_{si}(q, 1, vl), 0, vl);",
        f"    {ti} sgn_s = __riscv_vsll_vx_{si}(__riscv_vand_vx_{si}(q, 2, vl), 30, vl);",
        f"    {ti} sgn_c = __riscv_vsll_vx_{si}(__riscv_vand_vx_{si}(__riscv_vadd_vx_{si}(q, 1, vl), 2, vl), 30, vl);",
        f"    {t} s0 = __riscv_vmerge_vvm_{s}(sr, cr, odd, vl);",
        f"    {t} c0 = __riscv_vmerge_vvm_{s}(cr, sr, odd, vl);",
        f"    *sn = __riscv_vreinterpret_v_{si}_{s}(__riscv_vxor_vv_{si}(__riscv_vreinterpret_v_{s}_{si}(s0), "
        "sgn_s, vl));",
        f"    *cs = __riscv_vreinterpret_v_{si}_{s}(__riscv_vxor_vv_{si}(__riscv_vreinterpret_v_{s}_{si}(c0), "
        "sgn_c, vl));",
        "}",
    ]
    return src.add(name, "\n".join(lines))


def _rope(task: KernelTask, names: list[str], k: dict[str, KnobValue], src: rm.CSource, vlen: int) -> str:
    nt, nh, hd, pos0, theta, x, y = names
    lmul = int(k["lmul"])
    s, t = rm.suffix("f", 32, lmul), rm.vtype("f", 32, lmul)
    s2, t2 = rm.suffix("f", 32, 2 * lmul), rm.vtype("f", 32, 2 * lmul)
    u32, u64, t64 = rm.suffix("u", 32, lmul), rm.suffix("u", 64, 2 * lmul), rm.vtype("u", 64, 2 * lmul)
    u32w = rm.suffix("u", 32, 2 * lmul)
    sincos = _sincos(src, lmul, int(k["sincos_degree"]))
    vmax = rm.vlmax(32, lmul, vlen)
    pair = src.add(
        f"nn_pairs_{s}",
        f"""/* [a0, b0, a1, b1, ...]: lane i of a in the low half and of b in the high half of 64-bit lane i */
static inline {t2} nn_pairs_{s}({t} a, {t} b, size_t vl)
{{
    {t64} lo = __riscv_vzext_vf2_{u64}(__riscv_vreinterpret_v_{s}_{u32}(a), vl);
    {t64} hi = __riscv_vsll_vx_{u64}(__riscv_vzext_vf2_{u64}(__riscv_vreinterpret_v_{s}_{u32}(b), vl), 32, vl);
    return __riscv_vreinterpret_v_{u32w}_{s2}(__riscv_vreinterpret_v_{u64}_{u32w}(__riscv_vor_vv_{u64}(lo, hi, vl)));
}}""",
    )
    return "\n".join(
        [
            task.signature,
            "{",
            f"    const int half = {hd} / 2;",
            f"    const size_t ts = (size_t){nh} * (size_t){hd};",
            f"    float fb[{vmax}];",
            "    for (int i0 = 0; i0 < half;) {",
            f"        const size_t vl = __riscv_vsetvl_e32m{lmul}((size_t)(half - i0));",
            "        for (size_t i = 0; i < vl; i++) /* the reference's frequency, in double */",
            f"            fb[i] = (float)pow((double){theta}, -2.0 * (double)(i0 + (int)i) / (double){hd});",
            f"        const {t} freq = __riscv_vle32_v_{s}(fb, vl);",
            f"        for (int tk = 0; tk < {nt}; tk++) {{",
            f"            {t} sn, cs;",
            f"            {sincos}(__riscv_vfmul_vf_{s}(freq, (float)({pos0} + tk), vl), &sn, &cs, vl);",
            f"            const {t2} cc = {pair}(cs, cs, vl);",
            f"            const {t2} ss = {pair}(__riscv_vfneg_v_{s}(sn, vl), sn, vl);",
            f"            for (int h = 0; h < {nh}; h++) {{",
            f"                const size_t at = (size_t)tk * ts + (size_t)h * (size_t){hd} + 2 * (size_t)i0;",
            f"                {t2} xv = __riscv_vle32_v_{s2}({x} + at, 2 * vl);",
            "                /* the pair swap (x1, x0) is a 32-bit rotation of each 64-bit lane */",
            f"                {t64} x64 = __riscv_vreinterpret_v_{u32w}_{u64}(__riscv_vreinterpret_v_{s2}_{u32w}(xv));",
            f"                x64 = __riscv_vor_vv_{u64}(__riscv_vsrl_vx_{u64}(x64, 32, vl), "
            f"__riscv_vsll_vx_{u64}(x64, 32, vl), vl);",
            f"                {t2} xs = __riscv_vreinterpret_v_{u32w}_{s2}(__riscv_vreinterpret_v_{u64}_{u32w}(x64));",
            f"                {t2} yv = __riscv_vfmul_vv_{s2}(xv, cc, 2 * vl);",
            f"                __riscv_vse32_v_{s2}({y} + at, __riscv_vfmacc_vv_{s2}(yv, xs, ss, 2 * vl), 2 * vl);",
            "            }",
            "        }",
            "        i0 += (int)vl;",
            "    }",
            "}",
        ]
    )


# ------------------------------------------------------------------------------------------- rwkv


def _rwkv(task: KernelTask, names: list[str], k: dict[str, KnobValue], src: rm.CSource, vlen: int) -> str:
    c, kk, v, w, u, aa, bb, pp, wkv = names
    lmul = int(k["lmul"])
    s, t = rm.suffix("f", 32, lmul), rm.vtype("f", 32, lmul)
    exp = rm.exp_f32(src, lmul, int(k["exp_degree"]), tails="clamped")
    rcp = rm.recip_f32(src, lmul, str(k["recip"]))

    def ld(p: str) -> str:
        return f"__riscv_vle32_v_{s}({p} + i, vl)"

    return "\n".join(
        [
            task.signature,
            "{",
            f"    const size_t n = {c} > 0 ? (size_t){c} : 0;",
            "    for (size_t i = 0, vl; i < n; i += vl) {",
            f"        vl = __riscv_vsetvl_e32m{lmul}(n - i);",
            f"        {t} kv = {ld(kk)}, vv = {ld(v)}, a = {ld(aa)}, b = {ld(bb)}, p = {ld(pp)};",
            f"        {t} ww = __riscv_vfadd_vv_{s}({ld(u)}, kv, vl);",
            f"        {t} mx = __riscv_vfmax_vv_{s}(p, ww, vl);",
            f"        {t} e1 = {exp}(__riscv_vfsub_vv_{s}(p, mx, vl), vl);",
            f"        {t} e2 = {exp}(__riscv_vfsub_vv_{s}(ww, mx, vl), vl);",
            f"        {t} num = __riscv_vfmacc_vv_{s}(__riscv_vfmul_vv_{s}(e1, a, vl), e2, vv, vl);",
            f"        {t} den = __riscv_vfmacc_vv_{s}(e2, e1, b, vl);",
            f"        __riscv_vse32_v_{s}({wkv} + i, __riscv_vfmul_vv_{s}(num, {rcp}(den, vl), vl), vl);",
            f"        ww = __riscv_vfadd_vv_{s}({ld(w)}, p, vl);",
            f"        mx = __riscv_vfmax_vv_{s}(ww, kv, vl);",
            f"        e1 = {exp}(__riscv_vfsub_vv_{s}(ww, mx, vl), vl);",
            f"        e2 = {exp}(__riscv_vfsub_vv_{s}(kv, mx, vl), vl);",
            f"        __riscv_vse32_v_{s}({aa} + i, __riscv_vfmacc_vv_{s}(__riscv_vfmul_vv_{s}(e1, a, vl), e2, "
            "vv, vl), vl);",
            f"        __riscv_vse32_v_{s}({bb} + i, __riscv_vfmacc_vv_{s}(e2, e1, b, vl), vl);",
            f"        __riscv_vse32_v_{s}({pp} + i, mx, vl);",
            "    }",
            "}",
        ]
    )
