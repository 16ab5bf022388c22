"""Modeled vs published: build a calibration candidate, check it, model it, and score the model.

    from evaluator.costmodel.calibration import load, reproduced, model_figure
    fig = reproduced()[0]
    model_figure(fig)            # modeled cycles per call of fig's implementation at fig.n on fig's target

The scoring functions (`error_factor`, `summary`, `winners`, `speedups`) take (figure, modeled cycles) pairs
and are what scripts/bench_fidelity.py prints (docs/COSTMODEL.md, "Fidelity against published silicon").
Results are cached per (binary hash, n, target, cost-model fingerprint): a re-run after a model change
re-prices everything, a re-run without one is a file read.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import statistics
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

from core.errors import EokError, Unavailable
from evaluator.costmodel.calibration import HERE, TASKS, Figure, catalog

CLANG = "clang-22"
QEMU = "qemu-riscv64"
CFLAGS = ["--target=riscv64-linux-gnu", "-mcpu=spacemit-x60", "-O3", "-static", "-no-pie", "-fuse-ld=lld",
          "-Wno-unused-command-line-argument"]  # fmt: skip
COSTMODEL = HERE.parent


def task_dir(kernel: str) -> Path:
    return TASKS / f"rb_{kernel.lower()}"


def candidate_path(kernel: str, impl: str) -> Path:
    return task_dir(kernel) / "candidates" / f"{impl}.c"


def model_fingerprint() -> str:
    """Changes with the cost model's code, memory simulator or target data (the cache key's model version)."""
    files = [
        *sorted(COSTMODEL.glob("*.py")),
        COSTMODEL / "memsim.c",
        *sorted((COSTMODEL.parent / "targets").glob("*.toml")),
    ]
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]


def default_cache() -> Path:
    """$EOK_HOME/cache/fidelity (the project's settings decide the home, var/ by default)."""
    from core.settings import get_settings

    return get_settings().home / "cache" / "fidelity"


def build(kernel: str, impl: str, cache: Path, source: Path | None = None, defines: tuple[str, ...] = ()) -> Path:
    """The driver + reference + candidate binary for (kernel, impl); rebuilt only when a source changes.

    `source` replaces the candidate file (a new implementation tried before it is added). The driver with the
    kernel's reference is compiled once per kernel and linked with each candidate's object. `defines` selects
    a variant of the driver (("EOK_TIMED",): the board-timed build of eok calibrate).
    """
    candidate = source or candidate_path(kernel, impl)
    if not candidate.exists():
        raise EokError(f"no implementation {impl!r} of {kernel}: {candidate} is missing")
    reference = task_dir(kernel) / "reference.c"
    flags = [f"-DRB_{kernel.upper()}", f'-DREFERENCE="{reference}"']
    driver = _compile(
        HERE / "driver.c", [reference], [*flags, *(f"-D{d}" for d in defines)], cache / "obj" / f"driver-{kernel}"
    )
    obj = _compile(candidate, [], flags, cache / "obj" / f"{kernel}-{impl}")
    out = cache / "bin" / f"{kernel}-{impl}-{_digest([driver, obj])}"
    if not out.exists():
        _clang([*CFLAGS, str(driver), str(obj)], out, candidate)
    return out


def _digest(paths: list[Path], extra: str = "") -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in paths) + extra.encode()).hexdigest()[:16]


def _compile(source: Path, deps: list[Path], defines: list[str], stem: Path) -> Path:
    out = stem.with_name(f"{stem.name}-{_digest([source, *deps], ' '.join(CFLAGS + defines))}.o")
    if not out.exists():
        _clang([*CFLAGS, *defines, "-c", str(source)], out, source)
    return out


