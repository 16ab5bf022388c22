"""The run-time sandbox against real hostile programs (built here with clang-22 for the host)."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from evaluator.sandbox import Limits, RunOutput, is_root, network_isolation, run, seccomp_available


def build(tmp_path: Path, name: str, body: str) -> Path:
    src = tmp_path / f"{name}.c"
    src.write_text(
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n"
        "#include <sys/socket.h>\n#include <netinet/in.h>\n#include <arpa/inet.h>\n" + body
    )
    subprocess.run(["clang-22", "-O1", "-o", str(tmp_path / name), str(src)], check=True)
    return tmp_path / name


def processes_of(uid: int | None) -> list[int]:
    """Live processes of `uid` (zombies are dead already; PID 1 reaps them in its own time)."""
    if uid is None:
        return []
    pids = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(ln.split(":", 1) for ln in status.read_text().splitlines() if ":" in ln)
        except OSError:
            continue
        if int(fields["Uid"].split()[1]) == uid and not fields["State"].strip().startswith("Z"):
            pids.append(int(status.parent.name))
    return pids


def sandboxed(tmp_path: Path, name: str, body: str, **limits: object) -> RunOutput:
    binary = build(tmp_path, name, body)
    return run([f"./{binary.name}"], tmp_path, Limits(**limits))  # type: ignore[arg-type]


def test_process_creation_outside_the_link_step_is_a_sandbox_violation(tmp_path: Path) -> None:
    out = sandboxed(tmp_path, "forker", 'int main(void) { puts("before"); fflush(stdout); fork(); puts("after"); }')
    if seccomp_available():
        assert out.violation and out.signal == signal.SIGSYS
        assert "before" in out.stdout and "after" not in out.stdout
    assert processes_of(out.uid) == []


def test_a_fork_bomb_where_spawning_is_allowed_is_contained_and_fully_killed(tmp_path: Path) -> None:
    t0 = time.monotonic()
    body = "int main(void) { for (;;) fork(); }"
    out = sandboxed(tmp_path, "bomb", body, wall_s=4, nproc=40, profile="link")
    assert time.monotonic() - t0 < 4 + 5
    assert out.timed_out and out.limit_hit == "time"
    assert processes_of(out.uid) == []  # nothing of the sandbox uid survives
    assert is_root() == (out.uid is not None)


def test_a_child_that_leaves_the_process_group_is_still_killed(tmp_path: Path) -> None:
    body = 'int main(void) { if (fork() == 0) { setsid(); sleep(100); } else { puts("parent done"); } return 0; }'
    out = sandboxed(tmp_path, "escape", body, wall_s=30, profile="link")
    assert "parent done" in out.stdout and out.returncode == 0
    assert out.wall_s < 5  # not held up by the child keeping the pipes open
    time.sleep(0.2)
    assert processes_of(out.uid) == []


def test_an_output_flood_is_cut_and_killed(tmp_path: Path) -> None:
    body = 'int main(void) { for (;;) fputs("{\\"mode\\": \\"check\\", \\"ok\\": true}\\n", stdout); }'
    t0 = time.monotonic()
    out = sandboxed(tmp_path, "flood", body, wall_s=30, output_bytes=4096, flood_bytes=1 << 20)
    assert out.flooded and out.truncated and out.limit_hit == "output"
    assert len(out.stdout) <= 4096
    assert time.monotonic() - t0 < 10  # killed at the flood limit, not at the wall limit


def test_memory_beyond_the_address_space_limit_is_refused(tmp_path: Path) -> None:
    body = (
        'int main(void) { char *volatile p = malloc((size_t)1 << 30); if (!p) { puts("refused"); return 3; }'
        ' memset(p, 1, (size_t)1 << 30); printf("got %d\\n", p[12345]); return 0; }'
    )
    out = sandboxed(tmp_path, "hog", body, memory_mb=256)
    assert out.returncode == 3 and "refused" in out.stdout


def test_cpu_time_is_limited_even_with_a_long_wall_limit(tmp_path: Path) -> None:
    t0 = time.monotonic()
    out = sandboxed(
        tmp_path, "spin", "int main(void) { volatile unsigned long i = 0; for (;;) i++; }", wall_s=60, cpu_s=1
    )
    assert out.limit_hit == "cpu" and not out.timed_out
    assert time.monotonic() - t0 < 15


def test_no_network(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    body = (
        "int main(void) { struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_port = htons(PORT);"
        ' a.sin_addr.s_addr = inet_addr("127.0.0.1"); int s = socket(AF_INET, SOCK_STREAM, 0);'
        ' puts(connect(s, (struct sockaddr *)&a, sizeof a) == 0 ? "connected" : "no network"); return 0; }'
    ).replace("PORT", str(port))
    try:
        listener.settimeout(0.5)
        out = sandboxed(tmp_path, "net", body)
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody connected
    finally:
        listener.close()
    assert "connected" not in out.stdout
    if seccomp_available():  # socket() is not on the allow-list: killed before it gets a descriptor
        assert out.violation
    elif network_isolation() == "none":  # no namespaces here: the run must say so
        assert not out.network_isolated
    else:
        assert out.network_isolated and "no network" in out.stdout


def test_no_writes_to_the_run_directory_and_no_secrets_to_read(tmp_path: Path) -> None:
    secret = Path("/root/eok-sandbox-test-secret")
    if is_root():
        secret.write_text("top secret")
        secret.chmod(0o600)
    body = (
        'int main(void) { FILE *f = fopen("planted.txt", "w"); puts(f ? "wrote" : "read-only");'
        ' FILE *s = fopen("/root/eok-sandbox-test-secret", "r"); char b[64] = {0};'
        ' if (s && fgets(b, sizeof b, s)) printf("leaked %s\\n", b); else puts("no secret");'
        ' FILE *h = fopen("/etc/hostname", "r"); puts(h ? "toolchain files readable" : "no /etc");'
        " return 0; }"
    )
    try:
        out = sandboxed(tmp_path, "files", body)
    finally:
        secret.unlink(missing_ok=True)
    assert "no secret" in out.stdout and "leaked" not in out.stdout
    assert "toolchain files readable" in out.stdout  # /etc stays: only the places secrets live are hidden
    if is_root():  # a fresh uid cannot write into our directory
        assert out.files_hidden
        assert "read-only" in out.stdout and not (tmp_path / "planted.txt").exists()


def test_only_its_own_processes_are_visible(tmp_path: Path) -> None:
    body = (
        '#include <dirent.h>\nint main(void) { DIR *d = opendir("/proc"); struct dirent *e; int n = 0;'
        " while ((e = readdir(d))) n += e->d_name[0] >= '0' && e->d_name[0] <= '9'; printf(\"%d\\n\", n); }"
    )
    out = sandboxed(tmp_path, "ps", body)
    if is_root():
        assert out.stdout.strip() == "1"  # hidepid=2: only itself


def test_the_environment_is_not_inherited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-for-test")
    body = 'int main(void) { const char *k = getenv("OPENAI_API_KEY"); puts(k ? k : "no key"); return 0; }'
    out = sandboxed(tmp_path, "env", body)
    assert out.stdout.strip() == "no key"
