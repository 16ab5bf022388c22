"""What a finished run leaves for people: the best kernel's code, its lineage, a plot and a short report."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluator.toolchain import CLANG, measured_build_flags
from knowledge.store import GraphStore

if TYPE_CHECKING:
    from agent.types import RunOutcome

_LINEAGE = """
MATCH path = (best:Experience {id: $id})-[:DERIVED_FROM*0..50]->(root:Experience)
WHERE NOT (root)-[:DERIVED_FROM]->()
WITH nodes(path) AS chain LIMIT 1
UNWIND range(size(chain) - 1, 0, -1) AS i
WITH chain[i] AS x, size(chain) - 1 - i AS depth
OPTIONAL MATCH (x)-[:APPLIED]->(t:Thought)
OPTIONAL MATCH (i:Idea)-[:HAS_THOUGHT]->(t)
OPTIONAL MATCH (t)-[:EVIDENCED_BY]->(c:Commit)
WITH depth, x, t, i, collect(c {.sha, .repo, .title})[..3] AS commits
OPTIONAL MATCH (src:Experience)-[tr:TRANSFERS_TO]->(x)
RETURN depth, x.id AS experience, x.status AS status, x.speedup AS speedup,
       x.competent_speedup AS competent_speedup, x.competent_cycles AS competent_cycles, x.summary AS summary,
       t.id AS thought, t.title AS thought_title, t.technique AS technique,
       i.id AS idea, i.title AS idea_title, commits,
       CASE WHEN tr IS NULL THEN null ELSE {experience: src.id, task: src.task_id, target: src.target_key,
            speedup: src.speedup, decision: tr.decision, applied: tr.applied, rescaled: tr.rescaled, via: tr.via}
       END AS transfer
ORDER BY depth
"""


_CANDIDATES = """
MATCH (x:Experience {run_id: $run})
OPTIONAL MATCH (i:Idea {id: x.direction})
RETURN x.id AS id, x.step AS step, x.parent_id AS parent, x.status AS status, x.speedup AS speedup,
       x.competent_speedup AS competent_speedup, x.competent_cycles AS competent_cycles,
       x.baseline_cycles AS baseline_cycles, x.candidate_cycles AS candidate_cycles, x.seconds AS seconds,
       x.speedup_over_library AS speedup_over_library, x.library_cycles AS library_cycles,
       x.library_label AS library_label,
       x.variant AS variant, x.cflags AS cflags, x.feedback AS feedback, x.measurement AS measurement,
       x.direction AS direction, i.title AS direction_title, x.generator AS generator, x.code AS code
ORDER BY x.step
"""

_REPO_URLS = "MATCH (r:Repository) WHERE r.name IN $names AND r.url IS NOT NULL RETURN r.name AS name, r.url AS url"

# What the modeled figures are, in one place for the report and the CLI.
MODELED_CAVEAT = (
    "Cycles are modeled, not measured: qemu runs the kernel and every executed block is priced with LLVM's "
    "spacemit-x60 scheduling model (llvm-mca) plus a cache/DRAM model (docs/COSTMODEL.md). A board over "
    "SSH measures real cycles and always wins over these figures. The model's measured error on published "
    "kernels of the same core, and the assumed figures a result rests on, follow each modeled evaluation "
    '(docs/COSTMODEL.md "Error bars"; python scripts/bench_fidelity.py reproduces them).'
)


# Below this a "win" is a few cycles of a deterministic model (relu: 274,300 vs 274,303 cycles), not a reason to
# replace a reference everyone can read.
MIN_GAIN = 1.01


def improved(speedup: float | None) -> bool:
    """A run only has a kernel worth using when its best beats the baseline by at least 1%."""
    return bool(speedup and speedup >= MIN_GAIN)


def yardstick(
    competent: float | None, plain: float | None, library: float | None = None, label: str | None = None
) -> str:
    """One yardstick on every surface: the speedup over the competent baseline, the plain -O3 one beside it,
    and over a built library's own routine where one was configured ("1.05x over openblas@0123456789")."""
    if not plain:
        return "-"
    text = f"{competent:.2f}x over competent, {plain:.2f}x over -O3" if competent else f"{plain:.2f}x over -O3"
    return text + (f", {library:.2f}x over {label}" if library and label else "")


