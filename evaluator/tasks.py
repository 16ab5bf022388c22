"""Kernel tasks: load and validate task directories (docs/TASKS.md) into `KernelTask` records.

A task is data: `task.toml` + `reference.c`. Everything the harness generator needs (typed parameters,
element counts per size, generators) is checked here, so a malformed spec fails at load time with the
file and the field named, never later as a confusing compiler or harness error.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import logging
import math
import os
import re
import time
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AllowInfNan, BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.errors import EokError, InvalidInput, NotFound
from core.settings import Settings, get_settings
from knowledge.taxonomy import Operator

log = logging.getLogger(__name__)

SUITE_DIR = Path(__file__).resolve().parent / "suite"
TASK_FILE = "task.toml"
REFERENCE_FILE = "reference.c"
NAME_RE = re.compile(r"^[a-z0-9_]+$")
MAX_BENCH_BYTES = 512 << 20  # all buffers of the bench size together; three copies are kept by the harness


class Category(StrEnum):
    BLAS = "blas"
    QUANTIZED = "quantized"
    ACTIVATION = "activation"
    NORMALIZATION = "normalization"
    NN = "nn"
    ATTENTION = "attention"
    POSTPROCESS = "postprocess"
    GENERAL = "general"


class CType(BaseModel):
    """A scalar C type the harness knows how to fill, poison and compare."""

    model_config = ConfigDict(frozen=True)
    name: str
    size: int
    kind: Literal["float", "int", "uint"]
    code: str  # the harness's type tag, e.g. F32, I8


C_TYPES: dict[str, CType] = {
    t.name: t
    for t in (
        CType(name="float", size=4, kind="float", code="F32"),
        CType(name="double", size=8, kind="float", code="F64"),
        CType(name="int", size=4, kind="int", code="I32"),
        CType(name="int8_t", size=1, kind="int", code="I8"),
        CType(name="uint8_t", size=1, kind="uint", code="U8"),
        CType(name="int16_t", size=2, kind="int", code="I16"),
        CType(name="uint16_t", size=2, kind="uint", code="U16"),
        CType(name="int32_t", size=4, kind="int", code="I32"),
        CType(name="uint32_t", size=4, kind="uint", code="U32"),
        CType(name="int64_t", size=8, kind="int", code="I64"),
        CType(name="uint64_t", size=8, kind="uint", code="U64"),
        CType(name="size_t", size=8, kind="uint", code="U64"),
    )
}
RETURN_TYPES = {"void", "float", "double", "int", "int32_t", "int64_t", "uint32_t", "uint64_t", "size_t"}

Gen = Literal["uniform", "normal", "positive", "int", "sorted", "fp16", "q8_0", "q4_0", "boxes", "zeros", "ties"]
# Bytes per block of the ggml block formats (fp16 scale + 32 int8 / 16 bytes of nibbles); elements per
# block of the `ties` generator (floats that hit exact rounding ties when quantized to q8_0).
BLOCK_BYTES = {"q8_0": 34, "q4_0": 18, "ties": 32}


class Tolerance(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    rtol: float = Field(default=1e-5, ge=0)
    atol: float = Field(default=1e-6, ge=0)
    # Bound on ||got - want||_2 / ||want||_2 per output. Default: see `norm_bound`.
    norm: float | None = Field(default=None, gt=0)
    # Where the reference gives exactly 0, the candidate must too (docs/TASKS.md, "Full-range contracts");
    # +-inf and NaN are met only by themselves in every task.
    exact_special: bool = False

    @property
    def norm_bound(self) -> float:
        # Loose enough for reassociated float sums, tight enough that an output which is "within atol"
        # everywhere only because every expected value is tiny (all zeros for softmax) still fails.
        return self.norm if self.norm is not None else min(0.05, max(100 * self.rtol, 1e-4))


class ArgSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # nan/inf in range/value/scale: rejected
    kind: Literal["scalar", "in", "out", "inout"]
    count: str | None = None
    gen: Gen | None = None
    range: tuple[float, float] | None = None
    scale: float | None = None
    value: float | None = None  # a fixed scalar value (eps, alpha): no generator
    # Scalars: listed size i (not the bench size) takes values[i % len] (alpha = 0, beta = 0 at some sizes:
    # BLAS's quick returns); the bench size and drawn sizes use the generator or `value`.
    values: list[float] | None = Field(default=None, min_length=1)
    valid: str | None = None  # outputs: how many elements to compare, C expression using `ret`
    compare: Literal["default", "fp16"] = "default"  # fp16: uint16_t outputs compared as half floats
    # Numerics the operator must honour (docs/TASKS.md, "Special values"), float inputs only:
    # size i (not the bench size) multiplies its generated values by scales[i % len(scales)] ...
    scales: list[float] | None = Field(default=None, min_length=1)
    # ... and every `special_every`-th element (at every size) is replaced by specials[k % len(specials)],
    specials: list[Annotated[float, AllowInfNan(True)]] | None = Field(default=None, min_length=1)  # the point
    special_every: int | None = Field(default=None, ge=2)
    # ... or each element, with this probability, by a special drawn at random: positions and values come
    # from the call's secret seed, so a kernel cannot treat only some known positions correctly.
    special_fraction: float | None = Field(default=None, gt=0, le=0.5)

    @field_validator("range")
    @classmethod
    def _ordered(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and v[0] > v[1]:
            raise ValueError(f"range low {v[0]} is above high {v[1]}")
        return v


LIBRARY_NAMES = ("openblas", "ggml", "onnxruntime-mlas")  # evaluator.upstream.built.LIBRARIES


class LibraryRoutine(BaseModel):
    """The routine of a shipped library this task corresponds to (docs/TASKS.md, "The library as a baseline").

    Trusted text, like reference.c: `header` declares the library's routine (its real prototype: the
    compile sees no library headers), `adapter` is the body of a function with the task's signature that
    calls it, e.g. `return cblas_sdot(n, x, 1, y, 1);`. Linked only into the trusted binary.
    """

    model_config = ConfigDict(extra="forbid")
    name: Literal["openblas", "ggml", "onnxruntime-mlas"]
    routine: str = Field(pattern=r"^[A-Za-z_]\w*$")  # the library's own name, e.g. cblas_sdot
    header: str = Field(min_length=1)
    adapter: str = Field(min_length=1)


class TaskSpec(BaseModel):
    """task.toml as written; cross-field rules live in `_check`."""

    model_config = ConfigDict(extra="forbid")
    name: str
    category: Category
    operator: Operator
    dtype: str
    description: str
    signature: str
    tolerance: Tolerance = Tolerance()
    flops: str | None = None
    bytes: str | None = None  # optional: bytes moved per call, for roofline-style reports
    sizes: list[dict[str, int | bool]] = Field(min_length=1)
    args: dict[str, ArgSpec] = {}
    # Why a speedup over this task's baselines flatters (docs/TASKS.md, "Two baselines"), shown beside it.
    baseline_note: str | None = Field(None, min_length=1, max_length=300)
    library: list[LibraryRoutine] = []  # [[library]] tables: one per library that has this routine
    # Sizes the evaluator draws itself (the check's unlisted size, the held-out gate) vary the dimensions;
    # `modes` (increments, transposes) take their values together from one listed size, and `derived`
    # (leading dimensions) are computed from the others, so a drawn size is always a valid call.
    modes: list[str] = []
    derived: dict[str, str] = {}


class Param(BaseModel):
    """One parameter of the kernel's C signature."""

    model_config = ConfigDict(frozen=True)
    name: str
    ctype: str
    pointer: bool
    const: bool = False
    role: Literal["size", "scalar", "buffer"] = "buffer"

    @property
    def type(self) -> CType:
        return C_TYPES[self.ctype]

    @property
    def c_decl(self) -> str:
        """The parameter as a plain C declaration (no restrict), for harness locals."""
        star = " *" if self.pointer else " "
        return f"{'const ' if self.const else ''}{self.ctype}{star}{self.name}"


