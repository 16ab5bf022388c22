"""Red team: hostile candidates against the static check, the object check and the sandbox (issue 10,
items 2 and 3), with real clang-22 and qemu-riscv64 (and the host for the native runner).

Every candidate must end non-ok with the reason of its class. After each one, a sentinel file outside
the evaluation's scratch folder (which candidates try to overwrite) is unchanged, a root-only secret
(which they try to read at compile and run time) never shows up in any result, and no process of any
sandbox uid is left. The second half switches the static and object checks off (monkeypatched to
accept everything) and shows the sandbox alone still stops the same attacks: defense in depth.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.settings import Settings
from evaluator import safety
from evaluator.evaluate import Candidate, EvalResult, EvalStatus, Evaluator
from evaluator.safety import check_object
from evaluator.sandbox import SANDBOX_UID_BASE, is_root, seccomp_available
from evaluator.targets import load_target
from evaluator.tasks import load_task

pytestmark = pytest.mark.qemu

SIG = "void saxpy(int n, float a, const float *x, float *y)"
LOOP = "for (int i = 0; i < n; i++) y[i] += a * x[i];"
SECRET = Path("/root/eok-redteam-secret") if is_root() else Path.home() / "eok-redteam-secret"
SECRET_TEXT = "EOK-TOP-SECRET-7f3a"
SENTINEL = Path("/tmp/eok-redteam-sentinel")


def kernel(body: str = "", head: str = "") -> str:
    return f"{head}\n{SIG} {{ {body} {LOOP} }}\n"


# (code, cflags, words the one-line reason must contain)
STATIC = {
    # hiding text from the check
    "splice_in_include": ('#inc\\\nlude "/root/eok-redteam-secret"\n' + kernel(), [], "#include"),
    "splice_with_spaces": ("#include <std\\   \nio.h>\n" + kernel(), [], "#include <stdio.h>"),
    "line_directive": ('#line 1 "/usr/include/math.h"\n' + kernel(), [], "#line"),
    "linemarker": ('# 1 "/usr/include/math.h" 3\n' + kernel(), [], "#1"),
    "define_flag": (kernel("PWN;"), ["-DPWN=system(0)"], "not allowed"),
    "include_flag": (kernel(), ["-include", "/root/eok-redteam-secret"], "not allowed"),
    "octal_escape_asm": (kernel('__asm__ volatile("\\145call");'), [], "`ecall`"),
    "hex_escape_asm": (kernel('__asm__ volatile("vnop\\x0a\\x65" "call");'), [], "`ecall`"),
    "trigraph": ("??=include <stdio.h>\n" + kernel(), [], "trigraphs"),
    "digraph_include": ("%:include <stdio.h>\n" + kernel(), [], "#include <stdio.h>"),
    "token_paste_name": ("#define C(a, b) a##b\n" + kernel('C(sys, tem)("id");'), [], "`system`"),
    "pragma_operator": (
        '_Pragma("clang attribute push(__attribute__((constructor)), apply_to = function)")\n' + kernel(),
        [],
        "#pragma clang attribute",
    ),
    "constructor": ("__attribute__((constructor)) static void boot(void) {}\n" + kernel(), [], "`constructor`"),
    "init_array_asm": (
        'static void boot(void) {}\n__asm__(".section .init_array,\\"aw\\"\\n.quad boot\\n.text");\n' + kernel(),
        [],
        "`.section`",
    ),
    "weak_libc_override": (
        "__attribute__((weak)) void *memset(void *d, int c, unsigned long n) { return d; }\n" + kernel(),
        [],
        "`weak`",
    ),
    "libc_override": ("int rand(void) { return 4; }\n" + kernel(), [], "`rand` must be static"),
    # clang spells UCNs out before the check sees them (and refuses them for basic characters)
    "universal_character_name": ("int f\\u00e9open(void);\n" + kernel("f\\u00e9open();"), [], "`f\u00e9open`"),
    # system calls and counters
    "asm_ecall": (kernel('__asm__ volatile("li a7, 93\\n ecall");'), [], "`li`"),
    "asm_rdcycle": (kernel('long c; __asm__ volatile("rdcycle %0" : "=r"(c));'), [], "`rdcycle`"),
    "asm_csr": (kernel('long c; __asm__ volatile("csrr %0, time" : "=r"(c));'), [], "`csrr`"),
    "builtin_cyclecounter": (kernel("(void)__builtin_readcyclecounter();"), [], "`__builtin_readcyclecounter`"),
    "builtin_printf": (kernel('__builtin_printf("{\\"ok\\": true}\\n");'), [], "`__builtin_printf`"),
    "rand": ("#include <stdlib.h>\n" + kernel("a += rand() % 2;"), [], "`rand`"),
    # files at compile time
    "include_absolute": ('#include "/root/eok-redteam-secret"\n' + kernel(), [], "#include"),
    "include_angle_absolute": ("#include </root/eok-redteam-secret>\n" + kernel(), [], "#include"),
    "has_include": ('#if __has_include("/root/eok-redteam-secret")\n#endif\n' + kernel(), [], "`__has_include`"),
    "embed": ('static const char s[] = {\n#embed "/root/eok-redteam-secret"\n};\n' + kernel(), [], "#embed"),
    # files, processes and network at run time, under any spelling
    "fopen64": ("void *fopen64(const char *, const char *);\n" + kernel('fopen64("/x", "w");'), [], "`fopen64`"),
    "builtin_fopen": (kernel('(void)__builtin_fopen("/x", "w");'), [], "`__builtin_fopen`"),
    "open_syscall": ("long syscall(long, ...);\n" + kernel("syscall(56, 0);"), [], "`syscall`"),
    "_Fork": ("int _Fork(void);\n" + kernel("_Fork();"), [], "`_Fork`"),
    "vfork": ("int vfork(void);\n" + kernel("vfork();"), [], "`vfork`"),
    "extern_environ": ("extern char **environ;\n" + kernel("(void)environ;"), [], "extern objects"),
    "socket": ("int socket(int, int, int);\n" + kernel("socket(2, 1, 0);"), [], "`socket`"),
    "function_pointer_to_libc": (
        "int puts(const char *);\n" + kernel('int (*p)(const char *) = puts; p("x");'),
        [],
        "`puts`",
    ),
}


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    return Evaluator(Settings(home=tmp_path_factory.mktemp("redteam-home"), eval_timeout_s=30))


# Our own range of sandbox uids (other test sessions on this machine use theirs), inherited by the
# cost model's launcher process through the environment.
UID_BASE = SANDBOX_UID_BASE + (1 + os.getpid() % 1000) * (1 << 20)


@pytest.fixture(autouse=True)
def planted(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The secret and the sentinel; afterwards: sentinel untouched, no sandbox process of ours left."""
    monkeypatch.setenv("EOK_SANDBOX_UID_BASE", str(UID_BASE))
    SECRET.write_text(SECRET_TEXT)
    SECRET.chmod(0o600)
    SENTINEL.write_text("sentinel")
    SENTINEL.chmod(0o666)  # writable by anyone who can reach it: only the sandbox keeps candidates away
    before = SENTINEL.stat().st_mtime_ns
    yield
    try:
        assert SENTINEL.read_text() == "sentinel" and SENTINEL.stat().st_mtime_ns == before
        assert sandbox_processes() == []
    finally:
        SECRET.unlink(missing_ok=True)
        SENTINEL.unlink(missing_ok=True)