def _clang(args: list[str], out: Path, source: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{secrets.token_hex(6)}.tmp")  # threads and processes may build the same file
    try:
        done = subprocess.run([CLANG, *args, "-o", str(tmp)], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise Unavailable(f"{CLANG} not found", hint="apt-get install clang-22 lld-22") from None
    if done.returncode != 0:
        raise EokError(f"{source} does not compile: {done.stderr.strip().splitlines()[0]}")
    os.replace(tmp, out)


def qemu_argv(binary: Path, target: str, n: int) -> list[str]:
    from evaluator.targets import load_target

    return [QEMU, "-cpu", load_target(target).qemu_cpu, str(binary), str(n)]


def check(binary: Path, target: str, n: int) -> None:
    """Run once without the model: the candidate must match the reference at n."""
    done = subprocess.run(qemu_argv(binary, target, n), capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or done.stdout.strip() != "ok":
        raise EokError(f"{binary.name} is wrong at n={n} under qemu: {(done.stdout + done.stderr).strip()[:200]}")


class Results:
    """Modeled cycles per (binary, n, target, model fingerprint), in one JSON file shared by concurrent runs."""

    def __init__(self, cache: Path) -> None:
        self.path = cache / "results.json"
        self.data: dict[str, dict] = self._read()

    def _read(self) -> dict[str, dict]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def save(self) -> None:
        """Merge into what is on disk (another run may have added entries) and replace the file atomically."""
        self.data = {**self._read(), **self.data}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=self.path.parent, delete=False) as f:
            json.dump(self.data, f, indent=0, sort_keys=True)
        os.replace(f.name, self.path)


def binary_hash(binary: Path) -> str:
    return hashlib.sha256(binary.read_bytes()).hexdigest()[:16]


def model_figure(fig: Figure, cache: Path | None = None, results: Results | None = None) -> float:
    """Modeled cycles per call of the figure's implementation at its n on its target (checked once)."""
    from evaluator.costmodel import model_kernel_cycles
    from evaluator.targets import load_target

    if fig.impl is None:
        raise EokError(f"{fig.key}: no implementation of this series in {task_dir(fig.kernel)}/candidates")
    cache = (cache or default_cache()).resolve()
    results = results or Results(cache)
    binary = build(fig.kernel, fig.impl, cache)
    target = load_target(fig.target)
    key = f"{binary_hash(binary)}/{fig.n}/{fig.target}/{model_fingerprint()}"
    if key in results.data:
        return float(results.data[key]["cycles"])
    check_key = f"{binary_hash(binary)}/{fig.n}/{target.qemu_cpu}/checked"
    if check_key not in results.data:
        check(binary, fig.target, fig.n)
        results.data[check_key] = {"ok": True}
    timing = model_kernel_cycles(binary, qemu_argv(binary, fig.target, fig.n), cache / "model", mcpu=target.cost_model,
                                 timeout_s=1800.0, regions=1)  # fmt: skip
    results.data[key] = {"cycles": timing.cycles, "bound": timing.bound, "model": timing.model}
    results.save()
    return timing.cycles


# ------------------------------------------------------------------------------------------ scoring


def error_factor(modeled: float, published: float) -> float:
    """max(m/p, p/m): 1.0 is exact, 2.0 is off by a factor of two either way."""
    return max(modeled / published, published / modeled)


def family(kind: str | None) -> str:
    """Scalar and SWAR code run on the scalar pipeline: they are scored together as `scalar`."""
    return "vector" if kind == "vector" else "scalar"


def summary(pairs: list[tuple[Figure, float]]) -> dict:
    """Median and worst error factor, counts within 1.5x and 2x, geometric mean of modeled/published per family."""
    if not pairs:
        return {"count": 0}
    errors = [error_factor(m, f.cycles) for f, m in pairs]
    worst_fig, worst_m = max(pairs, key=lambda p: error_factor(p[1], p[0].cycles))
    out = {
        "count": len(pairs),
        "median_error": statistics.median(errors),
        "worst_error": max(errors),
        "worst": {"figure": worst_fig.key, "modeled_over_published": worst_m / worst_fig.cycles},
        "within_1.5x": sum(e <= 1.5 for e in errors),
        "within_2x": sum(e <= 2.0 for e in errors),
    }
    for fam in ("scalar", "vector"):
        ratios = [m / f.cycles for f, m in pairs if family(f.kind) == fam]
        out[f"geomean_{fam}"] = math.exp(statistics.fmean(math.log(r) for r in ratios)) if ratios else None
    return out


def winners(pairs: list[tuple[Figure, float]]) -> list[dict]:
    """The fastest implementation per (core, kernel, n), modeled and published."""
    groups: dict[tuple, list[tuple[Figure, float]]] = defaultdict(list)
    for f, m in pairs:
        groups[(f.core, f.kernel, f.n)].append((f, m))
    out = []
    for (core, kernel, n), group in sorted(groups.items()):
        published = min(group, key=lambda p: p[0].cycles)[0].impl
        modeled = min(group, key=lambda p: p[1])[0].impl
        out.append({"core": core, "kernel": kernel, "n": n, "published": published, "modeled": modeled,
                    "same": published == modeled})  # fmt: skip
    return out


def speedups(pairs: list[tuple[Figure, float]]) -> list[dict]:
    """Best vector over the scalar loop per (core, kernel): each side's own best vector implementation, the
    geometric mean over the kernel's sizes, modeled vs published."""
    groups: dict[tuple, dict[int, list[tuple[Figure, float]]]] = defaultdict(lambda: defaultdict(list))
    for f, m in pairs:
        groups[(f.core, f.kernel)][f.n].append((f, m))
    out = []
    for (core, kernel), by_n in sorted(groups.items()):
        pub, mod = [], []
        for group in by_n.values():
            scalar = [p for p in group if p[0].kind == "scalar"]
            vector = [p for p in group if p[0].kind == "vector"]
            if not scalar or not vector:
                continue
            pub.append(scalar[0][0].cycles / min(f.cycles for f, _ in vector))
            mod.append(scalar[0][1] / min(m for _, m in vector))
        if pub:
            p, m = _geomean(pub), _geomean(mod)
            out.append({"core": core, "kernel": kernel, "published": p, "modeled": m, "ratio": m / p})
    return out


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def report(pairs: list[tuple[Figure, float]]) -> dict:
    """Everything bench_fidelity prints, per set (fit, test, test2) and per kernel."""
    out: dict = {"split": catalog()["split"], "sets": {}}
    for name in sorted({f.set for f, _ in pairs}):
        chosen = [p for p in pairs if p[0].set == name]
        kernels = sorted({f.kernel for f, _ in chosen})
        out["sets"][name] = {
            "overall": summary(chosen),
            "kernels": {k: summary([p for p in chosen if p[0].kernel == k]) for k in kernels},
            "winners": winners(chosen),
            "speedups": speedups(chosen),
        }
    return out


def error_bars(pairs: list[tuple[Figure, float]]) -> dict:
    """The error bars users see beside modeled speedups (confidence.py), per EoK target: how far modeled
    speedups of vector over scalar code were from the published ones, as factors max(m/p, p/m) over kernels,
    on the test set (kernels never fitted on) of each core; a core with fewer than 3 test kernels adds its
    second test set, then its fit set, and says so in `basis`."""
    cores = catalog()["cores"]
    out: dict = {"generated_by": "python scripts/bench_fidelity.py --core all --set all --write-summary", "targets": {}}
    for core, spec in cores.items():
        if core == catalog()["split"]["second_test_set"]:
            continue
        used, rows = [], []
        for sets in (("test",), ("test2",), ("fit",)):
            chosen = [p for p in pairs if p[0].core in (core, f"{core}-2025") and p[0].set in sets]
            rows += speedups(chosen)
            used += list(sets) if speedups(chosen) else []
            if len(rows) >= 3:
                break
        if not rows:
            continue
        factors = sorted(max(r["ratio"], 1 / r["ratio"]) for r in rows)
        out["targets"][spec["target"]] = {
            "speedup_median": round(statistics.median(factors), 3),
            "speedup_worst": round(factors[-1], 3),
            "kernels": len(rows),
            "basis": f"rvv-bench, {spec['what']}: {len(rows)} kernels ({'+'.join(used)} set)",
        }
    return out
