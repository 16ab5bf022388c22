"""Block-quantized kernels: ggml q8_0/q4_0 dot products, (de)quantization, and a 4-bit weight GEMV.

Detected from the signature and the argument generators / block sizes of the task (34-byte q8_0 and
18-byte q4_0 blocks; `float f(int nb, const uint8_t *x, const uint8_t *y)` dots, `(nb, x, float *y)`
dequantizers, `(nb, const float *x, uint8_t *y)` quantizer), and the MatMulNBits layout
`(n, k, a, b, scales, zero_points, y)` (two nibbles per byte, even element in the low nibble).

Integer dot products widen i8 x i8 -> i16 (vwmul/vwmacc, exact: |q| <= 127 for q8_0, |q4 - 8| <= 8) and
reduce i16 -> i32 with vwredsum, then scale in float; or ("vector" reduction) widen the i16 products to
f32 and accumulate d * products in a vector, reduced once. fp16 scales are converted in scalar code
(Zfh fcvt.s.h when the target has it; exact bit manipulation otherwise). Register types are chosen from
the target's VLEN so a 32-value block fits one vector (e8 m1 at VLEN 256).

Knobs by kind: unroll (blocks per iteration, each with its own accumulator), widening (i16 strategy
for dots; sext.vf4 + vfcvt vs sext.vf2 + vfwcvt for dequantization), reduction (per_block / vector;
quantize: direct vfredmax or a vmax tree over register halves first), rounding (quantize: arithmetic
ties-away fix-up or the RMM rounding mode), rows (GEMV register blocking: rows sharing one load of a).
"""

from __future__ import annotations

from agent.offline.base import Knob, KnobValue, Variant, register
from agent.offline.families import rvv_math as rm
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Technique

Q8, Q4 = 34, 18  # bytes per block


def _gen(task: KernelTask, name: str) -> str | None:
    spec = task.args.get(name)
    return spec.gen if spec else None


def _block_bytes(task: KernelTask, buf: str, nb: str) -> int | None:
    """34 or 18 when `buf` holds that many bytes per block at every size (or its generator says so)."""
    gen = _gen(task, buf)
    if gen in ("q8_0", "q4_0"):
        return Q8 if gen == "q8_0" else Q4
    for per in (Q8, Q4):
        if rm.all_counts_equal(task, [buf], f"{per}*{nb}"):
            return per
    return None


def quant_kind(task: KernelTask) -> str | None:
    ps = task.params
    sizes = [p for p in ps if p.role == "size"]
    bufs = [p for p in ps if p.role == "buffer"]
    if len(sizes) == 1 and len(bufs) == 2 and len(ps) == 3 and ps[0].role == "size":
        nb, a, b = sizes[0].name, bufs[0], bufs[1]
        u8_in = a.pointer and a.ctype == "uint8_t" and a.const
        if task.return_type == "float" and u8_in and b.ctype == "uint8_t" and b.const:
            pa, pb = _block_bytes(task, a.name, nb), _block_bytes(task, b.name, nb)
            return {(Q8, Q8): "q8_0_dot", (Q4, Q8): "q4_0_q8_0_dot"}.get((pa or 0, pb or 0))
        if task.return_type != "void":
            return None
        if u8_in and rm.is_f32_pointer(b, const=False) and rm.all_counts_equal(task, [b.name], f"32*{nb}"):
            return {Q8: "q8_0_dequant", Q4: "q4_0_dequant"}.get(_block_bytes(task, a.name, nb) or 0)
        if rm.is_f32_pointer(a, const=True) and b.ctype == "uint8_t" and not b.const:
            ok = rm.all_counts_equal(task, [a.name], f"32*{nb}") and rm.all_counts_equal(task, [b.name], f"34*{nb}")
            ref = rm.squash(task.reference_code)
            return "q8_0_quantize" if ok and "roundf(" in ref and "/127" in ref else None
    return "nbits_gemv" if _is_nbits(task) else None


