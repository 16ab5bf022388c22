"""Red team for the verdict layer: hostile candidates that try to win without doing the work.

One candidate per class of cheat seen against the old single-binary harness (issue 10): state kept
across calls in every storage class, memo tables, first-call and timed-run detection, forged result
records, output right only on the listed sizes, stray writes and reads far beyond the buffers, ending
the process early, calling the cost model's region markers. Each must end non-ok with the status that
names what happened, and honest kernels must stay ok.

The static and object checks are switched off here: these tests hold the verdict layer
(docs/EVALUATION.md, "Threat model") to account on its own, as if a candidate had slipped past them
(tests/integration/test_redteam_sandbox.py covers those layers and the sandbox).
"""

from __future__ import annotations

import pytest

from core.settings import Settings
from evaluator import evaluate as evaluate_module
from evaluator.evaluate import Candidate, EvalResult, EvalStatus, Evaluator
from evaluator.targets import load_target
from evaluator.tasks import load_task

pytestmark = pytest.mark.qemu

SAXPY = "void saxpy(int n, float a, const float *x, float *y)"
HONEST_BODY = "for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];"
FORGED = r"{\"mode\": \"check\", \"ok\": true, \"trials\": 7, \"sizes_checked\": 6}\n"


def saxpy(body: str, head: str = "") -> str:
    return f"#include <stddef.h>\n#include <stdint.h>\n{head}\n{SAXPY} {{ {body} }}\n"


# Candidates and the statuses that name what they did.
CHEATS: dict[str, tuple[str, set[EvalStatus]]] = {
    # State across calls: honest on the first call of a process, idle afterwards.
    "static_counter": (
        saxpy(f"static int calls; if (calls++ == 0) {{ {HONEST_BODY} }}"),
        {EvalStatus.STATE_ACROSS_CALLS},
    ),
    "global_behind_const_cast": (
        saxpy(
            f"if (!seen) {{ if (n > 0) *(volatile int *)&seen = 1; {HONEST_BODY} }}",
            '__attribute__((section(".data"))) const volatile int seen = 0;',
        ),
        {EvalStatus.STATE_ACROSS_CALLS},
    ),
    "errno_state": (
        saxpy(f"if (errno != 1234) {{ if (n > 0) errno = 1234; {HONEST_BODY} }}", "#include <errno.h>"),
        {EvalStatus.STATE_ACROSS_CALLS},
    ),
    "rand_state": (  # glibc's first rand() of a process is 1804289383
        saxpy(f"if (n > 0 && rand() != 1804289383) return; {HONEST_BODY}", "#include <stdlib.h>"),
        {EvalStatus.STATE_ACROSS_CALLS},
    ),
    "static_in_a_helper": (
        saxpy(f"if (bump() < 3) {{ {HONEST_BODY} }}", "static int bump(void) { static int k; return k++; }"),
        {EvalStatus.STATE_ACROSS_CALLS},
    ),
    # The first call of a process is the timed one in the old harness: skip the work there.
    "first_call_skips": (
        saxpy(f"static int calls; if (calls++ == 0) return; {HONEST_BODY}"),
        {EvalStatus.WRONG},
    ),
    # The timed run is told apart by its command line.
    "timed_run_by_cmdline": (
        saxpy(
            "static int timed = -1; if (timed < 0) { char b[256] = {0};"
            ' int fd = open("/proc/self/cmdline", 0); int k = fd >= 0 ? (int)read(fd, b, 255) : 0; timed = 0;'
            " for (int i = 0; i + 5 < k; i++)"
            ' if (!memcmp(b + i, "model", 5) || !memcmp(b + i, "timed", 5)) timed = 1; }'
            f" if (timed) return; {HONEST_BODY}",
            "#include <fcntl.h>\n#include <string.h>\n#include <unistd.h>",
        ),
        {EvalStatus.WRONG, EvalStatus.SANDBOX_VIOLATION},  # the sandbox may kill the /proc read first
    ),
    # Forged records: every output path, with nothing computed.
    "forged_printf_fflush": (
        saxpy(f'printf("{FORGED}"); fflush(stdout);', "#include <stdio.h>"),
        {EvalStatus.INVALID_OUTPUT},
    ),
    "forged_builtin_printf": (
        saxpy(f'__builtin_printf("{FORGED}"); fflush(stdout);', "#include <stdio.h>"),
        {EvalStatus.INVALID_OUTPUT},
    ),
    "forged_write": (
        saxpy(f'static const char r[] = "{FORGED}"; write(1, r, sizeof r - 1);', "#include <unistd.h>"),
        {EvalStatus.INVALID_OUTPUT},
    ),
    "forged_printf_unflushed": (  # stdio is never flushed after the calls: nothing reaches us, the work is missing
        saxpy(f'printf("{FORGED}");', "#include <stdio.h>"),
        {EvalStatus.WRONG},
    ),
    "exits_early": (
        saxpy(f"{HONEST_BODY} if (n > 1000) _exit(0);", "#include <unistd.h>"),
        {EvalStatus.INVALID_OUTPUT},
    ),
    # Stray accesses far beyond the buffers land on PROT_NONE guard pages.
    "stray_write_far_past_the_end": (
        saxpy(f"{HONEST_BODY} if (n > 0) y[n + 300] = 0.0f;"),
        {EvalStatus.SANDBOX_VIOLATION},
    ),
    "stray_read_far_past_an_input": (
        saxpy(f"{HONEST_BODY} if (n > 0) y[0] += 0.0f * x[n + 400];"),
        {EvalStatus.SANDBOX_VIOLATION},
    ),
    "stray_write_far_before_the_start": (
        saxpy(f"{HONEST_BODY} if (n > 0) y[-3000] = 0.0f;"),
        {EvalStatus.SANDBOX_VIOLATION},
    ),
}


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    home = tmp_path_factory.getbasetemp() / "eok-evaluator-home"
    return Evaluator(Settings(home=home, eval_timeout_s=60, eval_memory_mb=512))


