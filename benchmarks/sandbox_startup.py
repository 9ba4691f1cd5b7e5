"""Sandbox start-up cost: cold start (fresh bwrap + interpreter + torch/triton imports per candidate) against the
warm fork server (one server, a fork per candidate), measured through the real SandboxExecutor.

For each mode, after one unmeasured run (server start, environment probe), it verifies the built-in candidate of one
task `--repeats` times with a quick campaign (one dtype, one case, reduced samples) and records:

  to_candidate_code_s  from "runner asked to verify" to the child's "load" phase (the candidate's code starts)
  total_s              the whole verification, end to end

and, for reference, the time a bare `python -c "import torch, triton"` takes on this host.

    python benchmarks/sandbox_startup.py --output sandbox_startup.json [--device auto] [--repeats 7]

Targets on the H200: warm median to_candidate_code_s < 1 s, warm median total_s < 5 s.
"""

from __future__ import annotations

import argparse
import json
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.campaign import Campaign, CandidateJob, Device
from kernelproof_core.environment import resolve_device
from kernelproof_core.sandbox import SandboxExecutor
from kernelproof_core.tasks import CaseSet, get_task
from kernelproof_core.verdicts import Verdict

QUICK = {  # device -> (case set, case id, dtype)
    "cuda": (CaseSet.FULL, "llama_4096", "bfloat16"),
    "interpreter": (CaseSet.INTERPRETER, "tail127", "float32"),
}


def quick_campaign(device: Device) -> Campaign:
    case_set, case_id, dtype = QUICK[device]
    return Campaign(device=device, dtypes=[dtype], case_set=case_set, case_ids=[case_id], warmups=2, samples=10,
                    invocations_per_sample=10, measure=True)


def bare_import_s(repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", "import torch, triton"], check=True)
        times.append(time.monotonic() - t0)
    return times


def measure(mode: str, job: CandidateJob, campaign: Campaign, repeats: int) -> dict[str, Any]:
    executor = SandboxExecutor(mode=mode)
    try:
        t0 = time.monotonic()
        first = executor.execute(job, campaign)
        first_s = time.monotonic() - t0
        to_code, total = [], []
        standby = 0
        milestones: dict[str, list[float]] = {}
        for _ in range(repeats):
            execution = executor.execute(job, campaign)
            verdicts = [c.verdict for c in execution.outcome.cases]
            if verdicts != [Verdict.PASS]:
                raise SystemExit(f"{mode}: honest candidate did not pass: {execution.outcome.cases}")
            to_code.append(executor.last_timings["to_candidate_code_s"])
            total.append(executor.last_timings["total_s"])
            standby += int(executor.last_standby)
            for key, value in executor.last_timings.items():
                if key.startswith("at_"):
                    milestones.setdefault(key[3:-2], []).append(value)
        return {
            "first_run_s": first_s,
            "to_candidate_code_s": to_code,
            "total_s": total,
            "median_to_candidate_code_s": statistics.median(to_code),
            "median_total_s": statistics.median(total),
            "served_by_standby": standby,  # runs whose child was forked ahead of its job (sandbox/standby.py)
            "standby_children": executor.settings.sandbox_standby_children if mode != "cold" else 0,
            # median seconds from the ask to: the child's first message (hello), sandbox layers applied (armed),
            # harness setup start (prepare), cheat-check arming (arm), candidate code (load), all cases (done)
            "median_milestones_s": {k: statistics.median(v) for k, v in milestones.items()},
            "isolation_layers": first.isolation.layers,
            "missing_layers": first.isolation.missing_layers,
        }
    finally:
        executor.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "interpreter"])
    parser.add_argument("--task", default="rms_norm")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cold-repeats", type=int, help="repeats of the cold mode (default: --repeats)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    device = resolve_device(args.device)
    task = get_task(args.task)
    job = CandidateJob(task=task.name, source=task.builtin_candidate.read_bytes(), origin="builtin",
                       filename=str(task.builtin_candidate))
    campaign = quick_campaign(device)
    bare = bare_import_s(3)
    cold = measure("cold", job, campaign, args.cold_repeats or args.repeats)
    warm = measure("forkserver", job, campaign, args.repeats)
    result = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "device": device,
        "task": task.name,
        "campaign": campaign.model_dump(mode="json"),
        "repeats": args.repeats,
        "bare_python_import_torch_triton_s": bare,
        "cold": cold,
        "warm": warm,
        "ratio_to_candidate_code": cold["median_to_candidate_code_s"] / warm["median_to_candidate_code_s"],
        "ratio_total": cold["median_total_s"] / warm["median_total_s"],
        "targets": {"warm_median_to_candidate_code_s": 1.0, "warm_median_total_s": 5.0},
    }
    print(f"device={device} task={task.name} repeats={args.repeats} "
          f"bare import torch+triton median={statistics.median(bare):.2f} s")
    print(f"{'mode':<12}{'to candidate code (median)':>30}{'total (median)':>18}")
    for mode, r in (("cold", cold), ("warm", warm)):
        print(f"{mode:<12}{r['median_to_candidate_code_s']:>28.3f} s{r['median_total_s']:>16.3f} s")
    for mode, r in (("cold", cold), ("warm", warm)):
        print(f"{mode}: {r['served_by_standby']}/{len(r['total_s'])} runs served by a standby child "
              f"(pool of {r['standby_children']}); "
              f"milestones (median s from the ask): "
              + ", ".join(f"{k} {v:.3f}" for k, v in r["median_milestones_s"].items()))
    print(f"cold/warm ratio: to candidate code {result['ratio_to_candidate_code']:.1f}x, "
          f"total {result['ratio_total']:.1f}x")
    if args.output:
        args.output.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