def _is_nbits(task: KernelTask) -> bool:
    ps = task.params
    if task.return_type != "void" or len(ps) != 7 or [p.role for p in ps[:2]] != ["size", "size"]:
        return False
    n, k, a, b, s, z, y = ps
    types = [(a.ctype, a.const), (b.ctype, b.const), (s.ctype, s.const), (z.ctype, z.const), (y.ctype, y.const)]
    if types != [("float", True), ("uint8_t", True), ("float", True), ("uint8_t", True), ("float", False)]:
        return False
    kb = f"(({k.name}+31)//32)"
    ref = rm.squash(task.reference_code)
    return (
        rm.all_counts_equal(task, [a.name], k.name)
        and rm.all_counts_equal(task, [b.name], f"{n.name}*{kb}*16")
        and rm.all_counts_equal(task, [s.name, z.name], f"{n.name}*{kb}")
        and rm.all_counts_equal(task, [y.name], n.name)
        and ">>4" in ref
        and "&0x0f" in ref.lower()
    )


@register
class QuantFamily:
    name = "quant"

    def applies(self, task: KernelTask) -> bool:
        return quant_kind(task) is not None

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        kind = quant_kind(task)
        if kind in ("q8_0_dot", "q4_0_q8_0_dot"):
            widen = ["wmul", "halves"] if kind == "q8_0_dot" else ["halves", "concat"]
            return [
                rm.knob("unroll", [1, 2, 4], Technique.UNROLL, 4, also=(Technique.MULTI_ACCUMULATOR,)),
                rm.knob("widening", widen, Technique.WIDENING, widen[0]),
                rm.knob("reduction", ["vector", "per_block"], Technique.REDUCTION, "vector"),
            ]
        if kind in ("q8_0_dequant", "q4_0_dequant"):
            return [
                rm.knob("unroll", [1, 2, 4, 8], Technique.UNROLL, 8),
                rm.knob(
                    "widening", ["sext4", "wcvt"], Technique.WIDENING, "sext4" if kind == "q8_0_dequant" else "wcvt"
                ),
            ]
        if kind == "q8_0_quantize":
            tree = ["tree", "direct"] if rm.lmul_ratio(rm.fit_lmul(32, 32, target.vlen)) >= 2 else ["direct"]
            return [
                rm.knob("unroll", [1, 2, 4], Technique.UNROLL, 4),
                rm.knob("reduction", tree, Technique.REDUCTION, tree[0]),
                rm.knob("rounding", ["rmm", "fixup"], Technique.APPROXIMATION, "rmm"),
            ]
        return [
            rm.knob("rows", [1, 2, 4], Technique.REGISTER_BLOCKING, 2, also=(Technique.MULTI_ACCUMULATOR,)),
            rm.knob("blocks", [1, 2, 4], Technique.UNROLL, 2),
        ]

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        kind = quant_kind(task)
        if kind is None:
            raise rm.InvalidInput(f"task {task.name!r} is not a block-quantized kernel this family implements")
        spec = self.knobs(task, target)
        k = rm.resolve_knobs(self.name, spec, knobs)
        src = rm.CSource(headers=("riscv_vector.h", "stddef.h", "stdint.h", "string.h"))
        names = [p.name for p in task.params]
        builders = {
            "q8_0_dot": _dot,
            "q4_0_q8_0_dot": _dot,
            "q8_0_dequant": _dequant,
            "q4_0_dequant": _dequant,
            "q8_0_quantize": _quantize,
            "nbits_gemv": _nbits,
        }
        kernel = builders[kind](task, kind, names, k, src, target.vlen)
        desc = f"{kind}: " + ", ".join(f"{a} {b}" for a, b in k.items())
        code = src.render(kernel, f"{task.name}: {desc} (offline generator, family quant).")
        base = (Technique.VECTORIZE, Technique.WIDENING) if kind != "nbits_gemv" else (Technique.VECTORIZE,)
        return rm.make_variant(self.name, spec, k, code, desc, base)


# ------------------------------------------------------------------------------------------- dots
#
# Block code is written as stages, one C statement each, with '@' standing for the block's index in
# an unrolled group. `_stage_major` emits every stage for all blocks before the next stage: blocks then
# interleave even where SEW/LMUL changes between stages (the compiler does not move vector code across
# the vsetvli those changes need), which is what lets an in-order core overlap their latencies.


def _stage_major(stages: list[str], count: int, indent: str) -> list[str]:
    return [indent + st.replace("@", str(j)) for st in stages for j in range(count)]