def over_baseline(x: Any) -> float | None:
    """The speedup a verdict is judged on: over the competent baseline when the task has one (anyone can
    build the reference with the FP flags its tolerance allows), else over the plain clang -O3 one."""
    get = x.get if isinstance(x, dict) else lambda k: getattr(x, k, None)
    return get("competent_speedup") or get("speedup")


def lineage(store: GraphStore, best_id: str) -> list[dict[str, Any]]:
    """The chain of experiences that led to the best kernel, root first, with thoughts, ideas and commits.

    A step keeps its thought (and the thought's commits) only when that knowledge shaped the code: the LLM
    had the thought in its prompt, or the offline generator turned a knob that serves the thought's
    technique. A step whose change came from a fallback move credits no thought."""
    rows = store.read(_LINEAGE, id=best_id)
    shaped, from_code = _shaping_thoughts(store, rows)
    urls = _repo_urls(store, rows)
    for row in rows:
        row["from_code"] = from_code.get(row["experience"]) or {}
        if not shaped.get(row["experience"]):
            row.update(thought=None, thought_title=None, technique=None, idea=None, idea_title=None, commits=[])
        for c in row.get("commits") or []:
            c["url"] = _commit_url(urls.get(c.get("repo")), c.get("sha", ""))
    return rows


def _shaping_thoughts(
    store: GraphStore, rows: list[dict[str, Any]]
) -> tuple[dict[str, bool], dict[str, dict[str, Any]]]:
    ids = [r["experience"] for r in rows]
    found = store.read(
        "MATCH (x:Experience) WHERE x.id IN $ids OPTIONAL MATCH (p:Experience {id: x.parent_id}) "
        "RETURN x.id AS id, x.generator AS generator, x.variant AS variant, p.variant AS parent, "
        "x.task_id AS task, x.target_key AS target",
        ids=ids,
    )
    by_id = {f["id"]: f for f in found}
    shaped = {r["experience"]: _shaped(by_id.get(r["experience"]), r.get("technique")) for r in rows}
    # What a mined kernel's structure set in the code (shown beside the thought it credits).
    from_code = {i: _loads(f.get("variant")).get("from_code") or {} for i, f in by_id.items()}
    return shaped, from_code


def _shaped(x: dict[str, Any] | None, technique: str | None) -> bool:
    if x is None or not technique:
        return False
    if not str(x.get("generator") or "").startswith("offline"):
        return True  # an LLM candidate: the thought and its example code were in the prompt
    variant, parent = _loads(x.get("variant")), _loads(x.get("parent"))
    if not variant.get("family"):
        return False
    if variant.get("from_code"):
        return True  # the thought's mined code set the starting knobs (agent.offline.hints)
    try:
        from agent.offline import OfflineGenerator
        from agent.offline.base import Technique
        from evaluator.targets import load_target
        from evaluator.tasks import load_task

        gen = OfflineGenerator(load_task(x["task"]), load_target(x["target"]), start="plain")
        knobs = {k.name: k for k in gen.knobs(variant["family"])}
        tech = Technique(technique)
    except Exception:  # a task or family no longer known: no claim is better than a wrong one
        return False
    if parent.get("family") != variant["family"]:  # a family took over: it implements the technique
        return tech.value == "vectorize" or any(k.serves(tech) for k in knobs.values())
    changed = [n for n, v in (variant.get("knobs") or {}).items() if (parent.get("knobs") or {}).get(n) != v]
    return any(knobs[n].serves(tech) for n in changed if n in knobs)


def _repo_urls(store: GraphStore, rows: list[dict[str, Any]]) -> dict[str, str]:
    names = sorted({c.get("repo") for r in rows for c in r.get("commits") or [] if c.get("repo")})
    return {u["name"]: u["url"] for u in store.read(_REPO_URLS, names=names)} if names else {}


