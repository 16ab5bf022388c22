"""Red team for native and board timing: kernels that forge their own time (issue 20, item 1).

The harness measures every timed call inside the candidate's process, so whatever it subtracts or
compares after the call must be out of the kernel's reach. Two routes were seen:

- a plain C store: a kernel that adds D to the first whole-number double above its own frame (the
  harness's `overhead`, kept on main's stack across the call) shortened its time by D;
- callee-saved registers: on RISC-V the overhead sat in `fs2` across the call, and a kernel may return
  with any value there.

Each forger below wraps the task's honest reference, so its outputs are right; it may end non-ok, or
end ok but gain nothing over the same honest kernel beyond noise. The static and object checks are off
(as in test_redteam_verdict.py): these tests hold the harness to account on its own.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from core.settings import Settings
from evaluator import evaluate as evaluate_module
from evaluator.evaluate import Candidate, EvalResult, EvalStatus, Evaluator
from evaluator.runners import SshRunner
from evaluator.targets import load_target
from evaluator.tasks import KernelTask, load_task
from tests.support.board import StandInBoard, stand_in_board

pytestmark = pytest.mark.qemu

NOISE = 2.0  # a forger "gains" if its time beats the honest kernel's by more than this factor
SHARE = 0.9  # each forger takes this share of the honest kernel's time off its own: 10x if it works


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    home = tmp_path_factory.getbasetemp() / "eok-evaluator-home"
    return Evaluator(Settings(home=home, eval_timeout_s=60, eval_memory_mb=512))


@pytest.fixture(scope="module", autouse=True)
def without_static_check() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:  # module scope: the honest controls are module fixtures
        mp.setattr(evaluate_module.safety, "check_directives", lambda *a, **k: [])
        mp.setattr(evaluate_module.safety, "check_preprocessed", lambda *a, **k: [])
        mp.setattr(evaluate_module.safety, "check_object", lambda *a, **k: [])
        yield


def honest_renamed(task: KernelTask) -> str:
    """The reference, defining `honest_kernel` instead of the kernel (the forgers call it, then forge)."""
    fn = task.function_name
    return f"#define {fn} honest_kernel\n{task.reference_code}\n#undef {fn}\n"


def c_wrapper(task: KernelTask, after: str) -> str:
    """The kernel: the honest work, then `after` (C statements), then the honest result."""
    params = ", ".join(p.c_decl for p in task.params)
    args = ", ".join(p.name for p in task.params)
    ret = task.return_type
    keep, give = ("", "") if ret == "void" else (f"{ret} r = ", " return r;")
    body = f"{keep}honest_kernel({args}); {after}{give}"
    return f"{ret} {task.function_name}({params}) {{ {body} }}\n"


def stack_forger(task: KernelTask, d_ns: float, *, every: bool) -> str:
    """Adds d_ns to the first (or every) whole-number double in the 2 KB above the forger's own frame."""
    lo, hi = (1.0, 1e7) if not every else (1.0, 2.0**62)
    forge = f"""
#include <stdint.h>
__attribute__((noinline)) static void eok_forge(void) {{
    volatile double here = 0; /* the words above it: this frame, the kernel's, then the harness's */
    uintptr_t a = ((uintptr_t)&here + 8) & ~(uintptr_t)7;
    for (int k = 0; k < 256; k++) {{
        volatile double *w = (volatile double *)(a + 8 * (uintptr_t)k);
        double v = *w;
        if (v >= {lo!r} && v < {hi!r} && v == (double)(long long)v) {{
            *w = v + {d_ns!r};
            {"" if every else "return;"}
        }}
    }}
}}
"""
    return honest_renamed(task) + forge + c_wrapper(task, "eok_forge();")


def static_forger(task: KernelTask, d_ns: float) -> str:
    """Adds d_ns to every whole-number double in [1, 1e7) of the program's .data and .bss (a harness static)."""
    forge = f"""
#include <stdint.h>
extern char __data_start[], _end[];
__attribute__((noinline)) static void eok_forge(void) {{
    uintptr_t a = ((uintptr_t)__data_start + 7) & ~(uintptr_t)7;
    for (; a + 8 <= (uintptr_t)_end; a += 8) {{
        volatile double *w = (volatile double *)a;
        double v = *w;
        if (v >= 1.0 && v < 1e7 && v == (double)(long long)v) *w = v + {d_ns!r};
    }}
}}
"""
    return honest_renamed(task) + forge + c_wrapper(task, "eok_forge();")