def _dot(task: KernelTask, kind: str, names: list[str], k: dict[str, KnobValue], src: rm.CSource, vlen: int) -> str:
    nb, x, y = names
    half = rm.half_to_float_helper(src)
    u, vec = int(k["unroll"]), k["reduction"] == "vector"
    prod, lanes, s16 = _block_product(kind, str(k["widening"]), vlen)
    lf = rm.fit_lmul(32, lanes, vlen)
    sf, tf = rm.suffix("f", 32, lf), rm.vtype("f", 32, lf)
    xb = Q8 if kind == "q8_0_dot" else Q4
    if vec:
        tail = [f"acc@ = __riscv_vfmacc_vf_{sf}(acc@, d@, __riscv_vfwcvt_f_x_v_{sf}(p@, {lanes}), {lanes});"]
    else:
        tail = [
            f"sum@ += (float)__riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_{s16}_i32m1(p@, "
            f"__riscv_vmv_s_x_i32m1(0, 1), {lanes})) * d@;"
        ]

    def stages(first: str) -> list[str]:
        return [
            f"const uint8_t *bx@ = {x} + (size_t)({first} + @) * {xb};",
            f"const uint8_t *by@ = {y} + (size_t)({first} + @) * {Q8};",
            *prod,
            f"const float d@ = {half}(bx@) * {half}(by@);",
            *tail,
        ]

    lines = [task.signature, "{"]
    init = f"{tf} acc@ = __riscv_vfmv_v_f_{sf}(0.0f, {lanes});" if vec else "float sum@ = 0.0f;"
    lines += _stage_major([init], u, "    ")
    lines += ["    int b = 0;", f"    for (; b + {u} <= {nb}; b += {u}) {{"]
    lines += _stage_major(stages("b"), u, "        ")
    lines += ["    }", f"    for (; b < {nb}; b++) {{", *_stage_major(stages("b"), 1, "        "), "    }"]
    if vec:
        lines += [f"    acc0 = __riscv_vfadd_vv_{sf}(acc0, acc{j}, {lanes});" for j in range(1, u)]
        lines.append(
            f"    return __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_{sf}_f32m1(acc0, "
            f"__riscv_vfmv_s_f_f32m1(0.0f, 1), {lanes}));"
        )
    else:
        lines.append("    return " + " + ".join(f"sum{j}" for j in range(u)) + ";")
    return "\n".join([*lines, "}"])


