"""Instruction text of a static riscv64 ELF, from llvm-objdump-22, in the syntax llvm-mca-22 reads back.

Only the text is taken from the ELF; which addresses form a TB comes from qemu (costmodel_trace).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from core.errors import EokError, InvalidInput, Unavailable

OBJDUMP = "llvm-objdump-22"

_SYMBOL_RE = re.compile(rb"^([0-9a-f]{16}) <([^>\n]+)>:$", re.MULTILINE)
_INSN_RE = re.compile(rb"^ *([0-9a-f]+):\s*\t([^\t\n]+)(?:\t([^\n]*))?$", re.MULTILINE)
_TARGET_RE = re.compile(r"\s*<[^>]*>")
# Branches and jumps with a pc-relative target operand, aliases included (objdump prints aliases).
_BRANCHES = frozenset(
    {"beq", "bne", "blt", "bge", "bltu", "bgeu", "beqz", "bnez", "blez", "bgez", "bltz", "bgtz", "bgt", "ble"}
    | {"bgtu", "bleu", "j", "jal"}
)
# Vector instructions whose result lands in a scalar register: the scalar side must wait for the vector unit.
_VECTOR_TO_SCALAR = frozenset({"vmv.x.s", "vfmv.f.s", "vcpop.m", "vfirst.m"})
_VECTOR_CSRS = frozenset({"vl", "vtype", "vxsat", "vstart", "vcsr"})


@dataclass(frozen=True)
class Insn:
    text: str  # "mnemonic operands", as llvm-mca-22 accepts it
    is_vector: bool  # executes in the vector unit (vsetvl* are scalar: they run on IEUA)
    to_scalar: bool  # the scalar pipeline depends on the vector unit's result


class Disassembly:
    """Instruction text by address; `Insn`s are built only for the addresses the region executed."""

    def __init__(self, raw: dict[int, tuple[bytes, bytes]], symbols: dict[str, int]) -> None:
        self._raw = raw
        self._insns: dict[int, Insn] = {}
        self.symbols = symbols

    def insn(self, addr: int) -> Insn:
        found = self._insns.get(addr)
        if found is None:
            mnemonic, operands = self._raw[addr]
            found = self._insns[addr] = make_insn(mnemonic.decode(), operands.decode())
        return found

    def symbol(self, name: str, binary: Path) -> int:
        if name not in self.symbols:
            raise InvalidInput(
                f"{binary}: symbol {name!r} not found",
                hint="the harness must define noinline eok_region_begin()/eok_region_end() and link without "
                "stripping symbols",
            )
        return self.symbols[name]


def start_objdump(binary: Path, out: Path) -> subprocess.Popen[bytes]:
    """Start disassembling into `out` now, so it overlaps the qemu run; finish with `read_disassembly`."""
    if shutil.which(OBJDUMP) is None:
        raise Unavailable(f"{OBJDUMP} not found", hint="apt-get install llvm-22 (Debian bookworm-security)")
    if not binary.is_file():
        raise InvalidInput(f"binary {binary} does not exist", hint="pass the path of the linked harness ELF")
    with out.open("wb") as fh:  # a file, not a pipe: a full pipe would stall objdump until we read it
        return subprocess.Popen([OBJDUMP, "-d", "--no-show-raw-insn", str(binary)], stdout=fh, stderr=subprocess.PIPE)


def read_disassembly(proc: subprocess.Popen[bytes], out: Path, binary: Path) -> Disassembly:
    _, err = proc.communicate()
    text = out.read_bytes()
    if proc.returncode != 0:
        raise InvalidInput(
            f"{OBJDUMP} could not disassemble {binary}: {err.decode(errors='replace').strip()[:300]}",
            hint="binary must be a riscv64 ELF built by clang-22 --target=riscv64-linux-gnu",
        )
    symbols = {name.decode(): int(addr, 16) for addr, name in _SYMBOL_RE.findall(text)}
    raw = {int(addr, 16): (mn, ops) for addr, mn, ops in _INSN_RE.findall(text)}
    if not raw:
        raise InvalidInput(f"{binary} has no disassemblable code", hint="pass a riscv64 ELF executable")
    return Disassembly(raw, symbols)


def make_insn(mnemonic: str, operands: str) -> Insn:
    mnemonic = mnemonic.strip()
    operands = operands.strip()
    if mnemonic in _BRANCHES and operands:
        # The target is irrelevant to timing and "0x30308 <sdot+0x32>" is not assembler syntax.
        head, _, _ = operands.rpartition(",")
        operands = f"{head}, ." if head else "."
    else:
        operands = _TARGET_RE.sub("", operands)
    text = f"{mnemonic} {operands}".strip()
    is_vector = (mnemonic.startswith("v") and not mnemonic.startswith("vset")) or mnemonic.startswith("smt.")
    to_scalar = mnemonic in _VECTOR_TO_SCALAR or (
        mnemonic in {"csrr", "csrrs", "csrrc", "csrrw"} and bool(_VECTOR_CSRS & set(re.split(r"[,\s]+", operands)))
    )
    return Insn(text, is_vector, to_scalar)


def tb_insns(dis: Disassembly, addrs: tuple[int, ...]) -> tuple[Insn, ...]:
    try:
        return tuple(dis.insn(a) for a in addrs)
    except KeyError as exc:
        raise EokError(
            f"qemu executed an instruction at {exc.args[0]:#x} that llvm-objdump did not list",
            hint="the harness must be a static, non-PIE ELF whose code is all in .text (no JIT, no dlopen)",
        ) from exc
