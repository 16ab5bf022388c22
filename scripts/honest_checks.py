"""Do honest kernels pass the static and object checks? (evaluator/safety.py, docs/TASKS.md "Candidates")

Every check that refuses a hostile candidate must let honest code through. This script compiles the
suite's references and the offline generator's variants (each family's default and every knob at its
first and last value, and the generic default) for k1-x60 and the host, the way the evaluator does
(its flags, the force-included prototype, -fno-jump-tables), and runs the source, preprocessed and
object checks on each. It prints every violation and the count; 0 violations is the goal.

    .venv/bin/python scripts/honest_checks.py [--targets k1-x60,host] [--defaults-only] [--jobs 2]

With --measure it also counts, at every 2-byte offset of the RISC-V objects' code, the words that
decode to instructions the object check does not search there (jalr x0 but ret, c.jr/c.jalr, c.ebreak,
any CSR): the numbers behind the choice of what is searched at every offset.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from agent.offline.generator import OfflineGenerator
from evaluator import harness, safety
from evaluator.targets import TargetProfile, load_target
from evaluator.tasks import KernelTask, list_tasks
from evaluator.toolchain import CLANG, COMMON_FLAGS, MAX_DATA_BYTES, check_cflags, target_flags


@dataclass
class Kernel:
    task: KernelTask
    target: TargetProfile
    label: str
    code: str
    cflags: list[str]


def honest_kernels(targets: list[str], defaults_only: bool) -> list[Kernel]:
    """The references and the offline generator's variants of every suite task, for each target."""
    out: list[Kernel] = []
    for key in targets:
        target = load_target(key)
        for task in list_tasks():
            out.append(Kernel(task, target, "reference", task.reference_code, []))
            gen = OfflineGenerator(task, target)
            for space in gen.spaces:
                for name, setting in _settings(space, defaults_only):
                    variant = gen.render(space.name, setting)
                    out.append(Kernel(task, target, f"{space.name}:{name}", variant.code, variant.cflags))
    return out


def _settings(space: object, defaults_only: bool) -> list[tuple[str, dict]]:
    default = space.defaults()  # type: ignore[attr-defined]
    found = [("default", default)]
    if defaults_only:
        return found
    for knob in space.knobs:  # type: ignore[attr-defined]
        for value in {knob.values[0], knob.values[-1]} - {knob.default}:
            setting = {**default, knob.name: value}
            if space.valid(setting):  # type: ignore[attr-defined]
                found.append((f"{knob.name}={value}", setting))
    return found


def check(kernel: Kernel, root: Path) -> tuple[list[str], bytes]:
    """The violations of one kernel (compiled as the evaluator compiles a candidate) and its object."""
    work = Path(tempfile.mkdtemp(dir=root))
    (work / "candidate.c").write_text(kernel.code)
    (work / "eok_prototype.h").write_text(harness.candidate_prelude(kernel.task))
    flags, problem = check_cflags(kernel.cflags)
    if problem:
        return [f"flags: {problem}"], b""
    kind = "emulator" if kernel.target.is_riscv else "host"
    base = [CLANG, *COMMON_FLAGS, *target_flags(kernel.target, kind), *kernel.target.baseline_cflags, *flags]
    base += ["-include", "eok_prototype.h"]
    found = [str(v) for v in safety.check_directives(kernel.code)]
    pre = subprocess.run([*base, "-E", "candidate.c"], cwd=work, capture_output=True, text=True)
    if pre.returncode:
        return [*found, f"clang -E: {pre.stderr.strip()[:200]}"], b""
    fn = kernel.task.function_name
    found += [str(v) for v in safety.check_preprocessed(pre.stdout, fn, asm=kernel.target.is_riscv)]
    cc = subprocess.run([*base, "-fno-jump-tables", "-c", "candidate.c", "-o", "k.o"], cwd=work, capture_output=True)
    if cc.returncode:
        return [*found, f"clang -c: {cc.stderr.decode(errors='replace').strip()[:200]}"], b""
    obj = (work / "k.o").read_bytes()
    found += [str(v) for v in safety.check_object(obj, fn)]
    if too_large := safety.object_too_large(obj, MAX_DATA_BYTES):
        found.append(too_large)
    return found, obj


def unsearched(obj: bytes) -> Counter[str]:
    """Words at every 2-byte offset of RISC-V code that the object check does not search there."""
    seen: Counter[str] = Counter()
    if not obj or obj[0x12] != safety.EM_RISCV:
        return seen
    for sec in safety._elf_sections(obj):
        if not sec["flags"] & safety.SHF_EXECINSTR or sec["type"] == safety.SHT_NOBITS:
            continue
        code = obj[sec["offset"] : sec["offset"] + sec["size"]]
        for j in range(0, len(code) - 3, 2):
            half, word = code[j] | code[j + 1] << 8, int.from_bytes(code[j : j + 4], "little")
            if half & 3 == 2 and half >> 12 in (8, 9) and (half >> 7) & 31 and not (half >> 2) & 31 and half != 0x8082:
                seen["c.jr/c.jalr"] += 1
            seen["c.ebreak"] += half == 0x9002
            if word & 0x707F == 0x67 and not (word >> 7) & 31 and word != 0x00008067:  # jalr x0, not ret
                seen["jalr x0 (not ret)"] += 1
            if word & 0x7F == 0x73 and (word >> 12) & 7 not in (0, 4) and word >> 20 not in safety._CSR_OK:
                seen["csr access"] += 1
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="k1-x60,host")
    parser.add_argument("--defaults-only", action="store_true", help="references and family defaults only")
    parser.add_argument("--measure", action="store_true", help="count what is not searched at every offset")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    kernels = honest_kernels(args.targets.split(","), args.defaults_only)
    bad, objects, measured = 0, 0, Counter[str]()
    with tempfile.TemporaryDirectory(prefix="eok-honest-") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        for kernel, (found, obj) in zip(kernels, pool.map(lambda k: check(k, Path(tmp)), kernels), strict=True):
            objects += bool(obj)
            for line in found:
                bad += 1
                print(f"{kernel.task.name} {kernel.target.key} {kernel.label}: {line}")
            if args.measure:
                measured.update({k: 1 for k, v in unsearched(obj).items() if v})  # objects holding one
    print(f"{len(kernels)} honest kernels, {objects} objects, {bad} violations")
    if args.measure:
        print("objects holding, at some 2-byte offset:", json.dumps(dict(measured)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
