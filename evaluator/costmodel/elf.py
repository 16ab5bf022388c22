"""Symbols and instruction text of a static riscv64 ELF, in the syntax llvm-mca-22 reads back.

The symbol table is read directly (it is needed before qemu runs, for the marker addresses). Instruction
text comes from llvm-objdump-22, run afterwards on just the functions the region executed: disassembling
all of a static glibc would cost more than the qemu run of a small kernel. Which addresses form a TB is
qemu's business (trace.py); this module only names the instructions.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.errors import InvalidInput, Unavailable
from evaluator.costmodel.trace import CandidateFault

OBJDUMP = "llvm-objdump-22"

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

_EM_RISCV, _SHT_SYMTAB, _STT_FUNC = 243, 2, 2
_SYM_DTYPE = np.dtype(
    [("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"), ("size", "<u8")]
)


@dataclass(frozen=True)
class Insn:
    text: str  # "mnemonic operands", as llvm-mca-22 accepts it
    is_vector: bool  # executes in the vector unit (vsetvl* are scalar: they run on IEUA)
    to_scalar: bool  # the scalar pipeline depends on the vector unit's result


class ElfSymbols:
    """The function symbols of a riscv64 ELF: name -> address, and address -> covering function."""

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        if not binary.is_file():
            raise InvalidInput(f"binary {binary} does not exist", hint="pass the path of the linked harness ELF")
        data = binary.read_bytes()
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1 or int.from_bytes(data[18:20], "little") != _EM_RISCV:
            raise InvalidInput(
                f"{binary} is not a little-endian 64-bit RISC-V ELF",
                hint="build the harness with clang-22 --target=riscv64-linux-gnu -static -no-pie",
            )
        self.by_name: dict[str, int] = {}
        starts: dict[int, str] = {}
        for name, addr in _function_symbols(data):
            self.by_name.setdefault(name, addr)
            starts.setdefault(addr, name)
        self._starts = np.array(sorted(starts), dtype=np.uint64)
        self._names = [starts[a] for a in self._starts.tolist()]

    def address(self, name: str) -> int:
        if name not in self.by_name:
            raise InvalidInput(
                f"{self.binary}: symbol {name!r} not found",
                hint="the harness must define noinline eok_region_begin()/eok_region_end() and link without "
                "stripping symbols",
            )
        return self.by_name[name]

    def covering(self, addresses: list[int]) -> set[str]:
        """Names of the functions that start at or before each address (the one containing it)."""
        idx = np.searchsorted(self._starts, np.array(addresses, dtype=np.uint64), side="right") - 1
        return {self._names[i] for i in set(idx.tolist()) if i >= 0}


def _function_symbols(data: bytes) -> list[tuple[str, int]]:
    shoff = int.from_bytes(data[0x28:0x30], "little")
    shentsize, shnum = int.from_bytes(data[0x3A:0x3C], "little"), int.from_bytes(data[0x3C:0x3E], "little")
    sections = [data[shoff + i * shentsize : shoff + (i + 1) * shentsize] for i in range(shnum)]
    for sec in sections:
        if int.from_bytes(sec[4:8], "little") != _SHT_SYMTAB:
            continue
        offset, size = int.from_bytes(sec[24:32], "little"), int.from_bytes(sec[32:40], "little")
        strtab = sections[int.from_bytes(sec[40:44], "little")]
        str_off = int.from_bytes(strtab[24:32], "little")
        syms = np.frombuffer(data, dtype=_SYM_DTYPE, count=size // _SYM_DTYPE.itemsize, offset=offset)
        funcs = syms[((syms["info"] & 0xF) == _STT_FUNC) & (syms["value"] != 0)]
        out = []
        for name_off, value in zip(funcs["name"].tolist(), funcs["value"].tolist(), strict=True):
            start = str_off + name_off
            out.append((data[start : data.index(b"\0", start)].decode(errors="replace"), value))
        return out
    raise InvalidInput(
        "the harness ELF has no symbol table",
        hint="do not strip the harness: the cost model finds eok_region_begin/end by name",
    )


class Disassembly:
    """Instruction text by address; `Insn`s are built only for the addresses the region executed."""

    def __init__(self, raw: dict[int, tuple[bytes, bytes]]) -> None:
        self._raw = raw
        self._insns: dict[int, Insn] = {}

    def __contains__(self, addr: int) -> bool:
        return addr in self._raw

    def insn(self, addr: int) -> Insn:
        found = self._insns.get(addr)
        if found is None:
            mnemonic, operands = self._raw[addr]
            found = self._insns[addr] = make_insn(mnemonic.decode(), operands.decode())
        return found


def require_objdump() -> None:
    if shutil.which(OBJDUMP) is None:
        raise Unavailable(f"{OBJDUMP} not found", hint="apt-get install llvm-22 (Debian bookworm-security)")


def disassemble(symbols: ElfSymbols, addresses: list[int]) -> Disassembly:
    """Disassemble the functions holding `addresses` (plus a plain range for any address outside them)."""
    require_objdump()
    names = sorted(symbols.covering(addresses))
    dis = Disassembly(_objdump(symbols.binary, [f"--disassemble-symbols={','.join(names)}"]) if names else {})
    missing = [a for a in addresses if a not in dis]
    if missing:  # code outside any function symbol: disassemble its address range
        extra = _objdump(
            symbols.binary, [f"--start-address={min(missing):#x}", f"--stop-address={max(missing) + 4:#x}"]
        )
        dis = Disassembly({**dis._raw, **extra})
    return dis


def _objdump(binary: Path, selection: list[str]) -> dict[int, tuple[bytes, bytes]]:
    proc = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", *selection, str(binary)], capture_output=True)
    if proc.returncode != 0:
        raise InvalidInput(
            f"{OBJDUMP} could not disassemble {binary}: {proc.stderr.decode(errors='replace').strip()[:300]}",
            hint="binary must be a riscv64 ELF built by clang-22 --target=riscv64-linux-gnu",
        )
    return {int(addr, 16): (mn, ops) for addr, mn, ops in _INSN_RE.findall(proc.stdout)}


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
    except KeyError as exc:  # a jump into the middle of an instruction: code no one compiled ran
        raise CandidateFault(
            f"qemu executed an instruction at {exc.args[0]:#x} that llvm-objdump did not list",
            hint="the harness must be a static, non-PIE ELF whose code is all in .text (no JIT, no dlopen)",
        ) from exc