def _commit_url(remote: str | None, sha: str) -> str | None:
    """A browsable link for the hosts whose commit pages we know (GitHub, GitLab, Codeberg)."""
    if not remote or not sha:
        return None
    m = re.match(r"(?:https?://|git@)(github\.com|gitlab\.com|codeberg\.org)[/:](.+?)(?:\.git)?/?$", remote)
    if not m:
        return None
    sep = "/-/commit/" if m.group(1) == "gitlab.com" else "/commit/"
    return f"https://{m.group(1)}/{m.group(2)}{sep}{sha}"


def candidates(store: GraphStore, run_id: str) -> list[dict[str, Any]]:
    """Every evaluated candidate of a run, in order, with the change from its parent and why it ended so."""
    rows = store.read(_CANDIDATES, run=run_id)
    by_id = {r["id"]: r for r in rows}
    for r in rows:
        parent = by_id.get(r["parent"]) if r["parent"] else None
        r["parent_step"] = parent["step"] if parent else None
        r["change"] = _change(_loads(parent["variant"]) if parent else {}, _loads(r["variant"]), parent, r)
        r["bound"] = _bound(r.get("feedback") or "")
        r["reason"] = _reason(r)
    return rows


def _loads(text: str | None) -> dict[str, Any]:
    try:
        return json.loads(text or "{}") or {}
    except ValueError:
        return {}


def _change(before: dict[str, Any], after: dict[str, Any], parent: dict | None, row: dict) -> str:
    parts = []
    if after.get("family") and after.get("family") != before.get("family"):
        parts.append(f"family {before.get('family') or 'reference'} -> {after['family']}")
    old = before.get("knobs") or {}
    for name, value in (after.get("knobs") or {}).items():
        if after.get("family") == before.get("family") and old.get(name) != value:
            parts.append(f"{name} {old.get(name)} -> {value}")
    flags_before = set(parent["cflags"] or []) if parent else set()
    added = [f for f in row.get("cflags") or [] if f not in flags_before]
    if added:
        parts.append("flags +" + " +".join(added))
    if not parts:
        return "rewritten by the LLM" if not str(row.get("generator") or "").startswith("offline") else "-"
    return "; ".join(parts)


def _bound(feedback: str) -> str | None:
    m = re.search(r"\b(compute|L2|DRAM)-bound\b", feedback)
    return m.group(1) if m else None


def _reason(r: dict[str, Any]) -> str:
    if r["status"] == "ok":
        if improved(over_baseline(r)):
            return "faster than the baseline"
        return "correct, within 1% of the baseline" if (over_baseline(r) or 0) >= 1 / MIN_GAIN else "correct, slower"
    first = (r.get("feedback") or "").strip().splitlines()
    return first[0][:160] if first else str(r["status"])


def write_artifacts(directory: Path, outcome: RunOutcome) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    paths: dict[str, str] = {}
    stale = directory / "best.c"
    if stale.exists() and not (outcome.best and improved(over_baseline(outcome.best))):
        stale.unlink()  # a resumed run that no longer has a winner must not leave one behind
    _write_candidates(directory, outcome)
    paths["candidates"] = str(directory / CANDIDATES_DIR)
    if outcome.best and outcome.best.code and improved(over_baseline(outcome.best)):
        code = directory / "best.c"
        code.write_text(library_source(outcome))
        paths["code"] = str(code)
    if outcome.history:
        paths["plot"] = str(_plot(directory / "speedup.png", outcome))
    paths["record"] = str(_write_record(directory / RECORD_NAME, outcome))
    report = directory / "report.md"
    tmp = report.with_suffix(".md.tmp")
    tmp.write_text(_markdown(outcome, paths))
    tmp.replace(report)  # never a half-written report, even when interrupted
    paths["report"] = str(report)
    return paths


RECORD_NAME = "run.json"