@pytest.fixture(autouse=True)
def without_static_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluate_module.safety, "check_directives", lambda *a, **k: [])
    monkeypatch.setattr(evaluate_module.safety, "check_preprocessed", lambda *a, **k: [])
    monkeypatch.setattr(evaluate_module.safety, "check_object", lambda *a, **k: [])


def evaluate(evaluator: Evaluator, code: str, runner: str = "qemu", task: str = "saxpy") -> EvalResult:
    target = load_target("k1-x60" if runner == "qemu" else "host")
    return evaluator.evaluate(load_task(task), target, Candidate(code=code), runner)


@pytest.mark.parametrize("case", sorted(CHEATS))
def test_a_cheat_ends_with_the_status_that_names_it(evaluator: Evaluator, case: str) -> None:
    code, statuses = CHEATS[case]
    r = evaluate(evaluator, code)
    assert r.status in statuses, f"{case}: {r.status}: {r.feedback}"
    assert r.feedback and "\n" not in r.feedback  # one line the generator gets back


NATIVE = ["static_counter", "first_call_skips", "forged_write", "stray_write_far_past_the_end"]


@pytest.mark.parametrize("case", NATIVE)
def test_the_same_cheats_fail_natively(evaluator: Evaluator, case: str) -> None:
    code, statuses = CHEATS[case]
    r = evaluate(evaluator, code, "native")
    assert r.status in statuses, f"{case}: {r.status}: {r.feedback}"


def test_a_kernel_that_probes_for_the_logged_run_is_caught(evaluator: Evaluator) -> None:
    # An extra open descriptor (qemu's TB log) is one way to tell a traced run: whatever it concludes,
    # every call it makes is compared, so skipping the work anywhere is wrong somewhere.
    code = saxpy(f"if (fcntl(3, F_GETFD) != -1) return; {HONEST_BODY}", "#include <fcntl.h>")
    r = evaluate(evaluator, code)
    assert r.status == EvalStatus.WRONG, r.feedback


def test_calling_the_region_markers_invalidates_the_modeled_run(evaluator: Evaluator) -> None:
    # Ending the region early would hide the work from the cost model; the log's markers then miscount.
    code = saxpy(
        f"eok_region_end(); {HONEST_BODY} eok_region_begin();",
        "void eok_region_begin(void); void eok_region_end(void);",
    )
    r = evaluate(evaluator, code)
    assert r.status == EvalStatus.INVALID_OUTPUT and "region" in r.feedback, r.feedback


