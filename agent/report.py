"""What a finished run leaves for people: the best kernel's code, its lineage, a plot and a short report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

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
RETURN depth, x.id AS experience, x.status AS status, x.speedup AS speedup,
       x.competent_speedup AS competent_speedup, x.summary AS summary,
       t.id AS thought, t.title AS thought_title, t.technique AS technique,
       i.id AS idea, i.title AS idea_title, commits
ORDER BY depth
"""


def lineage(store: GraphStore, best_id: str) -> list[dict[str, Any]]:
    """The chain of experiences that led to the best kernel, root first, with thoughts, ideas and commits."""
    return store.read(_LINEAGE, id=best_id)


def write_artifacts(directory: Path, outcome: RunOutcome) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    paths: dict[str, str] = {}
    if outcome.best and outcome.best.code:
        code = directory / "best.c"
        flags = " ".join(outcome.best.cflags)
        code.write_text(
            f"/* EoK run {outcome.run.id}: {_x(outcome.best.competent_speedup)} over the competent baseline, "
            f"{_x(outcome.best.speedup)} over clang -O3; extra flags: {flags or '-'} */\n" + outcome.best.code
        )
        paths["code"] = str(code)
    if outcome.history:
        paths["plot"] = str(_plot(directory / "speedup.png", outcome))
    report = directory / "report.md"
    report.write_text(_markdown(outcome, paths))
    paths["report"] = str(report)
    return paths


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
        "Competent: over the reference built with the FP flags the task's tolerance allows; plain: over the "
        'reference at clang -O3 (docs/TASKS.md, "Two baselines").',
        "",
    ]
    if o.best:
        lines += [
            f"Best kernel: `{paths.get('code', '-')}` ({o.best.measurement}; extra flags: "
            f"`{' '.join(o.best.cflags) or '-'}`).",
            "",
        ]
        if o.best.feedback:  # carries the roofline note of a modeled run (bound, achieved vs ceilings)
            lines += [f"Evaluation: {o.best.feedback}", ""]
    if "plot" in paths:
        lines += ["![best speedup over evaluations](speedup.png)", ""]
    if o.lineage:
        lines += [
            "## Lineage of the best kernel",
            "",
            "| step | thought (technique) | idea | result (competent / plain) | evidence |",
            "|---|---|---|---|---|",
        ]
        for row in o.lineage:
            commits = ", ".join(f"{c['repo']}@{c['sha'][:8]}" for c in row.get("commits") or []) or "-"
            result = (
                f"{_x(row.get('competent_speedup'))} / {_x(row['speedup'])}"
                if row.get("speedup")
                else row.get("status")
            )
            lines.append(
                f"| {row['depth']} | {row.get('thought_title')} ({row.get('technique')}) | "
                f"{row.get('idea_title')} | {result} | {commits} |"
            )
    return "\n".join(lines) + "\n"


def _x(speedup: float | None) -> str:
    return f"{speedup:.3f}x" if speedup else "-"
