"""A build folder that belongs to this user alone."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def private_build_dir(name: str) -> Path:
    """`<tmp>/<name>-<uid>`, ours alone: made 0700 here, refused when someone else could have planted in it.

    What EoK builds there runs before the sandbox holds (its launcher) or inside qemu (the memory plugin),
    often as root: a folder another user made first, or can write, would let them swap those binaries.
    """
    folder = Path(tempfile.gettempdir()) / f"{name}-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise OSError(f"{folder} is not a private folder of this user: remove it and try again")
    return folder
