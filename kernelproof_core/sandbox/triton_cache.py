"""Moving Triton cache entries from one process's cache directory into another's.

A child's Triton cache is its own (`<scratch>/triton-cache`), so entries built elsewhere (the fork server's trusted
harness kernels, a candidate's kernels built ahead in a CUDA-free precompile child) are carried as bytes and written
into it. One entry is a directory named by its key holding the compiled artefacts and a `__grp__*.json` index whose
`child_paths` are absolute paths into the cache that built it; Triton only takes a cache hit when every path in the
index exists, so the index is rewritten to the new cache's paths on the way in. Without that rewrite a copied entry
is silently never used.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path, PurePosixPath

log = logging.getLogger(__name__)

GROUP_PREFIX = "__grp__"


def read_entries(cache: Path, skip: set[str] | frozenset[str] = frozenset(),
                 max_bytes: int | None = None) -> tuple[dict[str, bytes], int]:
    """Every file of every entry under `cache` (relative path -> bytes), leaving out the paths in `skip`, whole
    entries at a time, smallest first, until `max_bytes`. Also returns how many entries did not fit."""
    entries: list[tuple[int, dict[str, bytes]]] = []
    for entry in sorted(p for p in cache.iterdir() if p.is_dir()) if cache.is_dir() else []:
        files = {str(p.relative_to(cache)): p.read_bytes() for p in sorted(entry.iterdir())
                 if p.is_file() and not p.name.startswith("tmp.") and str(p.relative_to(cache)) not in skip}
        if files:
            entries.append((sum(len(b) for b in files.values()), files))
    out: dict[str, bytes] = {}
    total = dropped = 0
    for size, files in sorted(entries, key=lambda e: e[0]):
        if max_bytes is not None and total + size > max_bytes:
            dropped += 1
            continue
        out.update(files)
        total += size
    return out, dropped


def install_entries(cache: Path, files: dict[str, bytes]) -> int:
    """Write `files` (from read_entries) into `cache`, pointing each group index at its new location. Paths that
    are not `<key>/<file>` are refused (nothing is written outside `cache`). Returns the number of files written."""
    written = 0
    for rel, data in files.items():
        parts = PurePosixPath(rel).parts
        if len(parts) != 2 or any(p in ("", ".", "..") for p in parts):
            log.warning("cache entry path %r refused", rel)
            continue
        target = cache / parts[0] / parts[1]
        if parts[1].startswith(GROUP_PREFIX):
            data = _relocated_group(data, cache)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        target.write_bytes(data)
        written += 1
    return written


def _relocated_group(data: bytes, cache: Path) -> bytes:
    """The group index with each child path moved to `<cache>/<key>/<file>` (the last two parts of the old one)."""
    try:
        group = json.loads(data)
        paths = group["child_paths"]
        moved = {}
        for name, old in paths.items():
            key, file = PurePosixPath(old).parent.name, PurePosixPath(old).name
            if key not in ("", ".", "..") and file not in ("", ".", ".."):
                moved[name] = str(cache / key / file)
        group["child_paths"] = moved
    except (ValueError, KeyError, TypeError, AttributeError):
        return data  # not an index we understand: Triton will treat it as a miss, as it would have
    return json.dumps(group).encode()