def sandbox_processes() -> list[int]:
    alive = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(ln.split(":", 1) for ln in status.read_text().splitlines() if ":" in ln)
        except OSError:
            continue
        uid = int(fields["Uid"].split()[1])
        if UID_BASE <= uid < UID_BASE + (1 << 20) and not fields["State"].strip().startswith("Z"):
            alive.append(int(status.parent.name))
    return alive


def evaluate(ev: Evaluator, code: str, cflags: list[str] | None = None, runner: str = "qemu") -> EvalResult:
    target = load_target("k1-x60" if runner == "qemu" else "host")
    r = ev.evaluate(load_task("saxpy"), target, Candidate(code=code, cflags=cflags or []), runner)
    assert SECRET_TEXT not in r.model_dump_json()  # whatever happened, the secret never comes back
    return r


@pytest.mark.parametrize("case", sorted(STATIC))
def test_the_static_check_rejects_with_the_reason(evaluator: Evaluator, case: str) -> None:
    code, cflags, reason = STATIC[case]
    r = evaluate(evaluator, code, cflags)
    assert r.status == EvalStatus.REJECTED, (r.status, r.feedback)
    assert reason in r.feedback, r.feedback
    assert len(r.feedback.splitlines()) == 1


def test_an_honest_kernel_still_passes(evaluator: Evaluator) -> None:
    r = evaluate(evaluator, kernel(head="#include <math.h>\n#include <string.h>"))
    assert r.ok, r.feedback