def _block_product(kind: str, widening: str, vlen: int) -> tuple[list[str], int, str]:
    """Stages leaving one block's products in `p@` (i16 lanes, exact), the lane count, the i16 suffix."""
    l8, l8h = rm.fit_lmul(8, 32, vlen), rm.fit_lmul(8, 16, vlen)
    ti, si = rm.vtype("i", 8, l8h), rm.suffix("i", 8, l8h)
    if kind == "q8_0_dot" and widening == "wmul":
        l16 = rm.lmul_times(l8, 2)
        t8, s8 = rm.vtype("i", 8, l8), rm.suffix("i", 8, l8)
        return (
            [
                f"{t8} a@ = __riscv_vle8_v_{s8}((const int8_t *)(bx@ + 2), 32);",
                f"{t8} b@ = __riscv_vle8_v_{s8}((const int8_t *)(by@ + 2), 32);",
                f"{rm.vtype('i', 16, l16)} p@ = __riscv_vwmul_vv_{rm.suffix('i', 16, l16)}(a@, b@, 32);",
            ],
            32,
            rm.suffix("i", 16, l16),
        )
    l16 = rm.lmul_times(l8h, 2)
    t16, s16 = rm.vtype("i", 16, l16), rm.suffix("i", 16, l16)
    if kind == "q8_0_dot":  # halves: |q| <= 127 (ggml's quantizer), so two products fit an i16 lane
        return (
            [
                f"{ti} a0_@ = __riscv_vle8_v_{si}((const int8_t *)(bx@ + 2), 16);",
                f"{ti} a1_@ = __riscv_vle8_v_{si}((const int8_t *)(bx@ + 18), 16);",
                f"{ti} b0_@ = __riscv_vle8_v_{si}((const int8_t *)(by@ + 2), 16);",
                f"{ti} b1_@ = __riscv_vle8_v_{si}((const int8_t *)(by@ + 18), 16);",
                f"{t16} p@ = __riscv_vwmul_vv_{s16}(a0_@, b0_@, 16);",
                f"p@ = __riscv_vwmacc_vv_{s16}(p@, a1_@, b1_@, 16);",
            ],
            16,
            s16,
        )
    tu, su = rm.vtype("u", 8, l8h), rm.suffix("u", 8, l8h)
    unpack = [
        f"{tu} q@ = __riscv_vle8_v_{su}(bx@ + 2, 16);",
        f"{ti} lo@ = __riscv_vreinterpret_v_{su}_{si}(__riscv_vand_vx_{su}(q@, 0x0f, 16));",
        f"{ti} hi@ = __riscv_vreinterpret_v_{su}_{si}(__riscv_vsrl_vx_{su}(q@, 4, 16));",
        f"lo@ = __riscv_vsub_vx_{si}(lo@, 8, 16);",
        f"hi@ = __riscv_vsub_vx_{si}(hi@, 8, 16);",
    ]
    if widening == "halves":  # |q4 - 8| <= 8: two products per i16 lane are far from overflow
        return (
            [
                *unpack,
                f"{ti} b0_@ = __riscv_vle8_v_{si}((const int8_t *)(by@ + 2), 16);",
                f"{ti} b1_@ = __riscv_vle8_v_{si}((const int8_t *)(by@ + 18), 16);",
                f"{t16} p@ = __riscv_vwmul_vv_{s16}(lo@, b0_@, 16);",
                f"p@ = __riscv_vwmacc_vv_{s16}(p@, hi@, b1_@, 16);",
            ],
            16,
            s16,
        )
    # concat: the high nibbles slid up behind the low ones, one 32-lane multiply
    l16 = rm.lmul_times(l8, 2)
    t8, s8 = rm.vtype("i", 8, l8), rm.suffix("i", 8, l8)
    ext = f"__riscv_vlmul_ext_v_{si}_{s8}" if l8h != l8 else ""
    return (
        [
            *unpack,
            f"{t8} w@ = __riscv_vslideup_vx_{s8}({ext}(lo@), {ext}(hi@), 16, 32);",
            f"{t8} b@ = __riscv_vle8_v_{s8}((const int8_t *)(by@ + 2), 32);",
            f"{rm.vtype('i', 16, l16)} p@ = __riscv_vwmul_vv_{rm.suffix('i', 16, l16)}(w@, b@, 32);",
        ],
        32,
        rm.suffix("i", 16, l16),
    )


# ---------------------------------------------------------------------------------- dequantization


def _dequant(task: KernelTask, kind: str, names: list[str], k: dict[str, KnobValue], src: rm.CSource, vlen: int) -> str:
    nb, x, y = names
    half = rm.half_to_float_helper(src)
    u, widening = int(k["unroll"]), str(k["widening"])
    per, lanes = (Q8, 32) if kind == "q8_0_dequant" else (Q4, 16)
    l8, lf = rm.fit_lmul(8, lanes, vlen), rm.fit_lmul(32, lanes, vlen)
    sf, tf, t8, s8 = rm.suffix("f", 32, lf), rm.vtype("f", 32, lf), rm.vtype("i", 8, l8), rm.suffix("i", 8, l8)

    def widen(q: str) -> list[str]:
        """Stages: int8 lanes `q` -> f32 lanes `<q>f`."""
        if widening == "sext4":
            ti = rm.suffix("i", 32, lf)
            return [
                f"{rm.vtype('i', 32, lf)} {q}i = __riscv_vsext_vf4_{ti}({q}, {lanes});",
                f"{tf} {q}f = __riscv_vfcvt_f_x_v_{sf}({q}i, {lanes});",
            ]
        l16 = rm.lmul_times(l8, 2)
        s16 = rm.suffix("i", 16, l16)
        return [
            f"{rm.vtype('i', 16, l16)} {q}i = __riscv_vsext_vf2_{s16}({q}, {lanes});",
            f"{tf} {q}f = __riscv_vfwcvt_f_x_v_{sf}({q}i, {lanes});",
        ]

    head = [f"const float d@ = {half}(src + @ * {per});"]
    if kind == "q8_0_dequant":
        stages = [
            *head,
            f"{t8} q@ = __riscv_vle8_v_{s8}((const int8_t *)(src + @ * {per} + 2), 32);",
            *widen("q@"),
            f"__riscv_vse32_v_{sf}(dst + @ * 32, __riscv_vfmul_vf_{sf}(q@f, d@, 32), 32);",
        ]
    else:
        tu, su = rm.vtype("u", 8, l8), rm.suffix("u", 8, l8)
        stages = [
            *head,
            f"{tu} q@ = __riscv_vle8_v_{su}(src + @ * {per} + 2, 16);",
            f"{t8} lo@ = __riscv_vreinterpret_v_{su}_{s8}(__riscv_vand_vx_{su}(q@, 0x0f, 16));",
            f"{t8} hi@ = __riscv_vreinterpret_v_{su}_{s8}(__riscv_vsrl_vx_{su}(q@, 4, 16));",
            f"lo@ = __riscv_vsub_vx_{s8}(lo@, 8, 16);",
            f"hi@ = __riscv_vsub_vx_{s8}(hi@, 8, 16);",
            *widen("lo@"),
            *widen("hi@"),
            f"__riscv_vse32_v_{sf}(dst + @ * 32, __riscv_vfmul_vf_{sf}(lo@f, d@, 16), 16);",
            f"__riscv_vse32_v_{sf}(dst + @ * 32 + 16, __riscv_vfmul_vf_{sf}(hi@f, d@, 16), 16);",
        ]
    group = _block_groups(src, f"nn_{kind}", "const uint8_t", "float", u, stages)
    return _group_loop(task, nb, group, u, f"{x} + (size_t)b * {per}", f"{y} + (size_t)b * 32")