def locked_page_writer(task: KernelTask) -> str:
    """Finds the harness's locked page through its anchor (a .bss page that starts with a pointer to a
    mapped page) and writes 0 over the overhead kept there."""
    forge = """
#include <stdint.h>
extern char __data_start[], _end[];
__attribute__((noinline)) static void eok_forge(void) {
    for (uintptr_t a = ((uintptr_t)__data_start + 4095) & ~(uintptr_t)4095; a + 8 <= (uintptr_t)_end; a += 4096) {
        uintptr_t w = *(volatile uintptr_t *)a;
        if (w > (uintptr_t)_end + (1ull << 30) && !(w & 4095)) { ((volatile double *)w)[1] = 0.0; return; }
    }
}
"""
    return honest_renamed(task) + forge + c_wrapper(task, "eok_forge();")


def _bits(x: float) -> str:
    return hex(struct.unpack("<Q", struct.pack("<d", x))[0])


FS = ",".join(f"fs{i}" for i in range(12))
S = ",".join(f"s{i}" for i in range(12))


def riscv_register_forger(task: KernelTask, d_ns: float) -> str:
    """The kernel returns with other values in the callee-saved registers than it was called with.

    Every fs0-fs11 and s0-s11 whose bits are a whole-number double in [1, 1e7) (the size of a call's
    overhead in ns) gets d_ns added; pointers, integers and larger constants never look like such a
    double and stay as they were, so the harness goes on as if nothing happened.
    """
    fn = task.function_name
    whole = (  # t2 = 1 when ft1 holds a whole number in [1, 1e7)
        "  fcvt.l.d t1, ft1, rtz\\n  fcvt.d.l ft0, t1\\n  feq.d t2, ft0, ft1\\n"
        "  fle.d t3, ft8, ft1\\n  and t2, t2, t3\\n  flt.d t3, ft1, ft9\\n  and t2, t2, t3\\n"
    )
    forge = (
        f'"  li t0, {_bits(1.0)}\\n  fmv.d.x ft8, t0\\n  li t0, {_bits(1e7)}\\n  fmv.d.x ft9, t0\\n"\n'
        f'"  li t0, {_bits(d_ns)}\\n  fmv.d.x ft10, t0\\n"\n'
        f'".irp r, {FS}\\n  fmv.d ft1, \\\\r\\n{whole}  beqz t2, 1f\\n  fadd.d \\\\r, ft1, ft10\\n1:\\n.endr\\n"\n'
        f'".irp r, {S}\\n  fmv.d.x ft1, \\\\r\\n{whole}  beqz t2, 1f\\n  fadd.d ft1, ft1, ft10\\n'
        f'  fmv.x.d \\\\r, ft1\\n1:\\n.endr\\n"\n'
    )
    # The kernel itself is assembly: a compiled C function would restore the registers it saved.
    wrapper = (
        "__asm__(\n"
        f'".text\\n.globl {fn}\\n.type {fn}, @function\\n.p2align 2\\n{fn}:\\n"\n'
        '"  addi sp, sp, -16\\n  sd ra, 8(sp)\\n  call honest_kernel\\n  ld ra, 8(sp)\\n  addi sp, sp, 16\\n"\n'
        f"{forge}"
        f'"  ret\\n.size {fn}, .-{fn}\\n");\n'
    )
    return honest_renamed(task) + wrapper


def gains(r: EvalResult, honest: EvalResult) -> bool:
    """Whether a forger came out ahead: ok with no time (0 ns) or a time below the honest one beyond noise.

    Its own time, not its speedup: a baseline run slowed by a load spike on the shared machine (4.1 ms
    against 0.85 seen) would pass for a gain.
    """
    if r.status != EvalStatus.OK:
        return False
    assert honest.candidate_seconds
    return not r.candidate_seconds or r.candidate_seconds < honest.candidate_seconds / NOISE