def run_record(outcome: RunOutcome) -> dict[str, Any]:
    """run.json: what a run folder holds for programs (`eok export` reads it): the run, its best kernel's
    figures and the thoughts it came from, so the folder speaks for itself without the graph."""
    r, b = outcome.run, outcome.best
    best = None
    if b and b.code and b.speedup:
        best = {
            # Below MIN_GAIN over the baseline the report proposes no kernel; an export may still be worth it
            # against a library's kernel, which its own benchmark decides.
            "improved": improved(over_baseline(b)),
            "experience": b.id,
            "step": b.step,
            "code_file": candidate_file(b.step),
            "speedup": b.speedup,
            "competent_speedup": b.competent_speedup,
            # Present once the task maps to a configured library (issue 21): the speedup over its kernel.
            "library_speedup": getattr(b, "speedup_over_library", None),
            "library_label": getattr(b, "library_label", None),
            "baseline_cycles": b.baseline_cycles,
            "competent_cycles": b.competent_cycles,
            "candidate_cycles": b.candidate_cycles,
            "measurement": b.measurement,
            "cflags": list(b.cflags),
            "build_flags": measured_flags(outcome),  # clang's flags as measured, without the compiler and file
            "feedback": b.feedback,
        }
    return {
        "run": r.id,
        "task": r.task_id,
        "task_path": _loads(r.settings).get("task_path"),
        "target": r.target_key,
        "generator": r.generator,
        "status": str(r.status),
        "evaluations": r.evaluations,
        "best": best,
        "lineage": [
            {k: row.get(k) for k in ("depth", "experience", "thought", "thought_title", "technique", "idea_title")}
            | {"speedup": row.get("speedup"), "competent_speedup": row.get("competent_speedup")}
            for row in outcome.lineage
        ]
        if best
        else [],
    }


def _write_record(path: Path, outcome: RunOutcome) -> Path:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(run_record(outcome), indent=2) + "\n")
    tmp.replace(path)
    return path


def candidate_file(step: int) -> str:
    """Where a run folder keeps the code of its candidate `step`, exactly as it was evaluated."""
    return f"{CANDIDATES_DIR}/{step:03d}.c"


CANDIDATES_DIR = "candidates"


def _write_candidates(directory: Path, outcome: RunOutcome) -> None:
    """Every evaluated candidate's code, byte for byte what the evaluator compiled (`eok eval` takes it)."""
    for c in outcome.candidates:
        if c.get("code"):
            path = directory / candidate_file(c["step"])
            path.parent.mkdir(exist_ok=True)
            if not path.exists() or path.read_text() != c["code"]:
                path.write_text(c["code"])


def library_source(outcome: RunOutcome) -> str:
    """best.c: the kernel as a file a library can compile to the code that was measured.

    The flags the run measured it with are part of the kernel (fir5's best is 0.87x of the reference
    without them), so the file carries its build line and refuses to compile without the macro that line
    defines; the prototype and headers the evaluator force-included are written out."""
    b, r = outcome.best, outcome.run
    assert b is not None
    argv = library_build_line(outcome)
    guard = argv[-3].removeprefix("-D")
    line = shlex.join(argv)
    note = f"\n * {r.baseline_note}." if r.baseline_note else ""
    head = (
        f"/* EoK run {r.id}: {_x(b.competent_speedup)} over the competent baseline, {_x(b.speedup)} over clang -O3 "
        f"({b.measurement}, {r.task_id} on {r.target_key}).{note}\n"
        " * Build it as it was measured (the flags are part of the kernel; other flags give other code):\n"
        f" *   {line}\n"
        f" * The same code as evaluated, for `eok eval --candidate`: {candidate_file(b.step)} */\n"
        f"#ifndef {guard}\n"
        '#error "build best.c with the line at its top: the flags it was measured with are part of the kernel"\n'
        "#endif\n"
    )
    return head + _prelude(r.task_id, _loads(r.settings).get("task_path")) + b.code


def library_build_line(outcome: RunOutcome) -> list[str]:
    """The command that builds best.c as it was measured; its macro (named after the flags) lets it compile."""
    flags = measured_flags(outcome)
    guard = "EOK_FLAGS_" + hashlib.sha256(" ".join(flags).encode()).hexdigest()[:8].upper()
    return [CLANG, *flags, f"-D{guard}", "-c", "best.c"]