def _block_groups(src: rm.CSource, base: str, in_t: str, out_t: str, u: int, stages: list[str], note: str = "") -> str:
    """Add `<base>_g1` and `<base>_g<u>`: u consecutive blocks from src to dst, stage-major. The restrict
    parameters let the compiler move later blocks' loads above earlier blocks' stores."""
    for g in sorted({1, u}):
        body = _stage_major(stages, g, "    ")
        head = f"static inline void {base}_g{g}({in_t} *restrict src, {out_t} *restrict dst)"
        src.add(f"{base}_g{g}", "\n".join([*([note] if note else []), head, "{", *body, "}"]))
    return base


def _group_loop(task: KernelTask, nb: str, base: str, u: int, src_at: str, dst_at: str) -> str:
    lines = [task.signature, "{", "    int b = 0;"]
    if u > 1:
        lines += [f"    for (; b + {u} <= {nb}; b += {u})", f"        {base}_g{u}({src_at}, {dst_at});"]
    lines += [f"    for (; b < {nb}; b++)", f"        {base}_g1({src_at}, {dst_at});", "}"]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- quantization


def _quantize(
    task: KernelTask, kind: str, names: list[str], k: dict[str, KnobValue], src: rm.CSource, vlen: int
) -> str:
    nb, x, y = names
    tobits = rm.float_to_half_helper(src)
    lf = rm.fit_lmul(32, 32, vlen)
    sf, tf = rm.suffix("f", 32, lf), rm.vtype("f", 32, lf)
    l16, l8 = _narrow(lf, 2), _narrow(lf, 4)
    if k["rounding"] == "rmm":
        s16, s8 = rm.suffix("i", 16, l16), rm.suffix("i", 8, l8)
        to_bytes = [
            f"{rm.vtype('i', 16, l16)} q16_@ = __riscv_vfncvt_x_f_w_{s16}_rm(s@, __RISCV_FRM_RMM, 32);",
            f"{rm.vtype('u', 8, l8)} q8_@ = __riscv_vreinterpret_v_{s8}_{rm.suffix('u', 8, l8)}("
            f"__riscv_vncvt_x_x_w_{s8}(q16_@, 32));",
        ]
    else:
        mask = rm.mask_type(32, lf)
        to_bytes = [
            f"{tf} t@ = __riscv_vfadd_vf_{sf}(s@, 12582912.0f, 32);",
            f"{tf} r@ = __riscv_vfsub_vf_{sf}(t@, 12582912.0f, 32);",
            f"{tf} h@ = __riscv_vfsgnj_vv_{sf}(__riscv_vfmv_v_f_{sf}(0.5f, 32), s@, 32);",
            f"{mask} tie@ = __riscv_vmfeq_vv_{sf}_b{mask[5:-2]}(__riscv_vfsub_vv_{sf}(s@, r@, 32), h@, 32);",
            f"t@ = __riscv_vfadd_vv_{sf}_mu(tie@, t@, t@, __riscv_vfadd_vv_{sf}(h@, h@, 32), 32);",
            f"{rm.vtype('u', 16, l16)} q16_@ = __riscv_vncvt_x_x_w_{rm.suffix('u', 16, l16)}("
            f"__riscv_vreinterpret_v_{sf}_{rm.suffix('u', 32, lf)}(t@), 32);",
            f"{rm.vtype('u', 8, l8)} q8_@ = __riscv_vncvt_x_x_w_{rm.suffix('u', 8, l8)}(q16_@, 32);",
        ]
    stages = [
        f"{tf} v@ = __riscv_vle32_v_{sf}(src + @ * 32, 32);",
        *_amax(str(k["reduction"]), lf),
        "const float d@ = amax@ / 127.0f;",
        "const float id@ = d@ != 0.0f ? 1.0f / d@ : 0.0f;",
        f"const uint16_t dh@ = {tobits}(d@);",
        f"{tf} s@ = __riscv_vfmul_vf_{sf}(v@, id@, 32);",
        *to_bytes,
        "dst[@ * 34] = (uint8_t)(dh@ & 0xffu);",
        "dst[@ * 34 + 1] = (uint8_t)(dh@ >> 8);",
        f"__riscv_vse8_v_{rm.suffix('u', 8, l8)}(dst + @ * 34 + 2, q8_@, 32);",
    ]
    u = int(k["unroll"])
    note = (
        "/* Round half away from zero without a float->int conversion: nearest-even through the 1.5*2^23\n"
        "   shifter (t = s + 1.5*2^23 holds the integer in its low mantissa bits), exact ties (s - r ==\n"
        "   copysign(0.5, s)) moved one step away from zero; the low byte of t's encoding is q mod 256. */"
        if k["rounding"] == "fixup"
        else "/* roundf via the RMM (ties to max magnitude) rounding mode of the narrowing conversion */"
    )
    group = _block_groups(src, "nn_q8_0_quantize", "const float", "uint8_t", u, stages, note)
    return _group_loop(task, nb, group, u, f"{x} + (size_t)b * 32", f"{y} + (size_t)b * 34")


