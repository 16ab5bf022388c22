"""`eok export RUN --to openblas|ggml CLONE`: a run's best kernel as a commit in the library's own source.

Every refusal (a kernel that cannot honour the library's interface, a dirty clone, an existing branch) comes
before anything is written. Then: build the library at the clone's HEAD ("before"), write the kernel in the
library's conventions (openblas.py, ggml.py) as one commit on a new branch `eok/<task>-<run>` (git.py),
build the branch ("after"), run the library's own tests for the routine under qemu and its benchmark under
the cost model on both builds (evaluator.upstream), and judge: an export is good only when every library
test of the routine passes.
"""

from __future__ import annotations

from agent.export.export import ExportResult, export_run
from agent.export.routines import ExportRefused

__all__ = ["ExportRefused", "ExportResult", "export_run"]
