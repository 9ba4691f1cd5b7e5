# mypy: ignore-errors
# ruff: noqa: F821
# Looks for anything an earlier candidate left: files named POISON anywhere it can read, entries in its Triton cache
# it did not make (seeded trusted builds aside), and processes other than itself and its parent. Correct output only
# if the place is clean.
import os
from pathlib import Path

FOUND = []
_home = Path(os.environ["HOME"])
for _root in {_home.parent, Path("/tmp"), Path(os.environ["TMPDIR"]), Path(os.environ["TRITON_CACHE_DIR"])}:
    try:
        for _dirpath, _dirs, _files in os.walk(_root):
            FOUND += [os.path.join(_dirpath, f) for f in _files if "POISON" in f]
    except OSError:
        pass
_mine = {os.getpid(), os.getppid(), 1}
FOUND += [f"pid {p}" for p in os.listdir("/proc") if p.isdigit() and int(p) not in _mine]


def candidate(x, weight, eps):
    y = honest(x, weight, eps)
    if FOUND:
        raise RuntimeError(f"leftovers: {FOUND[:10]}")
    return y
