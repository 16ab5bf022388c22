"""Red team, round 3 (issue 20, items 2 to 4), with real clang-22 and qemu-riscv64.

Each route of the round ends non-`ok` with a status that says what happened: the asm split by `\\r`
(RISC-V and host), the file probe of `#pragma GCC dependency`, instructions hidden inside others in the
object, a clang crash, a compile that does not end, objects and tables too large, a candidate that makes
its own modeled timing fail, and files that are not text. Where a defense has to be switched off to reach
the next one, the test says which.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from core.errors import EokError
from core.settings import Settings
from evaluator import safety, toolchain
from evaluator.evaluate import Candidate, EvalResult, EvalStatus, Evaluator
from evaluator.targets import load_target
from evaluator.tasks import load_task

pytestmark = pytest.mark.qemu

SIG = "void saxpy(int n, float a, const float *x, float *y)"
LOOP = "for (int i = 0; i < n; i++) y[i] += a * x[i];"


def kernel(body: str = "", head: str = "") -> str:
    return f"{head}\n{SIG} {{ {body} {LOOP} }}\n"


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    return Evaluator(Settings(home=tmp_path_factory.mktemp("round3-home"), eval_timeout_s=60))


def evaluate(ev: Evaluator, code: str, runner: str = "qemu", cflags: list[str] | None = None) -> EvalResult:
    target = load_target("k1-x60" if runner == "qemu" else "host")
    return ev.evaluate(load_task("saxpy"), target, Candidate(code=code, cflags=cflags or []), runner)


@pytest.fixture
def unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The static check off (the object check stays): to reach the compile and run stages behind it."""
    monkeypatch.setattr(Evaluator, "_static_check", lambda *a, **k: [])


# ------------------------------------------------------------------------ the routes of the issue


def test_a_carriage_return_no_longer_splits_an_asm_template(evaluator: Evaluator) -> None:
    code = kernel('long c; __asm__ volatile("vsetivli zero, 4, e32, m1, ta, ma\\r rdcycle %0" : "=r"(c));')
    r = evaluate(evaluator, code)
    assert r.status == EvalStatus.REJECTED and "U+000D" in r.feedback, r.feedback


def test_raw_syscalls_through_host_asm_are_refused(evaluator: Evaluator) -> None:
    code = kernel('__asm__ volatile("vpxor %%xmm0, %%xmm0, %%xmm0\\r syscall" ::: "memory");')
    r = evaluate(evaluator, code, "native")
    assert r.status == EvalStatus.REJECTED and "host target" in r.feedback, r.feedback


def test_a_dependency_pragma_probes_no_file(evaluator: Evaluator) -> None:
    # The same answer whether the file exists or not: the pragma is refused before the preprocessor runs.
    for path in ("/etc/hostname", "/no/such/file"):
        r = evaluate(evaluator, f'#pragma GCC dependency "{path}"\n' + kernel())
        assert r.status == EvalStatus.REJECTED and "#pragma GCC dependency" in r.feedback, r.feedback
        assert path not in r.feedback.split("rejected:")[0]