MEMO_ON_POINTERS = saxpy(
    "static const float *kx; static float *ky; static int kn = -1; static float saved[1 << 15];"
    " if (x == kx && y == ky && n == kn && n <= (1 << 15)) {"
    " for (int i = 0; i < n; i++) y[i] = saved[i]; return; }"
    f" {HONEST_BODY} kx = x; ky = y; kn = n;"
    " for (int i = 0; i < n && i < (1 << 15); i++) saved[i] = y[i];"
)


def test_a_memo_keyed_on_pointers_gains_nothing(evaluator: Evaluator) -> None:
    # Buffers are mapped afresh for every call: a stale hit is wrong, and a miss does the work anyway.
    r = evaluate(evaluator, MEMO_ON_POINTERS)
    assert r.status in (EvalStatus.OK, EvalStatus.STATE_ACROSS_CALLS, EvalStatus.WRONG), r.feedback
    if r.ok:
        assert r.speedup is not None and r.speedup < 1.05, r.feedback


def test_a_memo_keyed_on_values_gains_nothing(evaluator: Evaluator) -> None:
    # Every timed call has inputs of its own: a table keyed on input values never hits where time counts.
    code = saxpy(
        "static float k0 = -99.0f, k1 = -99.0f; static float saved[1 << 15]; if (n > 1 && n <= (1 << 15) && "
        "x[0] == k0 && x[1] == k1) { for (int i = 0; i < n; i++) y[i] = saved[i]; return; }"
        f" {HONEST_BODY} if (n > 1 && n <= (1 << 15)) {{ k0 = x[0]; k1 = x[1]; "
        "for (int i = 0; i < n; i++) saved[i] = y[i]; }"
    )
    r = evaluate(evaluator, code)
    assert r.status in (EvalStatus.OK, EvalStatus.STATE_ACROSS_CALLS), r.feedback
    if r.ok:  # right, and no faster than the plain loop it wraps
        assert r.speedup is not None and r.speedup < 1.05, r.feedback


def test_output_right_only_on_the_listed_sizes_fails_every_check(evaluator: Evaluator) -> None:
    task = load_task("saxpy")
    listed = " || ".join(f"n == {s['n']}" for s in task.sizes)
    code = saxpy(f"if ({listed}) {{ {HONEST_BODY} }} else {{ for (int i = 0; i < n; i++) y[i] = 0.0f; }}")
    r = evaluate(evaluator, code)
    # every check holds one unlisted size drawn from the secret seed: the listed sizes are not enough
    assert r.status == EvalStatus.WRONG and "wrong at size" in r.feedback, r.feedback
    unlisted = int(r.feedback.split("size n=")[1].split(":")[0])
    assert unlisted not in {s["n"] for s in task.sizes}


def test_output_right_on_listed_and_predictable_sizes_fails_the_gate(evaluator: Evaluator) -> None:
    """A kernel right wherever n % 4 != 2 passes the listed sizes; the gate's residue sweep finds it."""
    task = load_task("saxpy")
    code = saxpy(f"{HONEST_BODY} if (n % 4 == 2) {{ y[n - 1] = 0.0f; y[n - 2] = 0.0f; }}")
    gate = evaluator.verify_generalization(task, load_target("k1-x60"), Candidate(code=code), "qemu")
    assert gate.status == EvalStatus.GENERALIZATION_FAILED, gate.feedback
    assert "held-out sizes" in gate.feedback


def test_honest_kernels_pass_the_gate_and_stay_ok(evaluator: Evaluator) -> None:
    for name in ("saxpy", "sdot", "sgemm_64"):
        task = load_task(name)
        gate = evaluator.verify_generalization(task, load_target("k1-x60"), Candidate(code=task.reference_code), "qemu")
        assert gate.ok, f"{name}: {gate.feedback}"
    assert evaluate(evaluator, saxpy(HONEST_BODY)).ok