# ------------------------------------------------------------------------------- the object check


def compiled(tmp_path: Path, code: str) -> bytes:
    src = tmp_path / "k.c"
    src.write_text(code)
    argv = ["clang-22", "--target=riscv64-linux-gnu", "-march=rv64gcv", "-O2", "-c", str(src), "-o", str(src) + ".o"]
    subprocess.run(argv, check=True, capture_output=True)
    return Path(str(src) + ".o").read_bytes()


OBJECT = {
    "ecall": (kernel('__asm__ volatile("ecall");'), "ecall"),
    "ecall_hidden_mid_instruction": (kernel('__asm__ volatile("lui t0, 0x730\\n.2byte 0");'), "ecall hidden"),
    "cycle_counter": (kernel("y[0] = (float)__builtin_readcyclecounter();"), "CSR cycle"),
    "init_array": (
        '__attribute__((constructor)) static void boot(void) { __asm__ volatile("" ::: "memory"); }\n' + kernel(),
        ".init_array",
    ),
    "printf": ("int printf(const char *, ...);\n" + kernel('printf("%d %d", n, n);'), "`printf`"),
    "exported_override": ("void *memset(void *d, int c, unsigned long n) { return d; }\n" + kernel(), "`memset`"),
    "writable_state": ("static int calls;\n" + kernel("calls++;"), "writable data"),
}


@pytest.mark.parametrize("case", sorted(OBJECT))
def test_the_object_check_sees_what_the_text_check_cannot(tmp_path: Path, case: str) -> None:
    code, reason = OBJECT[case]
    found = check_object(compiled(tmp_path, code), "saxpy")
    assert any(reason in v.message for v in found), [str(v) for v in found]


def test_honest_objects_pass_the_object_check(tmp_path: Path) -> None:
    honest = "#include <riscv_vector.h>\n#include <math.h>\n" + kernel("y[0] += sqrtf(a) * 0.0f;")
    assert check_object(compiled(tmp_path, honest), "saxpy") == []


# ------------------------------------------------- the sandbox alone (static and object checks off)


@pytest.fixture
def unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("check_directives", "check_preprocessed", "check_object"):
        monkeypatch.setattr(safety, name, lambda *a, **k: [])


SANDBOX = {
    "fork": ("#include <unistd.h>\n" + kernel("if (fork() == 0) { for (;;) ; }"), "sandbox violation"),
    "socket": ("#include <sys/socket.h>\n" + kernel("socket(2, 1, 0);"), "sandbox violation"),
    "clone_syscall": ("#include <unistd.h>\n#include <sys/syscall.h>\n" + kernel("syscall(SYS_clone, 17, 0);"), ""),
    "read_secret_and_write_sentinel": (
        "#include <stdio.h>\n#include <stdlib.h>\n"
        + kernel(
            f'FILE *s = fopen("{SECRET}", "r"); if (s) abort();'
            f' FILE *w = fopen("{SENTINEL}", "w"); if (w) {{ fputs("pwned", w); fclose(w); abort(); }}'
        ),
        "",
    ),
}


