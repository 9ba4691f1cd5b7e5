"""Where a quick verification spends its time, function by function: cProfile over in-process verifications.

benchmarks/throughput.py splits a verification into phases (compile, checks, timing); this script goes one level
down, to find what to make cheaper. It verifies `--candidates` distinct honest variants of the task's built-in
candidate (candidate_stream.honest_variant: each pays a fresh Triton compile) in this process, without a sandbox,
after one unprofiled warm-up verification (CUDA context, CUPTI, imports), and profiles the rest:

    python benchmarks/verify_profile.py --output verify_profile.txt [--task rms_norm] [--candidates 3]

Prints (and writes) the top functions by cumulative and by own time, per verification, plus the wall time of each
pipeline phase (compile, checks, measure) per case. Runs on CUDA or under the interpreter.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from candidate_stream import NONCE_BASE, honest_variant
from throughput import PhaseClock

from kernelproof_core.campaign import CandidateJob
from kernelproof_core.environment import resolve_device
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.presets import build_campaign
from kernelproof_core.tasks import get_task
from kernelproof_core.verdicts import Verdict

TOP = 45


def phase_spans(clock: PhaseClock) -> list[str]:
    """`case phase seconds` for each span between consecutive pipeline events."""
    rows = []
    for (name, case_id, t), (_, _, t_next) in itertools.pairwise(clock.events):
        rows.append(f"  {case_id or '-':<14}{name:<10}{t_next - t:8.3f} s")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="rms_norm")
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "interpreter"])
    parser.add_argument("--candidates", type=int, default=3)
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    device = resolve_device(args.device)
    task = get_task(args.task)
    campaign = build_campaign(task, device, args.preset, None, {})
    source = task.builtin_candidate.read_text()
    jobs = [CandidateJob(task=task.name, source=honest_variant(source, NONCE_BASE + 9000 + i).encode(),
                         origin="file", filename=f"variant_{i}.py") for i in range(args.candidates + 1)]
    lines = [f"task={task.name} device={device} preset={args.preset} cases={list(campaign.case_ids or [])} "
             f"dtypes={campaign.dtypes}"]
    t0 = time.monotonic()
    verify_candidate(jobs[0], campaign)
    lines.append(f"warm-up verification (not profiled): {time.monotonic() - t0:.2f} s")
    profile = cProfile.Profile()
    walls = []
    for job in jobs[1:]:
        clock = PhaseClock()
        t0 = time.monotonic()
        profile.enable()
        outcome = verify_candidate(job, campaign, clock)
        profile.disable()
        walls.append(time.monotonic() - t0)
        bad = [c.case_id for c in outcome.cases if c.verdict is not Verdict.PASS]
        lines.append(f"verification {len(walls)}: {walls[-1]:.2f} s{' FAILED ' + str(bad) if bad else ''}")
        lines.extend(phase_spans(clock))
    for key in ("cumulative", "tottime"):
        buf = io.StringIO()
        stats = pstats.Stats(profile, stream=buf)
        stats.sort_stats(key).print_stats(TOP)
        lines.append(f"\n=== top {TOP} by {key} (summed over {len(walls)} verifications)\n" + buf.getvalue())
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.output:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