class KernelTask(BaseModel):
    """A validated task: what the harness generator, the evaluator and the agent read."""

    name: str
    category: Category
    operator: Operator
    dtype: str
    description: str
    signature: str
    function_name: str
    return_type: str
    params: list[Param]
    tolerance: Tolerance
    flops: str | None
    bytes: str | None = None
    sizes: list[dict[str, int]]
    bench_index: int
    args: dict[str, ArgSpec]
    counts: list[dict[str, int]]  # per size: elements of each pointer argument
    directory: Path
    reference_code: str
    notes: str = ""
    baseline_note: str | None = None
    library: list[LibraryRoutine] = []
    modes: list[str] = []
    derived: dict[str, str] = {}

    @property
    def size_params(self) -> list[str]:
        return [p.name for p in self.params if p.role == "size"]

    @property
    def buffers(self) -> list[Param]:
        return [p for p in self.params if p.role == "buffer"]

    @property
    def scalars(self) -> list[Param]:
        return [p for p in self.params if p.role == "scalar"]

    @property
    def bench_size(self) -> dict[str, int]:
        return self.sizes[self.bench_index]

    def flops_at(self, index: int | None = None) -> float | None:
        if not self.flops:
            return None
        return _eval_expr(self.flops, self.sizes[self.bench_index if index is None else index], real=True)

    def bytes_at(self, index: int | None = None) -> float | None:
        if not self.bytes:
            return None
        return _eval_expr(self.bytes, self.sizes[self.bench_index if index is None else index], real=True)

    @property
    def content_hash(self) -> str:
        """Changes whenever anything that affects results changes: spec text or reference code."""
        spec = (self.directory / TASK_FILE).read_bytes() if (self.directory / TASK_FILE).exists() else b""
        return hashlib.sha256(spec + b"\0" + self.reference_code.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------- loading


def load_task(name_or_path: str | Path, settings: Settings | None = None) -> KernelTask:
    """Load a task by name (bundled suite, then settings.task_dirs) or by path to its dir or task.toml."""
    path = Path(name_or_path)
    if isinstance(name_or_path, Path) or "/" in str(name_or_path) or path.suffix == ".toml":
        directory = path.parent if path.name == TASK_FILE or path.suffix == ".toml" else path
        if not (directory / TASK_FILE).is_file():
            raise NotFound(f"no {TASK_FILE} in {directory}", "point at a task directory (docs/TASKS.md)")
        return _load_dir(directory)
    # A bare name is a task name: the suite and EOK_TASK_DIRS win over a folder of that name in the
    # current directory (which would otherwise change what `sdot` means depending on where one stands).
    for directory in _task_dirs(settings or get_settings()):
        if directory.name == str(name_or_path):
            if (path / TASK_FILE).is_file() and path.resolve() != directory.resolve():
                log.warning("./%s also holds a task; using %s (write ./%s to use the folder)", path, directory, path)
            return _load_dir(directory)
    if (path / TASK_FILE).is_file():  # no task of that name: a folder here is what was meant
        return _load_dir(path)
    known = ", ".join(sorted(d.name for d in _task_dirs(settings or get_settings())))
    raise NotFound(f"unknown task {name_or_path!r}", f"known tasks: {known}" if known else "add EOK_TASK_DIRS")


def list_tasks(settings: Settings | None = None) -> list[KernelTask]:
    """Every task: the bundled suite first, then each of settings.task_dirs; the first broken one raises."""
    tasks, broken = scan_tasks(settings)
    if broken:
        raise InvalidInput(broken[0][1], "fix that task directory (docs/TASKS.md), or remove it")
    return tasks


def scan_tasks(settings: Settings | None = None) -> tuple[list[KernelTask], list[tuple[Path, str]]]:
    """Every loadable task, and (directory, one-line reason) for each that is broken; names must be unique."""
    tasks: dict[str, KernelTask] = {}
    broken: list[tuple[Path, str]] = []
    for directory in _task_dirs(settings or get_settings()):
        try:
            task = _load_dir(directory)
        except EokError as e:
            broken.append((Path(_shown(directory)), e.message))
            continue
        if task.name in tasks:
            broken.append(
                (
                    directory,
                    f"{directory / TASK_FILE}: field 'name': task {task.name!r} already defined in "
                    f"{tasks[task.name].directory}",
                )
            )
            continue
        tasks[task.name] = task
    return list(tasks.values()), broken


def task_summary(task: KernelTask) -> dict[str, Any]:
    """What `eok tasks list` shows of a task (its --json row)."""
    return {
        "name": task.name,
        "category": task.category.value,
        "operator": task.operator.value,
        "dtype": task.dtype,
        "signature": task.signature,
        "bench_size": task.bench_size,
        "sizes": len(task.sizes),
        "directory": str(task.directory),
    }


SUMMARY_CACHE = "task-summaries.json"


def scan_task_summaries(settings: Settings | None = None) -> tuple[list[dict[str, Any]], list[tuple[Path, str]]]:
    """scan_tasks' answer as summaries, each task directory parsed again only when one of its files (or this
    module) changed since the last scan: `tasks list` answers at once (issue 24: parsing and checking ~60
    task.toml files was a sixth of its 0.3 s budget). The cache lives under EOK_HOME and is only a speed-up:
    unreadable or unwritable, it is ignored. Broken directories are never cached."""
    settings = settings or get_settings()
    path = settings.home / "cache" / SUMMARY_CACHE
    code = _stamp(Path(__file__))
    cached = _read_summary_cache(path, code)
    fresh: dict[str, Any] = {}
    names: dict[str, str] = {}
    summaries: list[dict[str, Any]] = []
    broken: list[tuple[Path, str]] = []
    for directory in _task_dirs(settings):
        key, stamp = str(directory), _dir_stamp(directory)
        entry = cached.get(key)
        if entry is None or entry.get("stamp") != stamp:
            try:
                entry = {"stamp": stamp, "summary": task_summary(_load_dir(directory))}
            except EokError as e:
                broken.append((Path(_shown(directory)), e.message))
                continue
        summary = entry["summary"]
        if summary["name"] in names:
            broken.append(
                (
                    directory,
                    f"{directory / TASK_FILE}: field 'name': task {summary['name']!r} already defined in "
                    f"{names[summary['name']]}",
                )
            )
            continue
        names[summary["name"]] = summary["directory"]
        if not _racy(stamp):
            fresh[key] = entry
        summaries.append(summary)
    if fresh != cached:
        _write_summary_cache(path, code, fresh)
    return summaries, broken


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def _dir_stamp(directory: Path) -> list[Any]:
    """Every file of a task directory with its change time and size: an edit, a new or a removed file shows."""
    try:
        return sorted([e.name, *_stamp(Path(e.path))] for e in os.scandir(directory) if e.is_file())
    except OSError:
        return []


def _racy(stamp: list[Any]) -> bool:
    """A file changed in the last 2 s may change again within the file system's timestamp tick with the same
    size (git's "racy" case): such a directory is parsed again next time rather than cached."""
    newest = max((entry[1] for entry in stamp), default=0)
    return newest > time.time_ns() - 2_000_000_000


def _read_summary_cache(path: Path, code: list[int]) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("code") != code or not isinstance(data.get("dirs"), dict):
        return {}
    return data["dirs"]


def _write_summary_cache(path: Path, code: list[int], dirs: dict[str, Any]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"code": code, "dirs": dirs}))
        tmp.replace(path)  # readers see the old file or the new one, never half of one
    except OSError:
        tmp.unlink(missing_ok=True)


