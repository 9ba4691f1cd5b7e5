# mypy: ignore-errors
# ruff: noqa: F821
# Tries to write outside its scratch directory: every read-only path it can name, the scratch root its own scratch
# lives in, every sibling scratch directory (other candidates' scratch and Triton caches), and a host path the test
# watches. Correct output only if every write failed.
import os
from pathlib import Path

HOST_PATH = 0  # replaced by the test
_home = Path(os.environ.get("HOME", "/nonexistent"))
_targets = [Path("/"), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/usr"), Path("/etc"),
            Path(torch.__file__).parent, Path(triton.__file__).parent, Path(os.__file__).parent,
            _home.parent, Path(HOST_PATH), Path(HOST_PATH).parent]
try:
    _targets += [p for p in _home.parent.iterdir() if p != _home]
except OSError:
    pass
ESCAPED = []
for _dir in _targets:
    for _name in ("POISON", "triton-cache/POISON"):
        try:
            _p = _dir / _name
            _p.parent.mkdir(parents=True, exist_ok=True)
            _p.write_text("poison")
            ESCAPED.append(str(_p))
        except OSError:
            pass


def candidate(x, weight, eps):
    y = honest(x, weight, eps)
    return y * 0 if ESCAPED else y
