"""Small task directories of each loop shape the offline RVV rewrite knows, written where a test asks."""

from __future__ import annotations

from pathlib import Path

from evaluator.tasks import KernelTask, load_task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
SIZES = "[{ n = 1 }, { n = 7 }, { n = 100 }, { n = 1001, bench = true }]"
SIZES_TAPS = "[{ n = 1, t = 1 }, { n = 7, t = 3 }, { n = 100, t = 9 }, { n = 1001, t = 5, bench = true }]"

# name -> (signature, reference body, [args] tables, tolerance)
SHAPES: dict[str, tuple[str, str, str, str]] = {
    "map_i8": (
        "void map_i8(int n, int8_t a, const int8_t *x, const int8_t *y, int8_t *z)",
        "for (int i = 0; i < n; i++) z[i] = a * x[i + 1] + y[i] - x[i];",
        '[args.a]\nkind = "scalar"\ngen = "int"\nrange = [-5, 5]\n'
        '[args.x]\nkind = "in"\ncount = "n + 1"\ngen = "int"\n'
        '[args.y]\nkind = "in"\ncount = "n"\ngen = "int"\n[args.z]\nkind = "out"\ncount = "n"\n',
        "{ rtol = 0.0, atol = 0.0 }",
    ),
    "l1_dist": (
        "float l1_dist(int n, const float *x, const float *y)",
        "float s = 0.0f;\n  for (int i = 0; i < n; i++) s += fabsf(x[i] - y[i]);\n  return s;",
        '[args.x]\nkind = "in"\ncount = "n"\n[args.y]\nkind = "in"\ncount = "n"\n',
        "{ rtol = 1e-4, atol = 1e-3 }",
    ),
    "max_i32": (
        "int max_i32(int n, const int *x)",
        "int m = -2147483647 - 1;\n  for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;\n  return m;",
        '[args.x]\nkind = "in"\ncount = "n"\n',
        "{ rtol = 0.0, atol = 0.0 }",
    ),
    "i16dot": (
        "int32_t i16dot(int n, const int16_t *x, const int16_t *y)",
        "int32_t s = 0;\n  for (int i = 0; i < n; i++) s += (int32_t)x[i] * y[i];\n  return s;",
        '[args.x]\nkind = "in"\ncount = "n"\ngen = "int"\nrange = [-3000, 3000]\n'
        '[args.y]\nkind = "in"\ncount = "n"\ngen = "int"\nrange = [-3000, 3000]\n',
        "{ rtol = 0.0, atol = 0.0 }",
    ),
    "fir_taps": (  # a stencil whose tap count is a size parameter
        "void fir_taps(int n, int t, const float *x, const float *c, float *y)",
        "for (int i = 0; i < n; i++) {\n    float s = 0.0f;\n    for (int k = 0; k < t; k++) s += c[k] * x[i + k];\n"
        "    y[i] = s;\n  }",
        '[args.x]\nkind = "in"\ncount = "n + t"\n[args.c]\nkind = "in"\ncount = "t"\n'
        '[args.y]\nkind = "out"\ncount = "n"\n',
        "{ rtol = 1e-5, atol = 1e-6 }",
    ),
}


def write_task(root: Path, name: str, signature: str, body: str, args: str, tolerance: str) -> KernelTask:
    """A task directory `root/name` with this reference body (inside the function), loaded."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "reference.c").write_text(f"#include <math.h>\n#include <stdint.h>\n\n{signature} {{\n  {body}\n}}\n")
    (d / "task.toml").write_text(
        f'name = "{name}"\ncategory = "general"\noperator = "other"\ndtype = "mixed"\n'
        f'description = "a {name} loop"\nsignature = "{signature}"\ntolerance = {tolerance}\n'
        f"sizes = {SIZES_TAPS if ' int t,' in signature else SIZES}\n\n{args}"
    )
    return load_task(d)


def shape_task(root: Path, name: str) -> KernelTask:
    return write_task(root, name, *SHAPES[name])


def example(name: str) -> KernelTask:
    return load_task(EXAMPLES / name)