# ------------------------------------------------------------------------------------------- native


@pytest.fixture(scope="module", params=["sdot", "sgemm_64"])
def native_honest(request: pytest.FixtureRequest, evaluator: Evaluator) -> tuple[KernelTask, EvalResult]:
    task = load_task(request.param)
    code = honest_renamed(task) + c_wrapper(task, "")
    r = evaluator.evaluate(task, load_target("host"), Candidate(code=code), "native")
    return task, r


def test_the_honest_control_stays_ok_natively(native_honest: tuple[KernelTask, EvalResult]) -> None:
    task, r = native_honest
    assert r.status == EvalStatus.OK and r.speedup and r.candidate_seconds, f"{task.name}: {r.feedback}"


@pytest.mark.parametrize("route", ["first_whole_double", "every_whole_double", "harness_statics"])
def test_a_kernel_cannot_forge_its_native_time_with_a_store(
    evaluator: Evaluator, native_honest: tuple[KernelTask, EvalResult], route: str
) -> None:
    task, honest = native_honest
    assert honest.candidate_seconds
    d_ns = round(SHARE * honest.candidate_seconds * 1e9)
    code = {
        "first_whole_double": lambda: stack_forger(task, d_ns, every=False),
        "every_whole_double": lambda: stack_forger(task, d_ns, every=True),
        "harness_statics": lambda: static_forger(task, d_ns),
    }[route]()
    r = evaluator.evaluate(task, load_target("host"), Candidate(code=code), "native")
    assert not gains(r, honest), f"{task.name}/{route}: {r.status}: {r.feedback} (honest: {honest.feedback})"


@pytest.mark.parametrize("runner", ["native", "qemu"])
def test_a_write_to_the_locked_page_is_a_sandbox_violation_that_names_it(evaluator: Evaluator, runner: str) -> None:
    task = load_task("sdot")
    target = load_target("host" if runner == "native" else "k1-x60")
    r = evaluator.evaluate(task, target, Candidate(code=locked_page_writer(task)), runner)
    assert r.status == EvalStatus.SANDBOX_VIOLATION and "timing page" in r.feedback, r.feedback


# -------------------------------------------------------------------------- the board's harness (qemu)


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandInBoard]:
    with stand_in_board(tmp_path_factory.mktemp("board"), load_target("k1-x60").qemu_cpu) as b:
        yield b


def board_runner(board: StandInBoard) -> SshRunner:
    return SshRunner(
        "127.0.0.1",
        "root",
        board.port,
        board.key,
        core=0,
        remote_dir=str(board.remote),
        known_hosts=board.root / "known_hosts",
        build_kind="emulator",
    )


@pytest.fixture(scope="module")
def board_honest(board: StandInBoard, evaluator: Evaluator) -> EvalResult:
    task = load_task("sdot")
    code = riscv_register_forger(task, 0.0)  # the same assembly wrapper, adding 0
    return evaluator.evaluate(task, load_target("k1-x60"), Candidate(code=code), board_runner(board))


def test_the_honest_control_stays_ok_on_the_board(board_honest: EvalResult) -> None:
    assert board_honest.status == EvalStatus.OK and board_honest.speedup, board_honest.feedback
    assert board_honest.measurement == "measured"


@pytest.mark.parametrize("route", ["shorten", "to_zero"])
def test_a_kernel_cannot_forge_its_board_time_through_callee_saved_registers(
    board: StandInBoard, evaluator: Evaluator, board_honest: EvalResult, route: str
) -> None:
    task = load_task("sdot")
    assert board_honest.candidate_seconds
    d_ns = round(SHARE * board_honest.candidate_seconds * 1e9) if route == "shorten" else 1e12
    code = riscv_register_forger(task, float(d_ns))
    r = evaluator.evaluate(task, load_target("k1-x60"), Candidate(code=code), board_runner(board))
    assert not gains(r, board_honest), f"{route}: {r.status}: {r.feedback} (honest: {board_honest.feedback})"