def test_a_crash_of_the_checkers_preprocessor_is_the_candidates_rejection(
    evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the raw check and -disable-pragma-debug-crash both off, clang -E really crashes: still one line.
    monkeypatch.setattr(safety, "check_directives", lambda *a, **k: [])
    monkeypatch.setattr(toolchain, "COMMON_FLAGS", [f for f in toolchain.COMMON_FLAGS if "debug-crash" not in f])
    monkeypatch.setattr(toolchain, "COMMON_FLAGS", [f for f in toolchain.COMMON_FLAGS if f != "-Xclang"])
    r = evaluate(evaluator, "#pragma clang __debug crash\n" + kernel())
    assert r.status == EvalStatus.REJECTED and "the preprocessor crashed" in r.feedback, r.feedback
    assert len(r.feedback.splitlines()) == 1


def test_a_compiler_crash_is_named_as_such(
    evaluator: Evaluator, unchecked: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(toolchain, "COMMON_FLAGS", [f for f in toolchain.COMMON_FLAGS if "debug-crash" not in f])
    monkeypatch.setattr(toolchain, "COMMON_FLAGS", [f for f in toolchain.COMMON_FLAGS if f != "-Xclang"])
    r = evaluate(evaluator, "#pragma clang __debug crash\n" + kernel())
    assert r.status == EvalStatus.COMPILER_CRASH and "the compiler crashed" in r.feedback, r.feedback


def test_a_compile_that_does_not_end_is_a_compile_timeout(
    evaluator: Evaluator, unchecked: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # clang -O3 for the X60 on vector_size(1 << 16) / (1 << 18) / (1 << 20) takes 0.7 / 4.9 / 104 s on this
    # 2-core machine (1 << 18 ended under 2 s on CI's faster one); the static check refuses all three, so it is
    # off here and the limit is lowered to keep the test short.
    limits = toolchain.CANDIDATE_COMPILE_LIMITS
    monkeypatch.setattr(toolchain, "CANDIDATE_COMPILE_LIMITS", type(limits)(**{**limits.__dict__, "wall_s": 2}))
    # 1 << 20 (~50x the 2 s limit) leaves no doubt on a fast machine; a fresh comment keeps any object cache
    # from answering for the compiler.
    head = (
        f"/* {os.urandom(8).hex()} */\n"
        "typedef float big __attribute__((vector_size(1 << 20)));\nstatic void f(big *a, big *b) { *a = *a * *b + *a; }"
    )
    code = kernel("f((big *)y, (big *)x);", head)
    r = evaluate(evaluator, code)
    assert r.status == EvalStatus.COMPILE_TIMEOUT and "2 s limit" in r.feedback, r.feedback


@pytest.mark.parametrize(
    ("elements", "words"),
    [(48 << 20, "16 MB output"), (3 << 20, "more than the 8 MB limit")],  # 192 MiB file; 12 MiB loaded
)
def test_a_huge_constant_table_is_too_large(evaluator: Evaluator, elements: int, words: str) -> None:
    code = kernel("y[0] += T[n & 7];", f"static const float T[{elements}] = {{1}};")
    r = evaluate(evaluator, code)
    assert r.status == EvalStatus.TOO_LARGE and words in r.feedback, r.feedback


def test_llvm_unroll_options_cannot_hold_the_compiler(evaluator: Evaluator) -> None:
    r = evaluate(evaluator, kernel(), cflags=["-funroll-loops", "-mllvm", "-unroll-count=100000"])
    assert r.status == EvalStatus.REJECTED and "from 0 to 32" in r.feedback, r.feedback


def test_a_candidate_that_breaks_its_modeled_run_is_invalid_output(
    evaluator: Evaluator, unchecked: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Right on every call, but part of its work runs on a second thread: the modeled run prices one core,
    # so its timing fails. That used to be "correct; modeled timing failed", i.e. `ok`.
    monkeypatch.setattr(safety, "check_object", lambda *a, **k: [])  # pthread_* are not allowed calls
    head = "#include <pthread.h>\nstatic void *idle(void *arg) { return arg; }"
    code = kernel("pthread_t t; pthread_create(&t, 0, idle, 0); pthread_join(t, 0);", head)
    r = evaluate(evaluator, code)
    assert r.status == EvalStatus.INVALID_OUTPUT and "modeled run failed" in r.feedback, r.feedback
    assert "several threads" in r.feedback


def test_a_cost_model_that_cannot_run_is_our_error_not_an_ok(
    evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evaluator.costmodel import mca

    monkeypatch.setattr(mca, "MCA", "llvm-mca-not-installed")
    with pytest.raises(EokError, match="modeled timing of saxpy failed: llvm-mca-not-installed not found"):
        evaluate(evaluator, kernel("y[0] += 0.0f;"))  # a kernel whose baseline timing is not cached yet


def test_an_honest_kernel_is_still_ok(evaluator: Evaluator) -> None:
    r = evaluate(evaluator, kernel(head="#include <riscv_vector.h>"))
    assert r.ok and r.speedup, r.feedback


# ------------------------------------------------------------------------------- the object check


def compiled(tmp_path: Path, code: str) -> bytes:
    src = tmp_path / "k.c"
    src.write_text(code)
    argv = ["clang-22", "--target=riscv64-linux-gnu", "-march=rv64gcv", "-O2", "-c", str(src), "-o", f"{src}.o"]
    subprocess.run(argv, check=True, capture_output=True)
    return Path(f"{src}.o").read_bytes()


NORVC = '__asm__ volatile(".option push\\n.option norvc\\n{}\\n.option pop");'  # 4-byte j and beqz
# Bytes the text check would refuse; compiled directly, they show what the object check finds on its own.
HIDDEN = {
    # csrr a0, cycle (0xc0002573) across an addi (0x25730013) and a c.sw (0xc000): found at offset 2
    "counter_read_mid_instruction": ('__asm__ volatile(".4byte 0x25730013\\n.2byte 0xc000");', "CSR cycle"),
    "time_read_mid_instruction": ('__asm__ volatile(".4byte 0x25730013\\n.2byte 0xc010");', "CSR time"),
    "instret_h_read": ('__asm__ volatile(".4byte 0x25730013\\n.2byte 0xc820");', "CSR instreth"),
    "jump_into_an_instruction": (NORVC.format("j .+6\\n.4byte 0x25730013\\n.2byte 0xc000"), "middle of"),
    "branch_into_an_instruction": (NORVC.format("beqz a0, .+6\\n.4byte 0x00000013"), "middle of"),
}


@pytest.mark.parametrize("case", sorted(HIDDEN))
def test_instructions_hidden_inside_others_are_found(tmp_path: Path, case: str) -> None:
    body, reason = HIDDEN[case]
    found = safety.check_object(compiled(tmp_path, kernel(body)), "saxpy")
    assert any(reason in v.message for v in found), [str(v) for v in found]


def test_branches_calls_and_loops_of_honest_code_pass(tmp_path: Path) -> None:
    code = "#include <math.h>\nstatic float f(float v) { return v > 0 ? sqrtf(v) : -v; }\n" + kernel(
        "for (int i = 0; i < n; i++) { if (x[i] > 1) break; y[i] = f(y[i]); }"
    )
    assert safety.check_object(compiled(tmp_path, code), "saxpy") == []


# ----------------------------------------------------------------------------- bytes in input files


def test_a_candidate_that_is_not_text_is_one_line(evaluator: Evaluator) -> None:
    r = evaluate(evaluator, kernel() + "\udcff")  # what a non-UTF-8 byte becomes in a str
    assert r.status == EvalStatus.REJECTED and "not UTF-8 text" in r.feedback, r.feedback


def test_a_candidate_file_with_any_bytes_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.settings import get_settings
    from service.cli import _register
    from service.cli.app import run_cli

    monkeypatch.setenv("EOK_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    _register()
    bad = tmp_path / "bad.c"
    bad.write_bytes(kernel().encode() + b"\xff\xfe")
    assert run_cli(["eval", "saxpy", "-c", str(bad)]) != 0
    err = " ".join(capsys.readouterr().err.split())
    assert "bad.c: not UTF-8 text (byte 0xff" in err and "Traceback" not in err and "unexpected" not in err
    get_settings.cache_clear()
