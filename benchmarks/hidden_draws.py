"""Where the per-run hidden cases land: how often each hidden profile draws a case of 64 MB or more, and which of the
built-in's kernels the H200 would plan for those draws.

Issue 6's bar (90% of copy bandwidth at every case of 64 MB or more) covers the hidden cases too, and they are drawn
afresh each run from a secret seed, so one campaign shows one draw of each. This script draws the hidden cases of many
seeds (no GPU: shapes and plans only), keeps those whose minimum bytes moved (the task's `min_bytes`, 16-bit) reach
the threshold, and plans each with the built-in's own planner on the H200's topology (132 SMs, 228 KB of shared
memory an SM, sm_90 builds; as benchmarks/sass_counts.py does). The result says which kernel paths the bar depends on
beyond the published cases, and how often a run meets each.

    python benchmarks/hidden_draws.py [--seeds 2000] [--min-mb 64] [--dtype bfloat16] [--json OUT]
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import random
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.kernels import rms_norm, softmax
from kernelproof_core.tasks import TASKS
from kernelproof_core.tasks.base import Case, CaseSet

H200_SMS = 132
H200_SMEM_PER_SM = 233472
log = logging.getLogger("hidden_draws")


def _h200_topology() -> None:
    """Plan as on an H200 with no GPU here: the planners' device queries answered with its SM count and shared memory
    (kernels stay sm_90 JIT functions: TRITON_INTERPRET must be unset before they are imported)."""
    softmax._num_sms = lambda device: H200_SMS  # type: ignore[assignment]
    rms_norm._num_sms = lambda device: H200_SMS  # type: ignore[assignment]
    softmax._smem_per_sm = lambda index: H200_SMEM_PER_SM  # type: ignore[assignment]
    rms_norm._smem_per_sm = lambda device: H200_SMEM_PER_SM  # type: ignore[assignment]


def plan_label(task: str, case: Case, dtype: torch.dtype) -> str:
    """The built-in's planned kernel for a case on the H200: the kernel's name, with REALIGN (rows through windows) or
    the plan's kind where it is not one launch."""
    m, n = case.dims["M"], case.dims["N"]
    stride = n + case.row_stride_pad
    elsize = torch.tensor([], dtype=dtype).element_size()
    device = torch.device("cuda", 0)
    if task == "softmax":
        plan: Any = softmax._plan(m, n, stride, elsize, device, dtype)
    elif task == "rms_norm":
        plan = rms_norm._plan(m, n, stride, elsize, device)
    else:  # swiglu has one elementwise kernel and no plan to choose
        return "swiglu (one elementwise kernel)"
    if isinstance(plan, tuple) and not hasattr(plan, "_fields"):  # (launch, meta); named tuples are plan objects
        launch, meta = plan
        kind = ""
    else:  # a plan object holding its launch: _Split, _Staged (softmax), _TwoPhase (rms_norm's own kernel)
        launch, meta = getattr(plan, "launch", None), dict(getattr(plan, "meta", {}))
        kind = type(plan).__name__.lstrip("_").lower()
    name = _kernel_name(launch) if launch is not None else f"{task}_{kind}"
    tags = [t for t in ("REALIGN", "REALIGNED", "RING", "ANCHOR") if meta.get(t)]
    return (name.lstrip("_") + (f" [{', '.join(tags)}]" if tags else "")
            + (" (padded rows)" if case.row_stride_pad else ""))


def _kernel_name(launch: Any) -> str:
    """The JIT function behind a planned launch: `kernel[grid]` (a lambda holding it), a persistent launch object (its
    attributes) or the function itself."""
    held = [c.cell_contents for c in (getattr(launch, "__closure__", None) or ())]
    held += list(vars(launch).values()) if hasattr(launch, "__dict__") else []
    for obj in [launch, *held]:
        fn = getattr(obj, "fn", None)
        if callable(fn) and hasattr(fn, "__name__"):
            return str(fn.__name__)
    return type(launch).__name__


def survey(seeds: int, min_bytes: float, dtype: torch.dtype, first_seed: int = 1) -> dict[str, Any]:
    """Hidden draws of `seeds` runs: per task and profile, the runs whose draw reaches min_bytes and their plans."""
    rng = random.Random(first_seed)
    run_seeds = [rng.getrandbits(63) for _ in range(seeds)]
    out: dict[str, Any] = {}
    for name, task in TASKS.items():
        if dtype not in {getattr(torch, d) for d in task.info.dtypes}:
            continue
        profiles: dict[str, Any] = {}
        for seed in run_seeds:
            for case in task.hidden_cases(seed, CaseSet.FULL):
                p = profiles.setdefault(case.case_id, {"draws": 0, "large": 0, "plans": collections.Counter(),
                                                       "examples": {}})
                p["draws"] += 1
                if task.min_bytes(case, dtype) < min_bytes:
                    continue
                p["large"] += 1
                label = plan_label(name, case, dtype)
                p["plans"][label] += 1
                p["examples"].setdefault(label, f"{case.dims['M']} x {case.dims['N']}"
                                         + (f" (row stride +{case.row_stride_pad})" if case.row_stride_pad else ""))
        out[name] = {cid: {"draws": p["draws"], "large_share": p["large"] / p["draws"],
                           "plans": {k: v / p["draws"] for k, v in p["plans"].most_common()},
                           "examples": p["examples"]} for cid, p in profiles.items()}
    return out


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=2000, help="runs to draw (each its own secret seed)")
    parser.add_argument("--min-mb", type=float, default=64.0, help="threshold on minimum bytes moved, in 1e6 bytes")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    parser.add_argument("--json", type=Path, help="write the survey here")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    os.environ.pop("TRITON_INTERPRET", None)
    _h200_topology()
    dtype = getattr(torch, args.dtype)
    result = {"seeds": args.seeds, "min_mb": args.min_mb, "dtype": args.dtype, "gpu_topology": "H200 (132 SMs)",
              "tasks": survey(args.seeds, args.min_mb * 1e6, dtype)}
    for task, profiles in result["tasks"].items():
        for cid, p in profiles.items():
            if not p["plans"]:
                continue
            plans = "; ".join(f"{k} {100 * v:.1f}% (e.g. {p['examples'][k]})" for k, v in p["plans"].items())
            log.info("%-8s %-20s %5.1f%% of runs at >= %g MB: %s", task, cid, 100 * p["large_share"], args.min_mb,
                     plans)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