def measured_flags(outcome: RunOutcome) -> list[str]:
    """The compiler flags (besides clang's name, the macro and the file) the best kernel was measured with."""
    from core.settings import get_settings
    from evaluator.targets import load_target

    r, b = outcome.run, outcome.best
    assert b is not None
    runner = _loads(r.settings).get("runner") or "qemu"
    # As the runners build (evaluator/runners): qemu for the emulator's ISA subset, a board its full ISA,
    # native for this host whatever target was named.
    kind = {"qemu": "emulator", "native": "host"}.get(runner, "board")
    if runner == "ssh" and get_settings().ssh_board_is_emulator:
        kind = "emulator"
    target = load_target("host" if kind == "host" else r.target_key)
    return measured_build_flags(target, kind, list(b.cflags))  # type: ignore[arg-type]


def _prelude(task_id: str, task_path: str | None) -> str:
    """The headers and prototype the evaluator force-included into the candidate (harness.candidate_prelude)."""
    from evaluator.harness import candidate_prelude
    from evaluator.tasks import load_task

    try:
        return candidate_prelude(load_task(task_path or task_id))
    except Exception:  # the task is gone: the code alone (it may lack a header the evaluator gave it)
        return ""


def _plot(path: Path, outcome: RunOutcome) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = list(range(1, len(outcome.history) + 1))
    ys = [h or 0.0 for h in outcome.history]
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=110)
    ax.step(xs, ys, where="post", color="#1f6feb", linewidth=2, label="best so far")
    ok = [(x, s) for x, s in zip(xs, outcome.evaluated, strict=False) if s]
    failed = [x for x, s in zip(xs, outcome.evaluated, strict=False) if not s]
    if ok:
        ax.scatter(*zip(*ok, strict=True), s=18, color="#2da44e", zorder=3, label="correct candidate")
    if failed:
        ax.scatter(failed, [0.0] * len(failed), marker="x", s=22, color="#cf222e", zorder=3, label="failed candidate")
    ax.axhline(1.0, color="#888", linestyle="--", linewidth=1, label="plain baseline (clang -O3)")
    best = outcome.best
    if best and best.speedup and best.competent_speedup:
        # Both baselines time the same reference: the competent one sits at a fixed plain speedup.
        level = best.speedup / best.competent_speedup
        ax.axhline(level, color="#9a6700", linestyle=":", linewidth=1.5, label="competent baseline")
    ax.set_xlabel("evaluations")
    ax.set_ylabel("speedup over clang -O3")
    ax.set_title(f"{outcome.run.task_id} on {outcome.run.target_key} ({outcome.run.generator})")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _markdown(o: RunOutcome, paths: dict[str, str]) -> str:
    r = o.run
    lines = [
        f"# EoK run {r.id}",
        "",
        "| task | target | generator | status | best speedup: competent / plain | evaluations | LLM calls "
        "| LLM tokens |",
        "|---|---|---|---|---|---|---|---|",
        f"| {r.task_id} | {r.target_key} | {r.generator} | {r.status} | {_x(r.best_competent_speedup)} / "
        f"{_x(r.best_speedup)} | {r.evaluations} / {r.budget} | {r.llm_calls} | {r.llm_tokens} |",
        "",
        *(
            [
                f"Over the library: {_x(r.best_speedup_over_library)} over {r.library_label} (its own routine, timed "
                'like the baselines: docs/EVALUATION.md, "The library as a baseline").',
                "",
            ]
            if r.best_speedup_over_library and r.library_label
            else []
        ),
        "Competent: over the reference built with the FP flags the task's tolerance allows; plain: over the "
        'reference at clang -O3 (docs/TASKS.md, "Two baselines").',
        "",
        *_verdict(o, paths),
        *_baselines(o),
        *_directions(o),
        *_candidate_table(o),
        *_lineage_table(o),
        *_reproduce(o, paths),
    ]
    if "plot" in paths:
        lines += ["![best speedup over evaluations](speedup.png)", ""]
    return "\n".join(lines) + "\n"


