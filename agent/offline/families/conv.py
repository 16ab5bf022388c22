"""CNN layers on NCHW (batch 1) f32 tensors: convolutions, pooling, im2col, bilinear resize.

Recognized from the signature, the element counts of every buffer at every size and the reference:
- conv1x1 `(c_in, c_out, hw, x, weight, bias, y)`: Y = W X + bias, vectorized over hw; `rows` output
  channels share each loaded x vector (register blocking, vfmacc.vf with the scalar weight);
- conv3x3 `(c_in, c_out, h, w, x, weight[c_out*c_in*9], bias, y)` and depthwise `(c, h, w, x,
  weight[c*9], bias, y)`, stride 1, zero pad 1: vectorized over the output width; each input row is
  loaded once and its left/right neighbours made with vfslide1up/down (the scalar shifted in is the
  neighbouring pixel or the zero padding), then feeds up to three output rows (`rows` output rows and,
  for conv3x3, `cout` output channels are blocked in registers);
- im2col `(c, h, w, kh, kw, stride, pad, x, col)`: per output row, the in-image span is a unit-stride
  (stride 1) or strided (vlse32) copy, the padding a vector of zeros;
- maxpool2x2 / avgpool2x2 `(c, h, w, x, y)`: pairs are split without segment loads: a row read as
  64-bit lanes, vnsrl by 0 and 32 gives the even and odd columns; "rows_first" combines the two input
  rows before splitting (half the narrowing), "pairs_first" keeps the reference's addition order;
- global_avgpool `(c, hw, x, y)`: vector accumulators, one reduction per channel;
- bilinear_resize `(c, ih, iw, oh, ow, x, y)`: the horizontal source coordinates of a chunk of output
  columns are computed once in vectors (same f32 formula as the reference, floor through the RDN
  rounding mode) and reused by every row of every channel; pixels are gathered with vluxei32.
"""

from __future__ import annotations

from agent.offline.base import Knob, KnobValue, Variant, register
from agent.offline.families import rvv_math as rm
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask, Param
from knowledge.taxonomy import Technique


def _split(task: KernelTask) -> tuple[list[str], list[Param], list[Param]] | None:
    """(size names, const float inputs, float outputs) when sizes come first, then float buffers."""
    ps = task.params
    sizes = [p.name for p in ps if p.role == "size"]
    if task.return_type != "void" or [p.role for p in ps[: len(sizes)]] != ["size"] * len(sizes):
        return None
    bufs = ps[len(sizes) :]
    if any(p.role != "buffer" or p.ctype != "float" for p in bufs):
        return None
    return sizes, [p for p in bufs if p.const], [p for p in bufs if not p.const]


def _counts(task: KernelTask, bufs: list[Param], exprs: list[str]) -> bool:
    return len(bufs) == len(exprs) and all(
        rm.all_counts_equal(task, [b.name], e) for b, e in zip(bufs, exprs, strict=True)
    )