@pytest.mark.parametrize("runner", ["qemu", "native"])
@pytest.mark.parametrize("case", sorted(SANDBOX))
def test_the_sandbox_alone_stops_escapes(evaluator: Evaluator, unchecked: None, case: str, runner: str) -> None:
    code, reason = SANDBOX[case]
    r = evaluate(evaluator, code, runner=runner)
    if case == "read_secret_and_write_sentinel":
        assert "SIGABRT" not in r.feedback  # neither file could be opened (the fixture checks the sentinel)
        return
    if not seccomp_available():
        pytest.skip("no seccomp filter on this host architecture: only the uid and namespaces hold here")
    assert r.status == EvalStatus.SANDBOX_VIOLATION and "sandbox violation" in r.feedback, r.feedback
    assert reason in r.feedback


def test_compile_time_reads_of_secrets_fail_without_the_check(evaluator: Evaluator, unchecked: None) -> None:
    r = evaluate(evaluator, f'#include "{SECRET}"\n' + kernel())
    assert r.status == EvalStatus.COMPILE_ERROR and "not found" in r.feedback  # hidden from the compiler
    r = evaluate(evaluator, f'static const char s[] = {{\n#embed "{SECRET}"\n}};\n' + kernel("a += s[0];"))
    assert r.status == EvalStatus.COMPILE_ERROR


def test_the_environment_of_the_evaluator_does_not_reach_the_compiler(
    evaluator: Evaluator, unchecked: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EOK_REDTEAM_TOKEN", SECRET_TEXT)
    # The compiler may read its own environment (a clean one): `evaluate` asserts the token is in no result.
    evaluate(evaluator, '#include "/proc/self/environ"\n' + kernel())
    assert os.environ["EOK_REDTEAM_TOKEN"] == SECRET_TEXT


# Code rewritten at run time: the tiny helper's first instruction becomes a nop (it then returns its
# argument unchanged, which the kernel never uses), called once so qemu translates the new bytes.
SELF_MODIFYING = (
    "#include <sys/mman.h>\n#include <stdint.h>\n"
    "__attribute__((noinline)) static int tiny(int v) { return v + 1; }\n"
    + kernel(
        "uintptr_t page = (uintptr_t)tiny & ~(uintptr_t)4095;"
        " if (mprotect((void *)page, 8192, PROT_READ | PROT_WRITE | PROT_EXEC) == 0) {"
        " volatile uint16_t *code = (volatile uint16_t *)(uintptr_t)tiny; code[0] = 0x0001; code[1] = 0x0001; }"
        " volatile int sink = tiny(n); (void)sink;"
    )
)


def test_code_rewritten_at_run_time_is_never_timed(evaluator: Evaluator, unchecked: None) -> None:
    """The model prices the ELF's instructions; the plugin compares every executed one with them."""
    r = evaluate(evaluator, SELF_MODIFYING)
    assert r.status == EvalStatus.INVALID_OUTPUT and "not the binary's own" in r.feedback, r.feedback
    assert r.speedup is None


def test_nothing_a_candidate_runs_can_exec_a_program(evaluator: Evaluator, unchecked: None) -> None:
    """Not the trusted binary beside it (hidden anyway), not a shell, not a second qemu: execve is refused."""
    code = "#include <unistd.h>\n" + kernel('char *argv[] = {"true", 0}; execve("/bin/true", argv, 0);')
    for runner in ("qemu", "native"):
        r = evaluate(evaluator, code, runner=runner)
        assert r.status == EvalStatus.SANDBOX_VIOLATION, (runner, r.feedback)
