"""Task specs and targets: loading, validation errors that name file and field, C expressions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.errors import InvalidInput, NotFound
from core.settings import PROJECT_ROOT, Settings
from evaluator.targets import list_targets, load_target
from evaluator.tasks import (
    SUMMARY_CACHE,
    _eval_expr,
    list_tasks,
    load_task,
    parse_signature,
    scan_task_summaries,
    scan_tasks,
    task_summary,
)

GOOD = textwrap.dedent(
    """\
    name = "mytask"
    category = "blas"
    operator = "axpy"
    dtype = "f32"
    description = "y = a*x + y"
    signature = "void mytask(int n, float a, const float *x, float *y)"
    tolerance = { rtol = 1e-5, atol = 1e-6 }
    flops = "2*n"
    sizes = [ { n = 3 }, { n = 100, bench = true } ]

    [args.a]
    kind = "scalar"
    range = [-2.0, 2.0]

    [args.x]
    kind = "in"
    count = "n"

    [args.y]
    kind = "inout"
    count = "n"
    """
)
REFERENCE = "void mytask(int n, float a, const float *x, float *y) { for (int i = 0; i < n; i++) y[i] += a * x[i]; }\n"


def make_task(root: Path, toml: str = GOOD, name: str = "mytask", reference: str | None = REFERENCE) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "task.toml").write_text(toml)
    if reference is not None:
        (d / "reference.c").write_text(reference)
    return d


def test_a_good_user_task_loads_with_typed_parameters(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path))
    assert task.function_name == "mytask"
    assert [(p.name, p.role, p.ctype, p.const) for p in task.params] == [
        ("n", "size", "int", False),
        ("a", "scalar", "float", False),
        ("x", "buffer", "float", True),
        ("y", "buffer", "float", False),
    ]
    assert task.bench_index == 1 and task.bench_size == {"n": 100}
    assert task.counts == [{"x": 3, "y": 3}, {"x": 100, "y": 100}]
    assert task.flops_at() == 200.0


def test_user_task_dirs_are_listed_after_the_suite_and_found_by_name(tmp_path: Path) -> None:
    make_task(tmp_path / "mine")
    settings = Settings(home=tmp_path / "home", task_dirs=[tmp_path / "mine"])
    names = [t.name for t in list_tasks(settings)]
    assert names[-1] == "mytask" and "saxpy" in names
    assert load_task("mytask", settings).directory == (tmp_path / "mine" / "mytask").resolve()


def test_a_user_task_may_not_reuse_a_suite_name(tmp_path: Path) -> None:
    toml = GOOD.replace('name = "mytask"', 'name = "saxpy"').replace("void mytask(", "void saxpy(")
    make_task(tmp_path / "mine", toml, name="saxpy", reference=REFERENCE.replace("mytask", "saxpy"))
    with pytest.raises(InvalidInput, match=r"field 'name'.*already defined"):
        list_tasks(Settings(home=tmp_path / "home", task_dirs=[tmp_path / "mine"]))


def test_unknown_task_and_missing_task_dir_are_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="unknown task 'nope'"):
        load_task("nope", Settings(home=tmp_path))
    with pytest.raises(NotFound, match="does not exist"):
        list_tasks(Settings(home=tmp_path, task_dirs=[tmp_path / "missing"]))


def _replace(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new)


MALFORMED = {
    "missing_field": (
        _replace('signature = "void mytask(int n, float a, const float *x, float *y)"\n', ""),
        "signature",
    ),
    "typo_field": (_replace("tolerance =", "tolerence ="), "tolerence"),
    "bad_operator": (_replace('operator = "axpy"', 'operator = "axpyy"'), "operator"),
    "bad_category": (_replace('category = "blas"', 'category = "maths"'), "category"),
    "no_bench": (_replace("{ n = 100, bench = true }", "{ n = 100 }"), "sizes"),
    "two_bench": (_replace("{ n = 3 }", "{ n = 3, bench = true }"), "sizes"),
    # a size may be negative (BLAS's n <= 0, negative increments), but not a buffer's element count
    "negative_size": (_replace("{ n = 3 }", "{ n = -3 }"), "args.x.count"),
    "inconsistent_sizes": (_replace("{ n = 3 }", "{ m = 3 }"), "sizes.1"),
    "missing_count": (_replace('kind = "in"\ncount = "n"', 'kind = "in"'), "args.x.count"),
    "count_unknown_name": (_replace('kind = "in"\ncount = "n"', 'kind = "in"\ncount = "n*k"'), "args.x.count"),
    "count_bad_syntax": (_replace('kind = "in"\ncount = "n"', 'kind = "in"\ncount = "n ? 1 : 2"'), "args.x.count"),
    "arg_not_in_signature": (GOOD + '\n[args.z]\nkind = "in"\ncount = "n"\n', "args.z"),
    "const_output": (_replace('[args.x]\nkind = "in"', '[args.x]\nkind = "out"'), "args.x.kind"),
    "unbound_scalar": (GOOD.replace('[args.a]\nkind = "scalar"\nrange = [-2.0, 2.0]\n', ""), "args.a"),
    "bad_type": (_replace("float a,", "long double a,"), "signature"),
    "bad_kind": (_replace('kind = "inout"', 'kind = "both"'), "args.y.kind"),
    "reversed_range": (_replace("range = [-2.0, 2.0]", "range = [2.0, -2.0]"), "args.a.range"),
    "valid_on_input": (_replace('kind = "in"\ncount = "n"', 'kind = "in"\ncount = "n"\nvalid = "n"'), "args.x.valid"),
    "q8_block_multiple": (
        _replace('kind = "in"\ncount = "n"', 'kind = "in"\ncount = "n"\ngen = "q8_0"'),
        "args.x.gen",  # float pointer cannot hold q8_0 blocks
    ),
    "name_differs": (_replace('name = "mytask"', 'name = "other"'), "name"),
    "zero_scale": (
        _replace('kind = "in"\ncount = "n"', 'kind = "in"\ncount = "n"\nscales = [1.0, 0.0]'),
        "args.x.scales",
    ),
    "specials_without_placement": (
        _replace('kind = "in"\ncount = "n"', 'kind = "in"\ncount = "n"\nspecials = [-inf]'),
        "args.x.specials",
    ),
    "specials_with_two_placements": (
        _replace(
            'kind = "in"\ncount = "n"',
            'kind = "in"\ncount = "n"\nspecials = [inf]\nspecial_every = 4\nspecial_fraction = 0.1',
        ),
        "args.x.specials",
    ),
    "fraction_without_specials": (
        _replace('kind = "in"\ncount = "n"', 'kind = "in"\ncount = "n"\nspecial_fraction = 0.1'),
        "args.x.special_fraction",
    ),
    "fraction_above_half": (
        _replace('kind = "in"\ncount = "n"', 'kind = "in"\ncount = "n"\nspecials = [nan]\nspecial_fraction = 0.9'),
        "args.x.special_fraction",
    ),
    "exact_special_not_bool": (_replace("atol = 1e-6", "atol = 1e-6, exact_special = 3"), "tolerance.exact_special"),
    "every_one": (
        _replace('kind = "in"\ncount = "n"', 'kind = "in"\ncount = "n"\nspecials = [nan]\nspecial_every = 1'),
        "args.x.special_every",
    ),
    "negative_tolerance": (_replace("rtol = 1e-5", "rtol = -1.0"), "tolerance.rtol"),
    # NaN / inf would only fail later, inside the generated harness
    "nan_range": (_replace("range = [-2.0, 2.0]", "range = [nan, 2.0]"), "args.a.range.0"),
    "inf_range": (_replace("range = [-2.0, 2.0]", "range = [-2.0, inf]"), "args.a.range.1"),
    "inf_value": (_replace("range = [-2.0, 2.0]", "value = inf"), "args.a.value"),
    "nan_tolerance": (_replace("atol = 1e-6", "atol = nan"), "tolerance.atol"),
    "inf_tolerance": (_replace("rtol = 1e-5", "rtol = inf"), "tolerance.rtol"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_specs_name_the_file_and_the_field(tmp_path: Path, case: str) -> None:
    toml, field = MALFORMED[case]
    d = make_task(tmp_path, toml)
    with pytest.raises(InvalidInput) as info:
        load_task(d)
    message = str(info.value)
    assert str(d / "task.toml") in message
    assert f"field '{field}'" in message, message


def test_invalid_toml_syntax_names_the_file(tmp_path: Path) -> None:
    d = make_task(tmp_path, GOOD + "\nthis is = = not toml\n")
    with pytest.raises(InvalidInput, match=r"mytask/task.toml: not valid TOML"):
        load_task(d)


def test_missing_reference_names_the_file(tmp_path: Path) -> None:
    d = make_task(tmp_path, reference=None)
    with pytest.raises(InvalidInput, match=r"mytask/reference.c: missing"):
        load_task(d)


def test_reference_must_define_the_function(tmp_path: Path) -> None:
    d = make_task(tmp_path, reference="void other(void) {}\n")
    with pytest.raises(InvalidInput, match=r"field 'signature': reference.c does not define mytask"):
        load_task(d)


def test_block_formats_need_whole_blocks(tmp_path: Path) -> None:
    toml = GOOD.replace("const float *x", "const uint8_t *x").replace(
        'kind = "in"\ncount = "n"', 'kind = "in"\ncount = "34*n + 1"\ngen = "q8_0"'
    )
    with pytest.raises(InvalidInput, match=r"field 'args.x.count': 103 at sizes.0 is not a multiple of 34"):
        load_task(make_task(tmp_path, toml, reference=REFERENCE.replace("const float *x", "const uint8_t *x")))


@pytest.mark.parametrize(
    ("signature", "ret", "params"),
    [
        ("void f(int n, const float *x)", "void", [("n", "int", False, False), ("x", "float", True, True)]),
        ("float g(size_t n, float const *restrict a, float *__restrict b)", "float",
         [("n", "size_t", False, False), ("a", "float", True, True), ("b", "float", True, False)]),
        ("int h(int n, uint8_t x[], int8_t *const y);", "int",
         [("n", "int", False, False), ("x", "uint8_t", True, False), ("y", "int8_t", True, False)]),
        ("void k(void)", "void", []),
    ],
)  # fmt: skip
def test_parse_signature(signature: str, ret: str, params: list[tuple[str, str, bool, bool]]) -> None:
    got_ret, _, got = parse_signature(signature)
    assert got_ret == ret
    assert [(p.name, p.ctype, p.pointer, p.const) for p in got] == params


@pytest.mark.parametrize(
    ("expr", "env", "want"),
    [
        ("(n+31)/32*18", {"n": 33}, 36),
        ("-7/2", {}, -3),  # C truncates toward zero
        ("-7%3", {}, -1),  # and the remainder keeps the dividend's sign
        ("min(n, 4) + max(n, 4)", {"n": 9}, 13),
        ("n << 2 >> 1", {"n": 5}, 10),
    ],
)
def test_count_expressions_follow_c_integer_semantics(expr: str, env: dict[str, int], want: int) -> None:
    assert _eval_expr(expr, env) == want


@pytest.mark.parametrize("expr", ["n ? 1 : 2", "n && 1", "n // 2", "__import__('os')", "n.real", ""])
def test_count_expressions_reject_anything_else(expr: str) -> None:
    with pytest.raises(ValueError):
        _eval_expr(expr, {"n": 1})


def test_every_bundled_task_loads() -> None:
    tasks = list_tasks(Settings())
    assert len(tasks) >= 40
    assert len({t.name for t in tasks}) == len(tasks)
    for t in tasks:
        assert t.sizes[t.bench_index] == t.bench_size
        assert all(set(c) == {p.name for p in t.buffers} for c in t.counts)


def test_targets_carry_the_documented_numbers() -> None:
    targets = {t.key: t for t in list_targets()}
    assert set(targets) >= {"k1-x60", "k3-x100", "k3-a100", "host"}
    k1 = targets["k1-x60"]
    assert (k1.vlen, k1.dlen, k1.elen, k1.issue, k1.l1d_kb, k1.l2_kb, k1.cache_line) == (256, 128, 64, 2, 32, 512, 64)
    assert k1.mcpu == "spacemit-x60" and k1.modeled_exact and not k1.out_of_order
    assert "vlen=256" in k1.qemu_cpu and "vext_spec=v1.0" in k1.qemu_cpu
    assert targets["k3-a100"].vlen == 1024 and "vlen=1024" in targets["k3-a100"].qemu_cpu
    assert targets["k3-x100"].out_of_order and targets["k3-x100"].issue == 4
    for t in targets.values():
        if t.arch == "riscv64":
            # qemu-user 7.2 cannot execute Zicond: emulator builds must leave it out
            assert "zicond" not in t.emulator_march and t.sources


def test_isa_flags_per_build_kind() -> None:
    k1 = load_target("k1-x60")
    assert k1.isa_flags("board") == ["-mcpu=spacemit-x60"]
    emu = k1.isa_flags("emulator")
    assert emu[0].startswith("-march=rv64gcv") and "zvl256b" in emu[0] and emu[1] == "-mtune=spacemit-x60"
    assert load_target("k3-x100").isa_flags("board") == ["-march=rva23u64_zvl256b", "-mtune=spacemit-x60"]


def test_unknown_target_lists_the_known_ones() -> None:
    with pytest.raises(NotFound, match="k1-x60"):
        load_target("k9")


def test_one_broken_task_directory_does_not_hide_the_others(tmp_path: Path) -> None:
    make_task(tmp_path / "mine")
    make_task(tmp_path / "mine", _replace("range = [-2.0, 2.0]", "range = [nan, 2.0]"), name="broken")
    (tmp_path / "mine" / "broken" / "task.toml").write_text(
        _replace('name = "mytask"', 'name = "broken"').replace("range = [-2.0, 2.0]", "range = [nan, 2.0]")
    )
    settings = Settings(home=tmp_path / "home", task_dirs=[tmp_path / "mine"])
    tasks, broken = scan_tasks(settings)
    assert "mytask" in [t.name for t in tasks] and "saxpy" in [t.name for t in tasks]
    [(directory, reason)] = broken
    assert directory.name == "broken" and "task.toml: field 'args.a.range.0'" in reason
    with pytest.raises(InvalidInput, match=r"args\.a\.range\.0"):  # the strict form still names it
        list_tasks(settings)


def test_a_folder_in_the_current_directory_does_not_shadow_a_suite_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    toml = GOOD.replace('name = "mytask"', 'name = "saxpy"').replace("void mytask(", "void saxpy(")
    make_task(tmp_path, toml, name="saxpy", reference=REFERENCE.replace("mytask", "saxpy"))
    monkeypatch.chdir(tmp_path)
    settings = Settings(home=tmp_path / "home")
    task = load_task("saxpy", settings)
    assert task.directory != (tmp_path / "saxpy").resolve()  # the suite's saxpy wins: a name is a name
    assert "also holds a task" in caplog.text and "./saxpy" in caplog.text
    assert load_task("./saxpy", settings).directory == (tmp_path / "saxpy").resolve()  # a path is a path
    make_task(tmp_path, name="mytask")
    assert load_task("mytask", settings).directory == (tmp_path / "mytask").resolve()  # no such name: the folder


def test_a_reference_that_does_not_compile_is_a_task_error(tmp_path: Path) -> None:
    from evaluator.toolchain import Toolchain

    task = load_task(make_task(tmp_path, reference=REFERENCE.replace("y[i] +=", "y[i] += undefined_name +")))
    code = REFERENCE.replace("mytask", "mytask")
    with pytest.raises(InvalidInput) as info:
        Toolchain(tmp_path / "objs").build(task, load_target("host"), "host", code, [], tmp_path)
    message = str(info.value)
    assert "reference.c:1:" in message and "does not compile" in message and "undefined_name" in message


def test_task_descriptions_keep_their_brackets(tmp_path: Path) -> None:
    toml = _replace('description = "y = a*x + y"', 'description = "y[i] += a*x[i], a in [lo, hi], [bold]x"')
    d = make_task(tmp_path, toml)
    out = subprocess.run(
        [sys.executable, "-m", "service.cli", "tasks", "show", str(d)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(PROJECT_ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert "y[i] += a*x[i], a in [lo, hi], [bold]x" in out.stdout


def test_task_files_with_any_bytes_are_named_and_listed_as_broken(tmp_path: Path) -> None:
    make_task(tmp_path / "mine")
    bad_ref = make_task(tmp_path / "mine", _replace('name = "mytask"', 'name = "badref"'), name="badref")
    (bad_ref / "reference.c").write_bytes(REFERENCE.encode() + b"\n// \xff\xfe\n")
    bad_toml = make_task(tmp_path / "mine", name="badtoml")
    (bad_toml / "task.toml").write_bytes(b'name = "badtoml"\n# \xc3\x28\n')
    tasks, broken = scan_tasks(Settings(home=tmp_path / "home", task_dirs=[tmp_path / "mine"]))
    assert "mytask" in [t.name for t in tasks] and "saxpy" in [t.name for t in tasks]
    reasons = {directory.name: reason for directory, reason in broken}
    assert "badref/reference.c: not UTF-8 text (byte 0xff at offset" in reasons["badref"]
    assert "badtoml/task.toml: not UTF-8 text (byte 0xc3 at offset 19)" in reasons["badtoml"]
    with pytest.raises(InvalidInput, match="not UTF-8 text"):
        load_task(bad_ref)


def test_task_summaries_are_cached_and_follow_every_edit(tmp_path: Path) -> None:
    """`tasks list` reads summaries cached per directory; an edit, a broken file or a fixed one shows at once,
    and the answer always equals a full scan's."""
    mine = tmp_path / "mine"
    task = make_task(mine)
    settings = Settings(home=tmp_path / "home", task_dirs=[mine])

    def full_scan() -> list[dict[str, object]]:
        return [task_summary(t) for t in scan_tasks(settings)[0]]

    first, broken = scan_task_summaries(settings)
    assert first == full_scan() and not broken
    cache = json.loads((tmp_path / "home" / "cache" / SUMMARY_CACHE).read_text())["dirs"]
    assert str(task) not in cache and len(cache) == len(first) - 1  # just written: parsed again next time
    for f in task.iterdir():
        os.utime(f, (f.stat().st_mtime - 10, f.stat().st_mtime - 10))
    assert scan_task_summaries(settings) == (first, [])
    cache = json.loads((tmp_path / "home" / "cache" / SUMMARY_CACHE).read_text())["dirs"]
    assert cache[str(task)]["summary"] == next(s for s in first if s["name"] == "mytask")
    assert scan_task_summaries(settings) == (first, [])  # from the cache

    (task / "task.toml").write_text(GOOD.replace("n = 100, bench = true", "n = 4096, bench = true"))
    edited, _ = scan_task_summaries(settings)
    assert next(s for s in edited if s["name"] == "mytask")["bench_size"] == {"n": 4096} and edited == full_scan()

    (task / "reference.c").unlink()
    listed, broken = scan_task_summaries(settings)
    assert "mytask" not in [s["name"] for s in listed] and "reference.c: missing" in broken[0][1]
    (task / "reference.c").write_text(REFERENCE)
    assert scan_task_summaries(settings) == (edited, [])

    (tmp_path / "home" / "cache" / SUMMARY_CACHE).write_text("{not json")  # a damaged cache is only slower
    assert scan_task_summaries(settings) == (edited, [])
