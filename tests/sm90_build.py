"""Build kernels for the H200's target without a GPU: the script runs in a fresh process (this one may interpret:
TRITON_INTERPRET is dropped), takes the cases as JSON (argv[1]) and the benchmarks folder (argv[2], for scripts that
import the experiments), and prints one JSON list, what it found in each build (PTX counts, plans, shared memory),
as its last line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def compile_for_sm90(script: str, cases: list[Any]) -> list[dict[str, Any]]:
    """Run `script` on `cases` in a fresh non-interpreting process and return its findings, one per case."""
    done = subprocess.run([sys.executable, "-c", script, json.dumps(cases), str(BENCHMARKS)], capture_output=True,
                          text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stderr[-2000:]
    results: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(results) == len(cases), results
    return results