def _verdict(o: RunOutcome, paths: dict[str, str]) -> list[str]:
    b = o.best
    if not (b and improved(over_baseline(b))):
        best = f" (best correct candidate {over_baseline(b):.3f}x)" if b and over_baseline(b) else ""
        return [
            f"**No improvement: keep the baseline.** No candidate beat it by {MIN_GAIN - 1:.0%} or more{best}; "
            "no kernel is proposed.",
            "",
        ]
    lines = [
        f"**Best kernel: {_x(b.competent_speedup)} over the competent baseline, {_x(b.speedup)} over clang -O3"
        f"{_over_library(b.speedup_over_library, b.library_label)}** "
        f"({b.measurement}): `{paths.get('code', '-')}` "
        f"(extra flags: `{' '.join(b.cflags) or '-'}`; its first lines hold the build line it was measured "
        "with, and it does not compile without it).",
        "",
    ]
    if o.run.baseline_note:
        lines += [f"**Note: {o.run.baseline_note}.**", ""]
    if b.feedback:  # carries the roofline note of a modeled run (bound, achieved vs ceilings)
        lines += [f"Evaluation: {b.feedback}", ""]
    return lines


def _baselines(o: RunOutcome) -> list[str]:
    rows = [c for c in o.candidates if c.get("baseline_cycles")]
    lines = []
    if rows:
        competent = next((c["competent_cycles"] for c in rows if c.get("competent_cycles")), None)
        also = f"; competent baseline (its allowed FP flags): {competent:,.0f} cycles" if competent else ""
        lib = next((c for c in rows if c.get("library_cycles")), None)
        also += f"; {lib['library_label']}'s own routine: {lib['library_cycles']:,.0f} cycles" if lib else ""
        lines += [
            f"Baselines: the task's reference.c at clang -O3: {rows[0]['baseline_cycles']:,.0f} cycles{also}.",
            "",
        ]
    if any(c.get("measurement") == "modeled" for c in o.candidates):
        lines += [f"*{MODELED_CAVEAT}*", ""]
    return lines


def _directions(o: RunOutcome) -> list[str]:
    seen: dict[str, dict[str, Any]] = {}
    for c in o.candidates:
        d = seen.setdefault(
            c.get("direction") or "-", {"title": c.get("direction_title"), "n": 0, "best": 0.0, "competent": None}
        )
        d["n"] += 1
        if (c.get("speedup") or 0.0) > d["best"]:
            d["best"], d["competent"] = c["speedup"], c.get("competent_speedup")
    if not seen:
        return []
    lines = [
        "## Directions",
        "",
        "Why these: the thoughts retrieved for the task (hybrid search over vectors, full text and the graph, "
        "for its operator, name and description on this target) were grouped by idea and the ideas ranked "
        "by their best relevance, each new one first having to bring a technique not yet covered. Within a "
        "direction the agent samples thoughts by how often they helped on this target (Thompson sampling).",
        "",
        "| direction (idea) | candidates | best: competent / plain |",
        "|---|---|---|",
    ]
    for key, d in seen.items():
        best = f"{_x(d['competent'])} / {_x(d['best'])}" if d["best"] else "-"
        lines.append(f"| {d['title'] or key} | {d['n']} | {best} |")
    return [*lines, ""]


