"""Operator families: every module in this folder is imported, so its @register families are known.

Modules are found with pkgutil, so a new family file needs no edit here. Modules whose name starts
with an underscore are shared helpers (imported by the families that use them).
"""

from __future__ import annotations

import importlib
import pkgutil

__all__: list[str] = []

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
        __all__.append(_info.name)