def conv_kind(task: KernelTask) -> str | None:
    shape = _split(task)
    if shape is None:
        return None
    s, ins, outs = shape
    if len(outs) != 1:
        return None
    ref = rm.squash(task.reference_code)
    n = len(s)
    if n == 3 and len(ins) == 3:
        a, b, c = s
        if _counts(task, [*ins, *outs], [f"{a}*{c}", f"{b}*{a}", b, f"{b}*{c}"]):
            return "conv1x1"
        if _counts(task, [*ins, *outs], [f"{a}*{b}*{c}", f"{a}*9", a, f"{a}*{b}*{c}"]):
            return "dwconv3x3" if "di" in ref and "dj" in ref else None
    if n == 4 and len(ins) == 3:
        ci, co, h, w = s
        if _counts(task, [*ins, *outs], [f"{ci}*{h}*{w}", f"{co}*{ci}*9", co, f"{co}*{h}*{w}"]):
            return "conv3x3" if "di" in ref and "dj" in ref else None
    if (
        n == 3
        and len(ins) == 1
        and _counts(task, [*ins, *outs], [f"{s[0]}*{s[1]}*{s[2]}", f"{s[0]}*({s[1]}//2)*({s[2]}//2)"])
    ):
        if "0.25f" in ref:
            return "avgpool2x2"
        return "maxpool2x2" if "?" in ref and ">" in ref else None
    if n == 2 and len(ins) == 1 and _counts(task, [*ins, *outs], [f"{s[0]}*{s[1]}", s[0]]):
        return "global_avgpool" if f"/(float){s[1]}" in ref else None
    if n == 5 and len(ins) == 1 and _counts(task, [*ins, *outs], [f"{s[0]}*{s[1]}*{s[2]}", f"{s[0]}*{s[3]}*{s[4]}"]):
        return "bilinear" if "+0.5f" in ref and "lambda" in ref else None
    if n == 7 and len(ins) == 1:
        c, h, w, kh, kw, st, pd = s
        cols = f"{c}*{kh}*{kw}*(({h}+2*{pd}-{kh})//{st}+1)*(({w}+2*{pd}-{kw})//{st}+1)"
        return "im2col" if _counts(task, [*ins, *outs], [f"{c}*{h}*{w}", cols]) else None
    return None