def _candidate_table(o: RunOutcome) -> list[str]:
    if not o.candidates:
        return []
    lines = [
        "## Evaluated candidates",
        "",
        f"Each candidate's code, as evaluated, is in `{CANDIDATES_DIR}/` (the step's file).",
        "",
        "| step | parent | change from parent | cycles (-O3 baseline) | speedup competent / plain | bound | status "
        "| reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in o.candidates:
        cycles = (
            f"{c['candidate_cycles']:,.0f} ({c['baseline_cycles']:,.0f})"
            if c.get("candidate_cycles") and c.get("baseline_cycles")
            else "-"
        )
        speed = f"{_x(c.get('competent_speedup'))} / {_x(c['speedup'])}" if c.get("speedup") else "-"
        if c.get("speedup") and c.get("speedup_over_library"):
            speed += f" ({_x(c['speedup_over_library'])} over the library)"
        parent = "reference" if c["parent_step"] is None else str(c["parent_step"])
        step = f"[{c['step']}]({candidate_file(c['step'])})" if c.get("code") else str(c["step"])
        lines.append(
            f"| {step} | {parent} | {_cell(c['change'])} | {cycles} | {speed} | {c.get('bound') or '-'} | "
            f"{c['status']} | {_cell(c['reason'])} |"
        )
    return [*lines, ""]


def _lineage_table(o: RunOutcome) -> list[str]:
    if not o.lineage or not (o.best and improved(over_baseline(o.best))):
        return []
    lines = [
        "## Lineage of the best kernel",
        "",
        "Only knowledge that shaped the code is credited: a thought whose technique set the knob that changed "
        "(offline generator) or that was in the LLM's prompt. Steps without one changed by a fallback move; "
        "a transfer is a decision measured on another target or task (TRANSFERS_TO), re-rendered here.",
        "",
        "| step | thought (technique) | idea | result (competent / plain) | evidence commits |",
        "|---|---|---|---|---|",
    ]
    for row in o.lineage:
        commits = "<br>".join(_commit_md(c) for c in row.get("commits") or []) or "-"
        result = f"{_x(row.get('competent_speedup'))} / {_x(row['speedup'])}" if row.get("speedup") else row["status"]
        thought = f"{row['thought_title']} ({row['technique']})" if row.get("thought_title") else "-"
        if tr := row.get("transfer"):  # a seed: the credit goes to the kernel whose decision it carries
            thought = f"transfer of {tr['task']} on {tr['target']} ({_x(tr['speedup'])}) {tr.get('rescaled') or ''}"
        elif row.get("thought_title") and row.get("from_code"):
            thought += "; its code set " + ", ".join(f"{k} {v}" for k, v in row["from_code"].items())
        lines.append(
            f"| {row['depth']} | {_cell(thought)} | {_cell(row.get('idea_title') or '-')} | {result} | {commits} |"
        )
    return [*lines, ""]


def _commit_md(c: dict[str, Any]) -> str:
    sha = f"[{c['sha'][:10]}]({c['url']})" if c.get("url") else f"`{c['sha'][:10]}`"
    return f"{c.get('repo')} {sha}: {_cell(c.get('title') or '')}"


def _reproduce(o: RunOutcome, paths: dict[str, str]) -> list[str]:
    r = o.run
    opts = _loads(r.settings)
    run_cmd = (
        f"eok optimize {shlex.quote(_task_arg(r.task_id, opts.get('task_path')))} --target {r.target_key} "
        f"--budget {r.budget} --directions {r.directions} --generator {r.generator} --seed {r.seed}"
        + (f" --runner {opts['runner']}" if opts.get("runner") else "")
    )
    lines = ["## Reproduce", "", "```bash", f"{run_cmd}   # the whole run (the graph it learnt from differs)"]
    if o.best and improved(over_baseline(o.best)) and "code" in paths:
        flags = f" --cflags {shlex.quote(' '.join(o.best.cflags))}" if o.best.cflags else ""
        runner = f" --runner {opts['runner']}" if opts.get("runner") else ""
        kept = Path(paths["candidates"]).parent / candidate_file(o.best.step)
        lines.append(
            f"eok eval {shlex.quote(_task_arg(r.task_id, opts.get('task_path')))} --target {r.target_key} "
            f"--candidate {shlex.quote(str(kept))}{flags}{runner}   # the best kernel alone"
        )
        lines.append(f"{shlex.join(library_build_line(o))}   # best.c as a library builds it (in the run folder)")
    return [*lines, "```", ""]


def _task_arg(name: str, path: str | None) -> str:
    """The bundled suite's tasks by name (true on every clone), user tasks by their directory."""
    from evaluator.tasks import load_task

    try:
        return name if path and Path(load_task(name).directory) == Path(path) else (path or name)
    except Exception:  # not a suite task (or no longer one): the directory is the only way to name it
        return path or name


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _over_library(speedup: float | None, label: str | None) -> str:
    return f", {_x(speedup)} over {label}" if speedup and label else ""


def _x(speedup: float | None) -> str:
    return f"{speedup:.3f}x" if speedup else "-"
