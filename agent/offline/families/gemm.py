"""Single-precision GEMM, C = alpha*A*op(B) + beta*C with row-major A and C, B as k x n (NN) or n x k (NT).

Layout is read from the task: the element counts of the three matrices at a size where m, n and k
differ give which size parameter is which; the reference's index arithmetic gives each matrix's row
stride, which tells NN from NT (and rejects layouts this family does not implement).

The kernel is a register-blocked micro-kernel: an `mr` x (`nv` * VLMAX) tile of C lives in mr*nv
vector registers of LMUL `lmul`; for each p it loads nv vectors of row p of B (or of a packed panel)
and broadcasts A[i][p] with vfmacc.vf (scalar loads use the LS pipes, not the single vector
load/store pipe, reference/riscv-k1-k3.md 3.2). Edges: column tails are one vector of vl < VLMAX,
row tails use tiles of 4, 2 and 1 rows. Knobs: lmul (vector_length), mr and nv (register_blocking),
k unroll (unroll), packing B panels into a contiguous stack buffer (packing; NT reads B^T columns
with strided loads otherwise), and a k-block size for cache tiling (memory_access).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.offline.base import Knob, KnobValue, Variant, register
from agent.offline.families._blas import (
    HEADER,
    LMULS,
    VECTOR_REGISTERS,
    f32,
    knob_values,
    pointers,
    scalars,
    sizes,
    strides,
    variant,
    vf32,
    vlmax,
)
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Operator, Technique

PANEL_MAX_FLOATS = 16384  # 64 KB of stack for a packed B panel
DEFAULT_KC_WHEN_PACKING = 256
MRS = [1, 2, 4, 6, 8]


@dataclass(frozen=True)
class GemmLayout:
    trans_b: bool  # B is n x k (C = A * B^T)
    m: str
    n: str
    k: str
    a: str
    b: str
    c: str
    alpha: str | None
    beta: str | None
    bench: tuple[int, int, int]  # (M, N, K) of the timed size


def layout(task: KernelTask) -> GemmLayout | None:
    if task.return_type != "void" or len(sizes(task)) != 3:
        return None
    ptrs = pointers(task)
    if len(ptrs) != 3 or any(p.ctype != "float" for p in ptrs) or any(p.ctype != "float" for p in scalars(task)):
        return None
    consts = [p.name for p in ptrs if p.const]
    outs = [p.name for p in ptrs if not p.const]
    if len(consts) != 2 or len(outs) != 1:
        return None
    names = [p.name for p in sizes(task)]
    probe = next(
        (i for i, s in enumerate(task.sizes) if len({s[x] for x in names}) == 3 and min(s[x] for x in names) > 1),
        None,
    )
    if probe is None:
        return None
    size, counts = task.sizes[probe], task.counts[probe]
    by_value = {size[x]: x for x in names}
    c = outs[0]
    for a, b in (consts, consts[::-1]):
        lay = _solve(task, by_value, counts, a, b, c)
        if lay is not None:
            return lay
    return None


def _solve(
    task: KernelTask, by_value: dict[int, str], counts: dict[str, int], a: str, b: str, c: str
) -> GemmLayout | None:
    prod = counts[a] * counts[b]
    if prod % counts[c]:
        return None
    k_val = round((prod // counts[c]) ** 0.5)
    if k_val * k_val * counts[c] != prod or k_val == 0 or counts[a] % k_val:
        return None
    m_val = counts[a] // k_val
    if m_val == 0 or counts[c] % m_val:
        return None
    n_val = counts[c] // m_val
    if not {m_val, n_val, k_val} <= set(by_value) or len({m_val, n_val, k_val}) != 3:
        return None
    m, n, k = by_value[m_val], by_value[n_val], by_value[k_val]
    if strides(task, a) != {k} or strides(task, c) != {n}:
        return None
    sb = strides(task, b)
    if sb not in ({n}, {k}):
        return None
    alpha, beta = _alpha_beta(task)
    if beta is not None and task.args[c].kind != "inout":
        return None
    bench = task.bench_size
    return GemmLayout(sb == {k}, m, n, k, a, b, c, alpha, beta, (bench[m], bench[n], bench[k]))


def _alpha_beta(task: KernelTask) -> tuple[str | None, str | None]:
    names = [p.name for p in scalars(task)]
    if not names:
        return None, None
    alpha = next((s for s in names if s.lower() == "alpha"), names[0])
    rest = [s for s in names if s != alpha]
    return alpha, (rest[0] if rest else None)


# ---------------------------------------------------------------------------------------- codegen


@dataclass(frozen=True)
class GemmConfig:
    lmul: int
    mr: int
    nv: int
    unroll: int
    pack: bool
    kc: int  # 0: all of k in one block


class _Gen:
    def __init__(self, task: KernelTask, lay: GemmLayout, cfg: GemmConfig, target: TargetProfile) -> None:
        self.task, self.lay, self.cfg = task, lay, cfg
        self.s, self.t = f32(cfg.lmul), vf32(cfg.lmul)
        self.vlmax = vlmax(target, cfg.lmul)
        self.nr = cfg.nv * self.vlmax
        self.kc = self._kc()
        # unpacked NT reads columns of B^T: element (p, j) at b[j*K + p]
        self.strided = lay.trans_b and not cfg.pack

    def _kc(self) -> int:
        if not self.cfg.pack:
            return self.cfg.kc
        kc = self.cfg.kc or DEFAULT_KC_WHEN_PACKING
        return max(1, min(kc, PANEL_MAX_FLOATS // self.nr))

    # -- tiles
    def tile_name(self, mr: int, nv: int) -> str:
        return f"tile_{mr}x{nv}"

    def tile(self, mr: int, nv: int) -> list[str]:
        """C[i..i+mr, j..j+nv*vl] (+)= A[i.., p0..p1] * Bpanel; `first` says whether to apply beta."""
        s, t, u = self.s, self.t, self.cfg.unroll
        params = ["const float *a", "size_t lda", "const float *b", "size_t ldb", "float *c", "size_t ldc",
                  "size_t kk", "size_t vl", "int first"]  # fmt: skip
        if self.lay.alpha:
            params.append("float alpha")
        if self.lay.beta:
            params.append("float beta")
        out = [f"static inline __attribute__((always_inline)) void {self.tile_name(mr, nv)}({', '.join(params)})", "{"]
        acc = [[f"c{r}_{v}" for v in range(nv)] for r in range(mr)]
        out += [f"    {t} {acc[r][v]} = __riscv_vfmv_v_f_{s}(0.0f, vl);" for r in range(mr) for v in range(nv)]
        out += ["    size_t p = 0;", f"    for (; p + {u} <= kk; p += {u}) {{"]
        for q in range(u):  # each step in its own block: the b*/a* names repeat
            out += ["        {", *self._k_step(mr, nv, acc, "p" if q == 0 else f"p + {q}", "            "), "        }"]
        out.append("    }")
        if u > 1:
            out.append("    for (; p < kk; p++) {")
            out += self._k_step(mr, nv, acc, "p", "        ")
            out.append("    }")
        for r in range(mr):
            for v in range(nv):
                out += self._store(acc[r][v], f"c + {r} * ldc + {v} * vl" if (r or v) else "c", "    ")
        out += ["}", ""]
        return out

    def _k_step(self, mr: int, nv: int, acc: list[list[str]], p: str, ind: str) -> list[str]:
        s, t = self.s, self.t
        lines = []
        for v in range(nv):
            if self.strided:
                src = f"b + ({v} * vl) * ldb + {p}" if v else f"b + {p}"
                stride = "(ptrdiff_t)(ldb * sizeof(float))"
                lines.append(f"{ind}const {t} b{v} = __riscv_vlse32_v_{s}({src}, {stride}, vl);")
            else:
                src = f"b + ({p}) * ldb + {v} * vl" if v else f"b + ({p}) * ldb"
                lines.append(f"{ind}const {t} b{v} = __riscv_vle32_v_{s}({src}, vl);")
        for r in range(mr):
            lines.append(f"{ind}const float a{r} = a[{r} * lda + {p}];" if r else f"{ind}const float a0 = a[{p}];")
            for v in range(nv):
                lines.append(f"{ind}{acc[r][v]} = __riscv_vfmacc_vf_{s}({acc[r][v]}, a{r}, b{v}, vl);")
        return lines

    def _store(self, vec: str, at: str, ind: str) -> list[str]:
        s = self.s
        scaled = f"__riscv_vfmul_vf_{s}({vec}, alpha, vl)" if self.lay.alpha else vec
        old = f"__riscv_vle32_v_{s}({at}, vl)"
        accumulate = f"__riscv_vse32_v_{s}({at}, __riscv_vfadd_vv_{s}({old}, {scaled}, vl), vl);"
        if self.lay.beta:
            first = (
                f"if (beta == 0.0f) __riscv_vse32_v_{s}({at}, {scaled}, vl); "
                f"else __riscv_vse32_v_{s}({at}, __riscv_vfmacc_vf_{s}({scaled}, beta, {old}, vl), vl);"
            )
        else:
            first = f"__riscv_vse32_v_{s}({at}, {scaled}, vl);"
        if self.kc == 0:
            return [f"{ind}{first}"]
        return [f"{ind}if (first) {{ {first} }} else {{ {accumulate} }}"]

    # -- driver
    def source(self) -> str:
        cfg, lay = self.cfg, self.lay
        tails = [r for r in (4, 2, 1) if r < cfg.mr]
        widths = sorted({cfg.nv, 1})
        tiles = [line for mr in [cfg.mr, *tails] for nv in widths for line in self.tile(mr, nv)]
        panels = [line for nv in widths for line in self.panel(nv, tails)]
        kc = f"{self.kc}" if self.kc else "K"
        args = f"{kc}{self._scalar_args()}, {lay.a}, {lay.b}, {lay.c}{', panel' if cfg.pack else ''}"
        body = [f"{self.task.signature.strip().rstrip(';')}\n{{",
                f"    if ({lay.m} <= 0 || {lay.n} <= 0)", "        return;",
                f"    const size_t M = (size_t){lay.m}, N = (size_t){lay.n};",
                f"    const size_t K = {lay.k} > 0 ? (size_t){lay.k} : 0;",
                # vsetvl, not vsetvlmax: never more lanes than the panel buffer was sized for
                f"    const size_t vlmax = __riscv_vsetvl_e32m{cfg.lmul}({self.vlmax});",
                *([f"    float panel[{self.kc * self.nr}];"] if cfg.pack else []),
                "    size_t j = 0;",
                f"    for (; j + {cfg.nv} * vlmax <= N; j += {cfg.nv} * vlmax)",
                f"        panel_{cfg.nv}(M, N, K, j, vlmax, {args});",
                "    while (j < N) {",
                f"        const size_t vl = __riscv_vsetvl_e32m{cfg.lmul}(N - j);",
                f"        panel_1(M, N, K, j, vl, {args});",
                "        j += vl;", "    }", "}", ""]  # fmt: skip
        return "\n".join([HEADER, *tiles, *panels, *body])

    def _scalar_args(self) -> str:
        return "".join(f", {x}" for x in (self.lay.alpha, self.lay.beta) if x)

    def panel(self, nv: int, tails: list[int]) -> list[str]:
        """All rows against columns j .. j + nv*vl, block by block along k."""
        cfg = self.cfg
        params = ["size_t M", "size_t N", "size_t K", "size_t j", "size_t vl", "size_t kcap"]
        params += [f"float {x}" for x in (self.lay.alpha, self.lay.beta) if x]
        params += ["const float *A", "const float *B", "float *C"] + (["float *panel"] if cfg.pack else [])
        sargs = "".join(f", {x}" for x in (self.lay.alpha, self.lay.beta) if x)
        out = [f"static void panel_{nv}({', '.join(params)})", "{",
               "    for (size_t p0 = 0; p0 < K || p0 == 0; p0 += kcap) {",
               "        const size_t kk = K - p0 < kcap ? K - p0 : kcap;",
               "        const int first = p0 == 0;"]  # fmt: skip
        if cfg.pack:
            out += self._pack(nv, "        ")
            b, ldb = "panel", f"{nv} * vl"
        elif self.lay.trans_b:
            b, ldb = "B + j * K + p0", "K"
        else:
            b, ldb = "B + p0 * N + j", "N"
        out.append("        size_t i = 0;")
        for mr in [cfg.mr, *tails]:
            loop = "for" if mr == cfg.mr else "if"
            cond = f"i + {mr} <= M"
            step = f"; i += {mr})" if loop == "for" else ")"
            head = f"        for (; {cond}{step}" if loop == "for" else f"        if ({cond}) {{"
            tile = self.tile_name(mr, nv)
            call = f"{tile}(A + i * K + p0, K, {b}, {ldb}, C + i * N + j, N, kk, vl, first{sargs});"
            if loop == "for":
                out += [head, f"            {call}"]
            else:
                out += [head, f"            {call}", f"            i += {mr};", "        }"]
        out += ["        if (K == 0)", "            break;", "    }", "}", ""]
        return out

    def _pack(self, nv: int, ind: str) -> list[str]:
        """Copy rows p0 .. p0+kk of the B panel (nv*vl wide) into `panel`, row-major, contiguous."""
        s, t = self.s, self.t
        lines = [f"{ind}for (size_t p = 0; p < kk; p++) {{"]
        for v in range(nv):
            if self.lay.trans_b:
                src = f"B + (j + {v} * vl) * K + p0 + p"
                load = f"__riscv_vlse32_v_{s}({src}, (ptrdiff_t)(K * sizeof(float)), vl)"
            else:
                load = f"__riscv_vle32_v_{s}(B + (p0 + p) * N + j + {v} * vl, vl)"
            lines.append(f"{ind}    const {t} r{v} = {load};")
            lines.append(f"{ind}    __riscv_vse32_v_{s}(panel + p * {nv} * vl + {v} * vl, r{v}, vl);")
        lines.append(f"{ind}}}")
        return lines


# ----------------------------------------------------------------------------------------- family


def _registers(lmul: int, mr: int, nv: int) -> int:
    return (mr * nv + nv) * lmul


def default_config(lay: GemmLayout, target: TargetProfile) -> GemmConfig:
    """The best tile of a sweep on the modeled X60 (scripts/bench_offline_space.py), fitted to the timed size.

    One vector of the widest LMUL <= 4 that the timed N fills; 4 rows at m4 (8 at m2 or less), fewer
    when M is smaller or the registers run out; k unrolled by 4 (loop overhead is what is left on an
    in-order core once the FMA pipe is fed).
    """
    big_m, big_n, _ = lay.bench
    lmul = max([lm for lm in (1, 2, 4) if vlmax(target, lm) <= big_n] or [1])
    nv = 1
    cap = 4 if lmul >= 4 else 8
    mr = max(r for r in MRS if r <= max(1, min(big_m, cap)) and _registers(lmul, r, nv) <= VECTOR_REGISTERS)
    return GemmConfig(lmul=lmul, mr=mr, nv=nv, unroll=4, pack=lay.trans_b, kc=0)


@register
class GemmFamily:
    name = "rvv_gemm"
    priority = 10

    def applies(self, task: KernelTask) -> bool:
        return task.operator in (Operator.GEMM, Operator.OTHER) and layout(task) is not None

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        lay = layout(task)
        d = default_config(lay, target) if lay else GemmConfig(2, 4, 2, 1, False, 0)
        return [
            Knob(name="lmul", values=LMULS, technique=Technique.VECTOR_LENGTH, default=d.lmul),
            Knob(name="mr", values=MRS, technique=Technique.REGISTER_BLOCKING, default=d.mr),
            Knob(name="nv", values=[1, 2, 3, 4], technique=Technique.REGISTER_BLOCKING, default=d.nv),
            Knob(name="unroll", values=[1, 2, 4], technique=Technique.UNROLL, default=d.unroll),
            Knob(name="pack", values=[0, 1], technique=Technique.PACKING, default=int(d.pack)),
            Knob(name="kc", values=[0, 64, 128, 256], technique=Technique.MEMORY_ACCESS, default=d.kc),
        ]

    def valid(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> bool:
        return _registers(int(knobs["lmul"]), int(knobs["mr"]), int(knobs["nv"])) <= VECTOR_REGISTERS

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        kn = self.knobs(task, target)
        values = knob_values(kn, knobs)
        lay = layout(task)
        if lay is None:
            raise ValueError(f"{task.name}: not a GEMM layout this family implements")
        cfg = GemmConfig(
            lmul=int(values["lmul"]),
            mr=int(values["mr"]),
            nv=int(values["nv"]),
            unroll=int(values["unroll"]),
            pack=bool(values["pack"]),
            kc=int(values["kc"]),
        )
        code = _Gen(task, lay, cfg, target).source()
        what = f"RVV GEMM {'NT' if lay.trans_b else 'NN'} {cfg.mr}x{cfg.nv}xVLMAX(m{cfg.lmul}) micro-kernel"
        return variant(self.name, kn, values, code, what)