@register
class ConvFamily:
    name = "conv"

    def applies(self, task: KernelTask) -> bool:
        return conv_kind(task) is not None

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        kind = conv_kind(task)
        lm = Technique.VECTOR_LENGTH
        if kind == "conv1x1":
            return [
                rm.knob("lmul", [1, 2, 4], lm, 4),
                rm.knob("rows", [1, 2, 4, 8], Technique.REGISTER_BLOCKING, 4, also=(Technique.MULTI_ACCUMULATOR,)),
            ]
        if kind == "conv3x3":
            return [
                rm.knob("lmul", [1, 2, 4], lm, 1),
                rm.knob("rows", [1, 2, 4], Technique.REGISTER_BLOCKING, 2),
                rm.knob("cout", [1, 2, 4, 8], Technique.REGISTER_BLOCKING, 8),
            ]
        if kind == "dwconv3x3":
            return [rm.knob("lmul", [1, 2, 4], lm, 2), rm.knob("rows", [1, 2, 4], Technique.REGISTER_BLOCKING, 4)]
        if kind in ("maxpool2x2", "avgpool2x2"):
            # avgpool: rows_first adds (a + c) + (b + d), a different rounding order than the reference's
            # (a + b) + (c + d); offered first only when the tolerance allows a few ulp.
            exact = kind == "avgpool2x2" and task.tolerance.rtol < 1e-6
            order = ["pairs_first", "rows_first"] if exact else ["rows_first", "pairs_first"]
            return [rm.knob("lmul", [1, 2, 4], lm, 4), rm.knob("order", order, Technique.MEMORY_ACCESS, order[0])]
        if kind == "global_avgpool":
            return [
                rm.knob("lmul", [1, 2, 4, 8], lm, 2),
                rm.knob("accumulators", [1, 2, 4], Technique.MULTI_ACCUMULATOR, 1, also=(Technique.UNROLL,)),
            ]
        return [rm.knob("lmul", [1, 2, 4, 8] if kind == "im2col" else [1, 2, 4], lm, 4)]

    def valid(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> bool:
        """Register budget: accumulators plus about three working vectors within the 32 registers."""
        lmul = int(knobs.get("lmul", 1))
        accs = int(knobs.get("rows", 1)) * int(knobs.get("cout", 1)) * int(knobs.get("accumulators", 1))
        return (accs + 3) * lmul <= 32

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        kind = conv_kind(task)
        if kind is None:
            raise rm.InvalidInput(f"task {task.name!r} is not a CNN layer this family implements")
        spec = self.knobs(task, target)
        k = rm.resolve_knobs(self.name, spec, knobs)
        names = [p.name for p in task.params]
        build = {
            "conv1x1": _conv1x1,
            "conv3x3": _conv3x3,
            "dwconv3x3": _conv3x3,
            "maxpool2x2": _pool2x2,
            "avgpool2x2": _pool2x2,
            "global_avgpool": _global_avgpool,
            "im2col": _im2col,
            "bilinear": _bilinear,
        }[kind]
        kernel = build(task, kind, names, k)
        desc = f"{kind}: " + ", ".join(f"{a} {b}" for a, b in k.items())
        src = rm.CSource()
        code = src.render(kernel, f"{task.name}: {desc} (offline generator, family conv).")
        return rm.make_variant(self.name, spec, k, code, desc, (Technique.VECTORIZE, Technique.TAIL_HANDLING))


def _ty(lmul: int) -> tuple[str, str]:
    return rm.suffix("f", 32, lmul), rm.vtype("f", 32, lmul)


# ---------------------------------------------------------------------------------------- conv1x1


def _conv1x1(task: KernelTask, kind: str, names: list[str], k: dict[str, KnobValue]) -> str:
    ci, co, hw, x, wt, bias, y = names
    lmul, rows = int(k["lmul"]), int(k["rows"])
    s, t = _ty(lmul)

    def block(r: int) -> list[str]:
        lines = [f"            {t} acc{i} = __riscv_vfmv_v_f_{s}({bias}[o + {i}], vl);" for i in range(r)]
        lines += [
            f"            for (int ic = 0; ic < {ci}; ic++) {{",
            f"                {t} xv = __riscv_vle32_v_{s}({x} + (size_t)ic * n + p, vl);",
        ]
        lines += [
            f"                acc{i} = __riscv_vfmacc_vf_{s}(acc{i}, {wt}[(size_t)(o + {i}) * {ci} + ic], xv, vl);"
            for i in range(r)
        ]
        lines.append("            }")
        lines += [f"            __riscv_vse32_v_{s}({y} + (size_t)(o + {i}) * n + p, acc{i}, vl);" for i in range(r)]
        return lines

    def loop(r: int) -> list[str]:
        return [
            "        for (size_t p = 0, vl; p < n; p += vl) {",
            f"            vl = __riscv_vsetvl_e32m{lmul}(n - p);",
            *block(r),
            "        }",
        ]

    lines = [task.signature, "{", f"    const size_t n = {hw} > 0 ? (size_t){hw} : 0;", "    int o = 0;"]
    if rows > 1:
        lines += [f"    for (; o + {rows} <= {co}; o += {rows}) {{", *loop(rows), "    }"]
    lines += [f"    for (; o < {co}; o++) {{", *loop(1), "    }", "}"]
    return "\n".join(lines)


# ------------------------------------------------------------------------------- 3x3 convolutions


def _conv3x3(task: KernelTask, kind: str, names: list[str], k: dict[str, KnobValue]) -> str:
    """Output rows i0..i0+R-1 of `cb` output channels, one vector chunk of columns at a time."""
    depthwise = kind == "dwconv3x3"
    if depthwise:
        c, h, w, x, wt, bias, y = names
        ci, co = "1", c
    else:
        ci, co, h, w, x, wt, bias, y = names
    lmul, rows = int(k["lmul"]), int(k["rows"])
    cout = 1 if depthwise else int(k["cout"])
    s, t = _ty(lmul)

    def chunk(cb: int) -> list[str]:
        """The column chunk [j, j+vl) of rows i0.. for channels o..o+cb-1."""
        lines = [
            f"                {t} a{b}_{r} = __riscv_vfmv_v_f_{s}({bias}[o + {b}], vl);"
            for b in range(cb)
            for r in range(rows)
        ]
        plane_in = "(size_t)o * plane" if depthwise else "(size_t)ic * plane"
        lines += [
            *([] if depthwise else [f"                for (int ic = 0; ic < {ci}; ic++) {{"]),
            f"                const float *xc = {x} + {plane_in};",
        ]
        for d in range(rows + 2):  # input row si = i0 - 1 + d feeds output rows r with di = d - r in 0..2
            lines += [
                f"                if (i0 + {d - 1} >= 0 && i0 + {d - 1} < {h}) {{",
                f"                    const float *row = xc + (size_t)(i0 + {d - 1}) * (size_t)W;",
                f"                    {t} mid = __riscv_vle32_v_{s}(row + j, vl);",
                "                    const float lft = j > 0 ? row[j - 1] : 0.0f;",
                "                    const float rgt = j + vl < W ? row[j + vl] : 0.0f;",
                f"                    {t} lv = __riscv_vfslide1up_vf_{s}(mid, lft, vl);",
                f"                    {t} rv = __riscv_vfslide1down_vf_{s}(mid, rgt, vl);",
            ]
            for b in range(cb):
                kw = f"{wt} + ((size_t)(o + {b}) * {ci} + {'0' if depthwise else 'ic'}) * 9"
                for r in range(rows):
                    di = d - r
                    if 0 <= di <= 2:
                        for dj, v in enumerate(("lv", "mid", "rv")):
                            lines.append(
                                f"                    a{b}_{r} = __riscv_vfmacc_vf_{s}(a{b}_{r}, "
                                f"({kw})[{di * 3 + dj}], {v}, vl);"
                            )
            lines.append("                }")
        if not depthwise:
            lines.append("                }")
        for b in range(cb):
            for r in range(rows):
                lines += [
                    f"                if (i0 + {r} < {h})",
                    f"                    __riscv_vse32_v_{s}({y} + (size_t)(o + {b}) * plane + "
                    f"(size_t)(i0 + {r}) * (size_t)W + j, "
                    f"a{b}_{r}, vl);",
                ]
        return lines

    def channel_loop(cb: int) -> list[str]:
        return [
            f"        for (int i0 = 0; i0 < {h}; i0 += {rows}) {{",
            "            for (size_t j = 0, vl; j < W; j += vl) {",
            f"                vl = __riscv_vsetvl_e32m{lmul}(W - j);",
            *chunk(cb),
            "            }",
            "        }",
        ]

    lines = [
        task.signature,
        "{",
        f"    const size_t W = {w} > 0 ? (size_t){w} : 0;",
        f"    const size_t plane = (size_t)({h} > 0 ? {h} : 0) * W;",
        "    int o = 0;",
    ]
    if cout > 1:
        lines += [f"    for (; o + {cout} <= {co}; o += {cout}) {{", *channel_loop(cout), "    }"]
    lines += [f"    for (; o < {co}; o++) {{", *channel_loop(1), "    }", "}"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- pooling


def _pool2x2(task: KernelTask, kind: str, names: list[str], k: dict[str, KnobValue]) -> str:
    c, h, w, x, y = names
    lmul = int(k["lmul"])
    if lmul > 4:
        raise rm.InvalidInput("pool2x2 needs LMUL <= 4 (its rows are read as LMUL*2 groups)")
    s, t = _ty(lmul)
    s64, s32u = rm.suffix("u", 64, lmul * 2), rm.suffix("u", 32, lmul)
    f_of = f"__riscv_vreinterpret_v_{s32u}_{s}"

    def split(src: str, tag: str) -> list[str]:
        """Even and odd columns of `src` (2*vl floats read as vl 64-bit lanes)."""
        # 2*vl floats loaded as f32 (element alignment only) and viewed as vl 64-bit lanes
        s2 = rm.suffix("u", 32, lmul * 2)
        return [
            f"            {rm.vtype('u', 64, lmul * 2)} {tag}64 = __riscv_vreinterpret_v_{s2}_{s64}("
            f"__riscv_vle32_v_{s2}((const uint32_t *)({src}), 2 * vl));",
            f"            {t} {tag}e = {f_of}(__riscv_vnsrl_wx_{s32u}({tag}64, 0, vl));",
            f"            {t} {tag}o = {f_of}(__riscv_vnsrl_wx_{s32u}({tag}64, 32, vl));",
        ]

    op = "vfmax" if kind == "maxpool2x2" else "vfadd"
    if k["order"] == "rows_first":
        # combine the rows as 2*vl floats, then split the pairs once
        s2, t2 = _ty(lmul * 2)
        body = [
            f"            {t2} m2 = __riscv_{op}_vv_{s2}(__riscv_vle32_v_{s2}(r0 + 2 * j, 2 * vl), "
            f"__riscv_vle32_v_{s2}(r1 + 2 * j, 2 * vl), 2 * vl);",
            f"            {rm.vtype('u', 64, lmul * 2)} m64 = "
            f"__riscv_vreinterpret_v_{rm.suffix('u', 32, lmul * 2)}_{s64}("
            f"__riscv_vreinterpret_v_{s2}_{rm.suffix('u', 32, lmul * 2)}(m2));",
            f"            {t} v = __riscv_{op}_vv_{s}({f_of}(__riscv_vnsrl_wx_{s32u}(m64, 0, vl)), "
            f"{f_of}(__riscv_vnsrl_wx_{s32u}(m64, 32, vl)), vl);",
        ]
    else:
        body = [
            *split("r0 + 2 * j", "a"),
            *split("r1 + 2 * j", "b"),
            f"            {t} v = __riscv_{op}_vv_{s}(__riscv_{op}_vv_{s}(ae, ao, vl), "
            f"__riscv_{op}_vv_{s}(be, bo, vl), vl);",
        ]
    if kind == "avgpool2x2":
        body.append(f"            v = __riscv_vfmul_vf_{s}(v, 0.25f, vl);")
    return "\n".join(
        [
            task.signature,
            "{",
            f"    const int oh = {h} / 2, ow = {w} / 2;",
            f"    for (int ch = 0; ch < {c}; ch++) {{",
            f"        const float *xc = {x} + (size_t)ch * (size_t){h} * (size_t){w};",
            f"        float *yc = {y} + (size_t)ch * (size_t)oh * (size_t)ow;",
            "        for (int i = 0; i < oh; i++) {",
            f"            const float *r0 = xc + (size_t)(2 * i) * (size_t){w};",
            f"            const float *r1 = r0 + {w};",
            "            float *out = yc + (size_t)i * (size_t)ow;",
            "            for (size_t j = 0, vl; j < (size_t)ow; j += vl) {",
            f"            vl = __riscv_vsetvl_e32m{lmul}((size_t)ow - j);",
            *body,
            f"            __riscv_vse32_v_{s}(out + j, v, vl);",
            "            }",
            "        }",
            "    }",
            "}",
        ]
    )


def _global_avgpool(task: KernelTask, kind: str, names: list[str], k: dict[str, KnobValue]) -> str:
    c, hw, x, y = names
    lmul, a = int(k["lmul"]), int(k["accumulators"])
    s, t = _ty(lmul)
    lines = [
        task.signature,
        "{",
        f"    const size_t n = {hw} > 0 ? (size_t){hw} : 0;",
        f"    const size_t vm = __riscv_vsetvlmax_e32m{lmul}();",
        f"    for (int ch = 0; ch < {c}; ch++) {{",
        f"        const float *xc = {x} + (size_t)ch * n;",
        *[f"        {t} acc{j} = __riscv_vfmv_v_f_{s}(0.0f, vm);" for j in range(a)],
        "        size_t p = 0;",
        f"        for (; p + {a} * vm <= n; p += {a} * vm) {{",
        *[
            f"            acc{j} = __riscv_vfadd_vv_{s}(acc{j}, "
            f"__riscv_vle32_v_{s}(xc + p{f' + {j} * vm' if j else ''}, vm), vm);"
            for j in range(a)
        ],
        "        }",
        "        for (size_t vl; p < n; p += vl) {",
        f"            vl = __riscv_vsetvl_e32m{lmul}(n - p);",
        f"            acc0 = __riscv_vfadd_vv_{s}_tu(acc0, acc0, __riscv_vle32_v_{s}(xc + p, vl), vl);",
        "        }",
        *[f"        acc0 = __riscv_vfadd_vv_{s}(acc0, acc{j}, vm);" for j in range(1, a)],
        f"        float sum = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_{s}_f32m1(acc0, "
        "__riscv_vfmv_s_f_f32m1(0.0f, 1), vm));",
        f"        {y}[ch] = sum / (float){hw};",
        "    }",
        "}",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- im2col


def _im2col(task: KernelTask, kind: str, names: list[str], k: dict[str, KnobValue]) -> str:
    c, h, w, kh, kw, stride, pad, x, col = names
    lmul = int(k["lmul"])
    s, t = _ty(lmul)
    return "\n".join(
        [
            task.signature,
            "{",
            f"    const int oh = ({h} + 2 * {pad} - {kh}) / {stride} + 1;",
            f"    const int ow = ({w} + 2 * {pad} - {kw}) / {stride} + 1;",
            "    const size_t ncols = (size_t)oh * (size_t)ow;",
            f"    const {t} zero = __riscv_vfmv_v_f_{s}(0.0f, __riscv_vsetvlmax_e32m{lmul}());",
            f"    for (int ci = 0; ci < {c}; ci++)",
            f"        for (int ky = 0; ky < {kh}; ky++)",
            f"            for (int kx = 0; kx < {kw}; kx++) {{",
            f"                float *dst = {col} + ((size_t)(ci * {kh} + ky) * (size_t){kw} + (size_t)kx) * ncols;",
            "                /* output columns ox whose source ix = ox*stride - pad + kx lies in [0, w) */",
            f"                int lo = kx >= {pad} ? 0 : ({pad} - kx + {stride} - 1) / {stride};",
            f"                int hi = {w} - 1 + {pad} - kx < 0 ? 0 : ({w} - 1 + {pad} - kx) / {stride} + 1;",
            "                if (hi > ow)",
            "                    hi = ow;",
            "                if (lo > hi)",
            "                    lo = hi;",
            "                for (int oy = 0; oy < oh; oy++) {",
            "                    float *d = dst + (size_t)oy * (size_t)ow;",
            f"                    const int iy = oy * {stride} - {pad} + ky;",
            f"                    if (iy < 0 || iy >= {h}) {{",
            "                        for (size_t i = 0, vl; i < (size_t)ow; i += vl) {",
            f"                            vl = __riscv_vsetvl_e32m{lmul}((size_t)ow - i);",
            f"                            __riscv_vse32_v_{s}(d + i, zero, vl);",
            "                        }",
            "                        continue;",
            "                    }",
            "                    for (size_t i = 0, vl; i < (size_t)lo; i += vl) {",
            f"                        vl = __riscv_vsetvl_e32m{lmul}((size_t)lo - i);",
            f"                        __riscv_vse32_v_{s}(d + i, zero, vl);",
            "                    }",
            f"                    const float *src = {x} + ((size_t)ci * (size_t){h} + (size_t)iy) * (size_t){w}",
            f"                                       + (lo * {stride} - {pad} + kx);",
            "                    for (size_t i = 0, vl; i < (size_t)(hi - lo); i += vl) {",
            f"                        vl = __riscv_vsetvl_e32m{lmul}((size_t)(hi - lo) - i);",
            f"                        {t} v = {stride} == 1 ? __riscv_vle32_v_{s}(src + i, vl)",
            f"                                       : __riscv_vlse32_v_{s}(src + i * {stride}, "
            f"(ptrdiff_t){stride} * 4, vl);",
            f"                        __riscv_vse32_v_{s}(d + lo + i, v, vl);",
            "                    }",
            "                    for (size_t i = (size_t)hi, vl; i < (size_t)ow; i += vl) {",
            f"                        vl = __riscv_vsetvl_e32m{lmul}((size_t)ow - i);",
            f"                        __riscv_vse32_v_{s}(d + i, zero, vl);",
            "                    }",
            "                }",
            "            }",
            "}",
        ]
    )


# --------------------------------------------------------------------------------- bilinear resize


def _bilinear(task: KernelTask, kind: str, names: list[str], k: dict[str, KnobValue]) -> str:
    c, ih, iw, oh, ow, x, y = names
    lmul = int(k["lmul"])
    s, t = _ty(lmul)
    si, ti, su, tu = (
        rm.suffix("i", 32, lmul),
        rm.vtype("i", 32, lmul),
        rm.suffix("u", 32, lmul),
        rm.vtype("u", 32, lmul),
    )
    return "\n".join(
        [
            task.signature,
            "{",
            f"    const float sh = (float){ih} / (float){oh};",
            f"    const float sw = (float){iw} / (float){ow};",
            f"    for (size_t j = 0, vl; j < (size_t){ow}; j += vl) {{",
            f"        vl = __riscv_vsetvl_e32m{lmul}((size_t){ow} - j);",
            "        /* source columns of this chunk, exactly the reference's f32 steps (no contraction) */",
            f"        {tu} ix = __riscv_vadd_vx_{su}(__riscv_vid_v_{su}(vl), (uint32_t)j, vl);",
            f"        {t} sx = __riscv_vfcvt_f_xu_v_{s}(ix, vl);",
            f"        sx = __riscv_vfmul_vf_{s}(__riscv_vfadd_vf_{s}(sx, 0.5f, vl), sw, vl);",
            f"        sx = __riscv_vfmax_vf_{s}(__riscv_vfsub_vf_{s}(sx, 0.5f, vl), 0.0f, vl);",
            f"        {ti} x0 = __riscv_vfcvt_x_f_v_{si}_rm(sx, __RISCV_FRM_RDN, vl); /* floor: sx >= 0 */",
            f"        x0 = __riscv_vmin_vx_{si}(x0, {iw} - 1, vl);",
            f"        {t} lx = __riscv_vfsub_vv_{s}(sx, __riscv_vfcvt_f_x_v_{s}(x0, vl), vl);",
            f"        {ti} x1 = __riscv_vmin_vx_{si}(__riscv_vadd_vx_{si}(x0, 1, vl), {iw} - 1, vl);",
            f"        {tu} o0 = __riscv_vsll_vx_{su}(__riscv_vreinterpret_v_{si}_{su}(x0), 2, vl);",
            f"        {tu} o1 = __riscv_vsll_vx_{su}(__riscv_vreinterpret_v_{si}_{su}(x1), 2, vl);",
            f"        {t} wx = __riscv_vfrsub_vf_{s}(lx, 1.0f, vl);",
            f"        for (int oy = 0; oy < {oh}; oy++) {{",
            "            float syf = (float)oy + 0.5f;",
            "            syf = syf * sh;",
            "            syf = syf - 0.5f;",
            "            if (syf < 0.0f)",
            "                syf = 0.0f;",
            "            int y0 = (int)syf;",
            f"            if (y0 > {ih} - 1)",
            f"                y0 = {ih} - 1;",
            f"            const int y1 = y0 < {ih} - 1 ? y0 + 1 : y0;",
            "            const float ly = syf - (float)y0;",
            f"            for (int ch = 0; ch < {c}; ch++) {{",
            f"                const float *xc = {x} + (size_t)ch * (size_t){ih} * (size_t){iw};",
            f"                const float *r0 = xc + (size_t)y0 * (size_t){iw};",
            f"                const float *r1 = xc + (size_t)y1 * (size_t){iw};",
            f"                {t} top = __riscv_vfmul_vv_{s}(wx, __riscv_vluxei32_v_{s}(r0, o0, vl), vl);",
            f"                top = __riscv_vfmacc_vv_{s}(top, lx, __riscv_vluxei32_v_{s}(r0, o1, vl), vl);",
            f"                {t} bot = __riscv_vfmul_vv_{s}(wx, __riscv_vluxei32_v_{s}(r1, o0, vl), vl);",
            f"                bot = __riscv_vfmacc_vv_{s}(bot, lx, __riscv_vluxei32_v_{s}(r1, o1, vl), vl);",
            f"                {t} v = __riscv_vfmul_vf_{s}(top, 1.0f - ly, vl);",
            f"                v = __riscv_vfmacc_vf_{s}(v, ly, bot, vl);",
            f"                float *out = {y} + ((size_t)ch * (size_t){oh} + (size_t)oy) * (size_t){ow};",
            f"                __riscv_vse32_v_{s}(out + j, v, vl);",
            "            }",
            "        }",
            "    }",
            "}",
        ]
    )
