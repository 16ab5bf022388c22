"""The manifest of a library built for a target: what the evaluator links and what export rebuilds."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from core.errors import InvalidInput

MANIFEST_NAME = "eok-library.json"
LIBRARIES = ("openblas", "ggml", "onnxruntime-mlas")


class BuiltLibrary(BaseModel):
    """One build of one library commit for one target, as found in its cache folder."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    library: str  # one of LIBRARIES
    commit: str  # full sha of the clone's HEAD that was built
    target: str  # EoK target key, e.g. "k1-x60"
    clone: str  # absolute path of the source tree that was built
    archives: list[str]  # absolute paths of static archives, in link order
    include_dirs: list[str]  # absolute paths for the adapters' #include lines
    cflags: list[str]  # the flags the library was compiled with (target ISA included)
    link_flags: list[str] = []  # extra link flags the archives need (e.g. -lpthread, -lstdc++)

    @property
    def label(self) -> str:
        """How reports name it: library and short commit."""
        return f"{self.library}@{self.commit[:10]}"

    def write(self, folder: Path) -> Path:
        path = folder / MANIFEST_NAME
        path.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return path


def read_manifest(folder_or_file: Path) -> BuiltLibrary:
    """Read a built library's manifest; one clear line when it is missing or malformed."""
    path = folder_or_file / MANIFEST_NAME if folder_or_file.is_dir() else folder_or_file
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return BuiltLibrary.model_validate(data)
    except FileNotFoundError:
        raise InvalidInput(f"{path}: no built library here; build one with `eok upstream build`") from None
    except (json.JSONDecodeError, UnicodeDecodeError, ValidationError) as e:
        first = str(e).splitlines()[0]
        fix = "rebuild with `eok upstream build`"
        raise InvalidInput(f"{path}: not a built-library manifest ({first}); {fix}") from None