def _narrow(lmul: int | str, factor: int) -> int | str:
    ratio = rm.lmul_ratio(lmul) / factor
    return int(ratio) if ratio >= 1 else f"f{round(1 / ratio)}"


def _amax(mode: str, lf: int | str) -> list[str]:
    """Stages computing `float amax@` = max |v@| over 32 lanes ("tree": halve the register group with
    vfmax first, vget being free, so the reduction runs at LMUL 1)."""
    sf = rm.suffix("f", 32, lf)
    lines = [f"{rm.vtype('f', 32, lf)} a@ = __riscv_vfabs_v_{sf}(v@, 32);"]
    cur, lanes, var = lf, 32, "a@"
    while mode == "tree" and rm.lmul_ratio(cur) > 1:
        nxt = int(rm.lmul_ratio(cur) // 2)
        lanes //= 2
        s_cur, s_nxt = rm.suffix("f", 32, cur), rm.suffix("f", 32, nxt)
        get = f"__riscv_vget_v_{s_cur}_{s_nxt}"
        lines.append(
            f"{rm.vtype('f', 32, nxt)} a{nxt}_@ = __riscv_vfmax_vv_{s_nxt}({get}({var}, 0), {get}({var}, 1), {lanes});"
        )
        cur, var = nxt, f"a{nxt}_@"
    sc = rm.suffix("f", 32, cur)
    lines.append(
        f"const float amax@ = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_{sc}_f32m1({var}, "
        f"__riscv_vfmv_s_f_f32m1(0.0f, 1), {lanes}));"
    )
    return lines


# --------------------------------------------------------------------------------- 4-bit weight GEMV


def _nbits(task: KernelTask, kind: str, names: list[str], k: dict[str, KnobValue], src: rm.CSource, vlen: int) -> str:
    """y[j] = sum over blocks of s * sum_e a[e] (q[e] - zp); R rows share each load of a's block."""
    n, kk, a, b, sc, zp, y = names
    rows = int(k["rows"])
    l8, l8h = rm.fit_lmul(8, 32, vlen), rm.fit_lmul(8, 16, vlen)
    l16h = rm.lmul_times(l8h, 2)
    lf = rm.fit_lmul(32, 32, vlen)
    sf, tf = rm.suffix("f", 32, lf), rm.vtype("f", 32, lf)
    s8, s16 = rm.suffix("u", 8, l8h), rm.suffix("u", 16, l16h)
    i8, u8 = rm.suffix("i", 8, l8), rm.suffix("u", 8, l8)
    # 16 bytes -> 32 weights in element order: as u16 lanes, w = (b | b << 4) & 0x0f0f puts the low nibble
    # (even element) in the low byte and the high nibble (odd element) in the high byte (little endian),
    # so the u16 vector read as bytes is q[0], q[1], ..., q[31].
    # '@' is the row within the group, '#' the block within the step: all (row, block) pairs are
    # independent chains up to the accumulator, interleaved stage by stage.
    stages = [
        "const size_t bi@_# = (size_t)(j + @) * (size_t)kb + (size_t)(blk + #);",
        f"{rm.vtype('u', 16, l16h)} w@_# = __riscv_vzext_vf2_{s16}(__riscv_vle8_v_{s8}({b} + bi@_# * 16, 16), 16);",
        f"w@_# = __riscv_vor_vv_{s16}(w@_#, __riscv_vsll_vx_{s16}(w@_#, 4, 16), 16);",
        f"w@_# = __riscv_vand_vx_{s16}(w@_#, 0x0f0f, 16);",
        f"{rm.vtype('i', 8, l8)} q@_# = __riscv_vsub_vx_{i8}(__riscv_vreinterpret_v_{u8}_{i8}("
        f"__riscv_vreinterpret_v_{s16}_{u8}(w@_#)), (int8_t){zp}[bi@_#], 32);",
        f"{tf} f@_# = __riscv_vfcvt_f_x_v_{sf}(__riscv_vsext_vf4_{rm.suffix('i', 32, lf)}(q@_#, 32), 32);",
        f"acc@ = __riscv_vfmacc_vv_{sf}_tu(acc@, __riscv_vfmul_vf_{sf}(f@_#, {sc}[bi@_#], 32), av#, len#);",
    ]
    a_stages = [
        f"const size_t len# = ({kk} - (blk + #) * 32) < 32 ? (size_t)({kk} - (blk + #) * 32) : 32;",
        f"{tf} av# = __riscv_vle32_v_{sf}({a} + (size_t)(blk + #) * 32, len#);",
    ]
    step = int(k["blocks"])

    def emit(sts: list[str], r: int, nblk: int, indent: str) -> list[str]:
        return [
            indent + st.replace("@", str(i)).replace("#", str(q)) for st in sts for i in range(r) for q in range(nblk)
        ]

    def group(r: int) -> list[str]:
        lines = _stage_major([f"{tf} acc@ = __riscv_vfmv_v_f_{sf}(0.0f, 32);"], r, "        ")
        lines.append("        int blk = 0;")
        if step > 1:
            lines += [
                f"        for (; blk + {step} <= kb; blk += {step}) {{",
                *emit(a_stages, 1, step, "            "),
                *emit(stages, r, step, "            "),
                "        }",
            ]
        lines += [
            "        for (; blk < kb; blk++) {",
            *emit(a_stages, 1, 1, "            "),
            *emit(stages, r, 1, "            "),
            "        }",
        ]
        return lines + _stage_major(
            [
                f"{y}[j + @] = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_{sf}_f32m1(acc@, "
                "__riscv_vfmv_s_f_f32m1(0.0f, 1), 32));"
            ],
            r,
            "        ",
        )

    lines = [task.signature, "{", f"    const int kb = ({kk} + 31) / 32;", "    int j = 0;"]
    if rows > 1:
        lines += [f"    for (; j + {rows} <= {n}; j += {rows}) {{", *group(rows), "    }"]
    lines += [f"    for (; j < {n}; j++) {{", *group(1), "    }", "}"]
    return "\n".join(lines)
