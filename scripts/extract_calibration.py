#!/usr/bin/env python3
"""Extract the published rvv-bench figures the cost model is calibrated and judged on.

    python scripts/extract_calibration.py --results PATH/rvv-bench-results [--bench PATH/rvv-bench]

Reads clones of github.com/camel-cdr/rvv-bench-results (the kernel pages `<core>/<kernel>.html` and the
instruction tables in `<core>/index.html`) and writes evaluator/costmodel/calibration/figures.json and
instructions.json. Only numbers are taken, each with its repository, commit, file and series label; no code
or prose. Units are described in evaluator/costmodel/calibration/__init__.py.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CALIB = ROOT / "evaluator" / "costmodel" / "calibration"
RESULTS_REPO = "https://github.com/camel-cdr/rvv-bench-results"
BENCH_REPO = "https://github.com/camel-cdr/rvv-bench"
SIZE_TARGETS = (1024, 16384, 1048576)  # ~1 KB, ~16 KB, ~1 MB in the benchmark's own n
TABLES = {"vlmax": "tblMaa", "vl1": "tbl1aa"}  # vl=VLMAX and vl=1, both tail and mask agnostic
# Instructions the model needs (issue 19): memory access kinds, permutes, mask/scalar exchange, vsetvl-free
# basics to compare against, reductions and widening ops. Masked (v0.t) and fault-only-first forms are left out.
WANTED = re.compile(
    r"^(add|mul|vle(8|16|32|64)\.v|vse(8|16|32|64)\.v|vlse(8|16|32|64)\.v|vsse(8|16|32|64)\.v"
    r"|vl[s]?seg[2-4]e(8|16|32)\.v|vs[s]?seg[2-4]e(8|16|32)\.v|vrgather(ei16)?\.v[vxi]|vcompress\.vm|vcpop\.m"
    r"|vfirst\.m|vslide(1)?(up|down)\.v[xi]|vfslide1(up|down)\.vf|v(f)?w?red\w*\.vs|vw\w+\.[vw][vx]|vfw\w+\.[vw][vf]"
    r"|v[sz]ext\.vf[248]|vmv\.[xs]\.[sx]|vfmv\.[fs]\.[sf]|vadd\.v[vx]|vand\.vi|vmsgt\.vx|vmv\.v\.[xi]|vfmacc\.v[vf]"
    r"|vfadd\.vv|vfmul\.vv|vmflt\.vv|vadc\.vim|vid\.v|vrsub\.v[xi]|vmv[1248]r\.v)$"
)


def git_head(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def git_show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def page_infos(html: str) -> list[dict]:
    """The `infos` array a results page embeds (a JavaScript literal close enough to JSON)."""
    start = html.index("let infos = [") + len("let infos = ")
    end = html.index("for (const info of infos)")
    body = html[start:end].strip().rstrip(";")
    body = re.sub(r"(\n)(title|labels|data):", r'\1"\2":', body)
    body = re.sub(r",(\s*[\]}])", r"\1", body)
    return json.loads(body)


def nearest_sizes(sizes: list[int], targets: tuple[int, ...]) -> list[int]:
    return [min(sizes, key=lambda s: (abs(s - t), s)) for t in targets]


def kernel_groups(results: Path, commit: str, cores: dict, kernels: dict) -> list[dict]:
    groups = []
    for core, spec in cores.items():
        rev = spec.get("commit", commit)
        for kernel, k in kernels.items():
            path = f"{spec['dir']}/{k['page']}.html"
            try:
                html = git_show(results, rev, path)
            except subprocess.CalledProcessError:
                continue  # that run has no such page
            for info in page_infos(html):
                if info["title"] != k["title"]:
                    continue
                sizes = [int(s) for s in info["data"][0]]
                chosen = nearest_sizes(sizes, tuple(k.get("sizes", SIZE_TARGETS)))
                cols = [sizes.index(s) for s in chosen]
                series = {
                    label: [row[c] for c in cols]
                    for label, row in zip(info["labels"][1:], info["data"][1:], strict=True)
                }
                if any(
                    g["kernel"] == kernel and sorted(g["series"].values()) == sorted(series.values()) for g in groups
                ):
                    continue  # an older page with the current run's numbers (older labels maybe): not a second run
                groups.append({
                    "core": core, "kernel": kernel, "title": info["title"],
                    "source": {"repository": RESULTS_REPO, "commit": rev, "file": path},
                    "sizes": chosen, "series": series,
                })  # fmt: skip
    return groups


def instruction_tables(results: Path, commit: str, cores: dict) -> list[dict]:
    out = []
    for core, spec in cores.items():
        if "commit" in spec:
            continue  # the tables of the earlier run are not needed: the current X60 page has them
        path = f"{spec['dir']}/index.html"
        html = git_show(results, commit, path)
        for vl, table_id in TABLES.items():
            table = re.search(rf'<table id="{table_id}".*?</table>', html, re.S).group(0)
            columns = re.findall(r"<th>([^<]*)</th>", table)[1:]
            rows = {}
            for row in re.findall(r"<tr><td>(.*?)</tr>", table, re.S):
                cells = re.sub(r"</td>\s*$", "", row.strip()).split("</td><td>")
                name, values = cells[0], cells[1:]
                if not WANTED.match(name.split()[0]) or "v0.t" in name:
                    continue
                rows[name] = {c: float(v) for c, v in zip(columns, values, strict=False) if v.strip()}
            out.append({"core": core, "vl": vl, "source": {"repository": RESULTS_REPO, "commit": commit,
                        "file": path, "table": table_id}, "cycles": rows})  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, required=True, help="a clone of camel-cdr/rvv-bench-results")
    ap.add_argument("--bench", type=Path, help="a clone of camel-cdr/rvv-bench (its commit is recorded)")
    args = ap.parse_args()
    if not (args.results / "spacemit_x60").is_dir():
        print(
            f"{args.results}: not a clone of rvv-bench-results (no spacemit_x60/); pass --results PATH", file=sys.stderr
        )
        return 2
    catalog = tomllib.loads((CALIB / "kernels.toml").read_text())
    commit = git_head(args.results)
    figures = {
        "sources": {
            "results": {"repository": RESULTS_REPO, "commit": commit},
            "code": {"repository": BENCH_REPO, "commit": git_head(args.bench) if args.bench else None},
        },
        "groups": kernel_groups(args.results, commit, catalog["cores"], catalog["kernels"]),
    }
    tables = {"sources": figures["sources"], "tables": instruction_tables(args.results, commit, catalog["cores"])}
    (CALIB / "figures.json").write_text(json.dumps(figures, indent=1) + "\n")
    (CALIB / "instructions.json").write_text(json.dumps(tables, indent=1) + "\n")
    n = sum(len(g["sizes"]) * len(g["series"]) for g in figures["groups"])
    print(f"{n} kernel figures in {len(figures['groups'])} groups; {len(tables['tables'])} instruction tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
