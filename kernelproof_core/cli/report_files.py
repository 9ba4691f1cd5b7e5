"""Writing `--output` (JSON) and `--markdown`: checked before the run, written atomically after it, and never lost.

A verification can take an hour of GPU time; a path that cannot be written must fail before it starts, not after,
and a write that still fails at the end (disk full, directory removed meanwhile) saves the report elsewhere and says
where instead of ending in a traceback.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kernelproof_core.errors import UsageError


def check_writable(*paths: Path | None) -> None:
    """Create each path's directory and prove a file can be written there; UsageError naming the path if not."""
    for path in paths:
        if path is None:
            continue
        if path.is_dir():
            raise UsageError(f"cannot write the report to {path}: it is a directory")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".probe"):
                pass
        except OSError as exc:
            raise UsageError(f"cannot write the report to {path}: {exc.strerror or exc}") from None


def write_atomically(path: Path, text: str) -> Path:
    """Write text to path through a temporary file in its directory and a rename, so a reader never sees half a
    report. If that fails, the text goes to a file in the system's temporary directory, whose path is returned."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # created with the umask's mode, like the report
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(tmp, "x", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return path
    except OSError:
        fd, rescue = tempfile.mkstemp(prefix="kernelproof-report-", suffix=path.suffix or ".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return Path(rescue)