def _task_dirs(settings: Settings) -> list[Path]:
    """Directories holding a task.toml: suite children, then each user dir (a task or a dir of tasks)."""
    found: list[Path] = []
    for root in [SUITE_DIR, *settings.task_dirs]:
        root = Path(root).expanduser()
        if (root / TASK_FILE).is_file():
            found.append(root)
        elif root.is_dir():
            found.extend(sorted(d for d in root.iterdir() if (d / TASK_FILE).is_file()))
        elif root != SUITE_DIR:
            raise NotFound(f"task directory {root} does not exist", "fix EOK_TASK_DIRS")
    return found


def read_text_file(path: Path, fix: str = "save it as UTF-8 text") -> str:
    """The file's text, or InvalidInput naming the file: any bytes in an input file give one clear line."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InvalidInput(f"{_shown(path)}: cannot be read ({e.strerror or e})", fix) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInput(
            f"{_shown(path)}: not UTF-8 text (byte {data[e.start]:#04x} at offset {e.start})", fix
        ) from None


def _shown(path: Path) -> str:
    """A path as printable text, whatever bytes its name holds."""
    return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


def _load_dir(directory: Path) -> KernelTask:
    spec_path = directory / TASK_FILE
    try:
        raw = tomllib.loads(read_text_file(spec_path))
    except tomllib.TOMLDecodeError as e:
        raise InvalidInput(f"{spec_path}: not valid TOML: {e}", "fix the syntax at the position given") from None
    try:
        spec = TaskSpec.model_validate(raw)
    except ValidationError as e:
        raise _spec_error(spec_path, e) from None
    ref_path = directory / REFERENCE_FILE
    if not ref_path.is_file():
        raise InvalidInput(f"{ref_path}: missing", "every task needs reference.c defining the kernel")
    notes_path = directory / "NOTES.md"
    try:
        return _check(spec, spec_path, directory, read_text_file(ref_path), notes_path)
    except _FieldError as e:
        raise InvalidInput(f"{spec_path}: field '{e.field}': {e.message}", e.hint) from None


def _spec_error(path: Path, e: ValidationError) -> InvalidInput:
    err = e.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "(top level)"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field (typo?)"
    elif err["type"] == "missing":
        msg = "required field is missing"
    more = f" (+{len(e.errors()) - 1} more)" if len(e.errors()) > 1 else ""
    return InvalidInput(f"{path}: field '{field}': {msg}{more}", "see docs/TASKS.md for the format")


class _FieldError(Exception):
    def __init__(self, field: str, message: str, hint: str = "see docs/TASKS.md for the format") -> None:
        super().__init__(message)
        self.field, self.message, self.hint = field, message, hint


# ------------------------------------------------------------------------------------- cross-field rules


def _check(spec: TaskSpec, spec_path: Path, directory: Path, reference: str, notes: Path) -> KernelTask:
    if not NAME_RE.match(spec.name):
        raise _FieldError("name", f"{spec.name!r} must match [a-z0-9_]+")
    if spec.name != directory.name:
        raise _FieldError("name", f"{spec.name!r} differs from the directory name {directory.name!r}")
    ret, fname, raw_params = parse_signature(spec.signature)
    sizes, bench = _check_sizes(spec)
    size_names = set(sizes[0])
    params = [_bind_param(p, spec, size_names) for p in raw_params]
    unknown = set(spec.args) - {p.name for p in params}
    if unknown:
        raise _FieldError(f"args.{sorted(unknown)[0]}", "not a parameter of the signature")
    unbound = size_names - {p.name for p in params if p.role == "size"}
    if unbound:
        raise _FieldError("sizes", f"{sorted(unbound)[0]!r} is not an integer parameter of the signature")
    counts = [_counts(spec, params, s, i) for i, s in enumerate(sizes)]
    _check_outputs(spec, params, ret, size_names)
    for expr_field in ("flops", "bytes"):
        expr = getattr(spec, expr_field)
        if expr:
            try:
                _eval_expr(expr, sizes[bench], real=True)
            except ValueError as e:
                raise _FieldError(expr_field, f"{expr!r}: {e}") from None
    bench_bytes = sum(counts[bench][p.name] * p.type.size for p in params if p.role == "buffer")
    if bench_bytes > MAX_BENCH_BYTES:
        raise _FieldError("sizes", f"bench size needs {bench_bytes >> 20} MB of buffers", "use a smaller bench size")
    _check_drawn(spec, sizes[0])
    names = [lib.name for lib in spec.library]
    if len(set(names)) != len(names):
        raise _FieldError("library", "one [[library]] table per library name")
    if not re.search(rf"\b{re.escape(fname)}\s*\(", reference):
        raise _FieldError("signature", f"{REFERENCE_FILE} does not define {fname}()")
    return KernelTask(
        name=spec.name,
        category=spec.category,
        operator=spec.operator,
        dtype=spec.dtype,
        description=spec.description,
        signature=spec.signature.strip().rstrip(";"),
        function_name=fname,
        return_type=ret,
        params=params,
        tolerance=spec.tolerance,
        flops=spec.flops,
        bytes=spec.bytes,
        sizes=sizes,
        bench_index=bench,
        args=spec.args,
        counts=counts,
        directory=directory.resolve(),
        reference_code=reference,
        notes=read_text_file(notes) if notes.is_file() else "",
        baseline_note=spec.baseline_note,
        library=spec.library,
        modes=spec.modes,
        derived=spec.derived,
    )


def _check_drawn(spec: TaskSpec, size: dict[str, int]) -> None:
    """`modes` and `derived` name size parameters; a derived expression reads the others."""
    for i, name in enumerate(spec.modes):
        if name not in size:
            raise _FieldError(f"modes.{i}", f"{name!r} is not bound in sizes")
    for name, expr in spec.derived.items():
        if name not in size or name in spec.modes:
            raise _FieldError(f"derived.{name}", f"{name!r} is not a size parameter (or is also a mode)")
        try:
            _eval_expr(expr, {k: v for k, v in size.items() if k != name and k not in spec.derived})
        except ValueError as e:
            raise _FieldError(f"derived.{name}", f"{expr!r}: {e}") from None


def _check_sizes(spec: TaskSpec) -> tuple[list[dict[str, int]], int]:
    sizes: list[dict[str, int]] = []
    bench: list[int] = []
    for i, entry in enumerate(spec.sizes):
        values: dict[str, int] = {}
        for key, v in entry.items():
            if key == "bench":
                if not isinstance(v, bool):
                    raise _FieldError(f"sizes.{i}.bench", "must be true or false")
                if v:
                    bench.append(i)
            elif isinstance(v, bool) or not isinstance(v, int):
                raise _FieldError(f"sizes.{i}.{key}", f"must be an integer, got {v!r}")
            else:
                values[key] = v
        if sizes and set(values) != set(sizes[0]):
            raise _FieldError(f"sizes.{i}", f"binds {sorted(values)}, but sizes.0 binds {sorted(sizes[0])}")
        sizes.append(values)
    if len(bench) != 1:
        raise _FieldError("sizes", f"exactly one size needs bench = true, found {len(bench)}")
    return sizes, bench[0]


def _bind_param(p: Param, spec: TaskSpec, size_names: set[str]) -> Param:
    arg = spec.args.get(p.name)
    where = f"args.{p.name}"
    if p.pointer:
        if arg is None or arg.kind == "scalar":
            raise _FieldError(where, f"pointer parameter {p.name!r} needs kind = in | out | inout and a count")
        if arg.count is None:
            raise _FieldError(f"{where}.count", "required for pointer arguments")
        if p.const and arg.kind != "in":
            raise _FieldError(f"{where}.kind", f"{p.name!r} is const, so its kind must be 'in'")
        if arg.kind == "out" and arg.gen not in (None, "zeros"):
            raise _FieldError(f"{where}.gen", "outputs are poisoned by the harness; use kind = inout to fill them")
        if arg.values is not None:
            raise _FieldError(f"{where}.values", "only scalars take values (inputs take scales and specials)")
        _check_gen(p, arg, where)
        return p.model_copy(update={"role": "buffer"})
    if p.name in size_names:
        if arg is not None:
            raise _FieldError(where, f"{p.name!r} is bound in sizes; remove [args.{p.name}]")
        if p.type.kind == "float":
            raise _FieldError("sizes", f"{p.name!r} is a {p.ctype}; sizes bind integer parameters only")
        return p.model_copy(update={"role": "size"})
    if arg is None:
        raise _FieldError(where, f"parameter {p.name!r} is neither bound in sizes nor declared as an arg")
    if arg.kind != "scalar":
        raise _FieldError(f"{where}.kind", f"{p.name!r} is passed by value, so its kind must be 'scalar'")
    if arg.values is not None and p.type.kind != "float":
        raise _FieldError(f"{where}.values", "only float scalars take values")
    if arg.value is None and arg.gen not in (None, "uniform", "int", "positive", "normal"):
        raise _FieldError(f"{where}.gen", "scalars take uniform | int | positive | normal, or a fixed value")
    return p.model_copy(update={"role": "scalar"})


def _check_gen(p: Param, arg: ArgSpec, where: str) -> None:
    gen = arg.gen or ("zeros" if arg.kind == "out" else "uniform")
    need = {"fp16": ("uint16_t",), "q8_0": ("uint8_t", "int8_t"), "q4_0": ("uint8_t", "int8_t")}
    need["boxes"] = need["ties"] = ("float", "double")
    if gen in need and p.ctype not in need[gen]:
        raise _FieldError(f"{where}.gen", f"{gen} needs a {' or '.join(need[gen])} pointer, not {p.ctype}")
    if arg.compare == "fp16" and p.ctype != "uint16_t":
        raise _FieldError(f"{where}.compare", "fp16 comparison needs a uint16_t pointer")
    _check_specials(p, arg, where)


def _check_specials(p: Param, arg: ArgSpec, where: str) -> None:
    for placement in ("special_every", "special_fraction"):
        if getattr(arg, placement) is not None and arg.specials is None:
            raise _FieldError(f"{where}.{placement}", "needs specials = [...]")
    if arg.scales is None and arg.specials is None:
        return
    field = "scales" if arg.scales is not None else "specials"
    if p.type.kind != "float" or arg.kind == "out":
        raise _FieldError(f"{where}.{field}", "only float inputs (kind = in | inout) take scales and specials")
    if arg.scales is not None and not all(math.isfinite(s) and s != 0 for s in arg.scales):
        raise _FieldError(f"{where}.scales", "scales must be finite and non-zero")
    if arg.specials is not None and (arg.special_every is None) == (arg.special_fraction is None):
        raise _FieldError(
            f"{where}.specials",
            "specials need one placement: special_every = N (every N-th element) or special_fraction = F "
            "(each element with probability F, at positions drawn from the secret seed)",
        )


def _counts(spec: TaskSpec, params: list[Param], size: dict[str, int], index: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in params:
        if p.role != "buffer":
            continue
        arg = spec.args[p.name]
        assert arg.count is not None
        try:
            n = int(_eval_expr(arg.count, size))
        except ValueError as e:
            raise _FieldError(f"args.{p.name}.count", f"{arg.count!r}: {e}") from None
        if n < 0:
            raise _FieldError(f"args.{p.name}.count", f"{arg.count!r} is {n} at sizes.{index}")
        gen = arg.gen or ""
        block = BLOCK_BYTES.get(gen, 4 if gen == "boxes" else 1)
        if n % block:
            raise _FieldError(
                f"args.{p.name}.count", f"{n} at sizes.{index} is not a multiple of {block} ({gen} layout)"
            )
        counts[p.name] = n
    return counts


def _check_outputs(spec: TaskSpec, params: list[Param], ret: str, size_names: set[str]) -> None:
    outputs = [p for p in params if p.role == "buffer" and spec.args[p.name].kind in ("out", "inout")]
    if not outputs and ret == "void":
        raise _FieldError("args", "the kernel has no output: no out/inout pointer and a void return")
    for p in params:
        arg = spec.args.get(p.name)
        if arg is None or arg.valid is None:
            continue
        if arg.kind not in ("out", "inout"):
            raise _FieldError(f"args.{p.name}.valid", "only outputs have a valid length")
        if "ret" in _names_in(arg.valid) and (ret == "void" or C_TYPES[ret].kind == "float"):
            raise _FieldError(f"args.{p.name}.valid", "uses ret, but the kernel does not return an integer")
        try:
            _eval_expr(arg.valid, dict.fromkeys(size_names | {"ret"}, 1))
        except ValueError as e:
            raise _FieldError(f"args.{p.name}.valid", f"{arg.valid!r}: {e}") from None


# ------------------------------------------------------------------------------------- C signatures

_SIG_RE = re.compile(
    r"^\s*(?P<ret>[A-Za-z_][\w ]*?)\s*(?P<star>\*?)\s*(?P<name>[A-Za-z_]\w*)\s*\((?P<params>.*)\)\s*;?\s*$"
)
_QUALIFIERS = {"const", "restrict", "__restrict", "__restrict__", "volatile"}


def parse_signature(signature: str) -> tuple[str, str, list[Param]]:
    """Split 'void f(int n, const float *x)' into return type, name and typed parameters."""
    m = _SIG_RE.match(signature.replace("\n", " "))
    if not m or m["star"]:
        raise _FieldError("signature", f"cannot parse {signature!r}", "write one C prototype: 'void f(int n, ...)'")
    ret = " ".join(m["ret"].split())
    if ret not in RETURN_TYPES:
        raise _FieldError("signature", f"return type {ret!r} is not one of {sorted(RETURN_TYPES)}")
    params: list[Param] = []
    body = m["params"].strip()
    for i, text in enumerate([] if body in ("", "void") else body.split(",")):
        params.append(_parse_param(text, i))
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise _FieldError("signature", "parameter names must be unique")
    return ret, m["name"], params


def _parse_param(text: str, index: int) -> Param:
    array = text.strip().endswith("[]")
    tokens = re.findall(r"[A-Za-z_]\w*|\*", text.replace("[]", ""))
    stars = tokens.count("*") + (1 if array else 0)
    words = [t for t in tokens if t != "*"]
    const_before_star = "const" in tokens[: tokens.index("*")] if "*" in tokens else "const" in tokens
    words = [w for w in words if w not in _QUALIFIERS]
    if len(words) != 2 or stars > 1:
        raise _FieldError("signature", f"parameter {index + 1} {text.strip()!r}: use 'type name' or 'type *name'")
    ctype, name = words
    if ctype not in C_TYPES:
        raise _FieldError("signature", f"parameter {name!r}: type {ctype!r} is not one of {sorted(C_TYPES)}")
    return Param(name=name, ctype=ctype, pointer=stars == 1, const=bool(stars) and const_before_star)


# ----------------------------------------------------------------------- C integer expressions (counts)

_C_ONLY = re.compile(r"\?|&&|\|\||//|!(?!=)")
_FUNCS = {"min": min, "max": max}


def _names_in(expr: str) -> set[str]:
    tree = _parse_expr(expr)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in _FUNCS}


def _eval_expr(expr: str, env: dict[str, int], real: bool = False) -> float:
    """Evaluate a count/flops expression as C would (integer division truncates) unless `real`.

    The same text is pasted into the generated harness, so the two must agree.
    """
    return _eval(_parse_expr(expr).body, env, real)


@functools.lru_cache(maxsize=4096)
def _parse_expr(expr: str) -> ast.Expression:
    """Parsed once per text: a suite load evaluates ~2,000 count and size expressions, most of them alike.
    The tree is only read (`_eval`), never changed, so sharing it is safe."""
    if not expr.strip():
        raise ValueError("empty expression")
    if _C_ONLY.search(expr):
        raise ValueError("only + - * / % << >> ( ) min() max() are supported")
    try:
        return ast.parse(expr.strip(), mode="eval")
    except SyntaxError as e:
        raise ValueError(f"not a valid expression ({e.msg})") from None


def _eval(node: ast.AST, env: dict[str, int], real: bool) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value if real else int(node.value)
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ValueError(f"unknown name {node.id!r} (allowed: {', '.join(sorted(env)) or 'none'})")
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _eval(node.operand, env, real)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        return _binop(node.op, _eval(node.left, env, real), _eval(node.right, env, real), real)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCS
        and len(node.args) == 2
        and not node.keywords
    ):
        return _FUNCS[node.func.id](*(_eval(a, env, real) for a in node.args))
    raise ValueError(f"unsupported syntax near {ast.unparse(node)!r}")


def _binop(op: ast.operator, a: Any, b: Any, real: bool) -> Any:
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, ast.Div | ast.Mod):
        if b == 0:
            raise ValueError("division by zero")
        if real and isinstance(op, ast.Div):
            return a / b
        q = abs(int(a)) // abs(int(b)) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncates toward zero
        return q if isinstance(op, ast.Div) else int(a) - q * int(b)
    if isinstance(op, ast.LShift | ast.RShift):
        return int(a) << int(b) if isinstance(op, ast.LShift) else int(a) >> int(b)
    raise ValueError(f"unsupported operator {type(op).__name__}")
