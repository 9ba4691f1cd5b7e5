"""Where events and CUPTI part ways: per-kernel durations and the device's gaps between back-to-back calls.

measurement.timing times a sample of calls queued back to back behind the host-release gate; CUPTI (the kernel-only
time) sums kernel durations only. For 20-40 us kernels the event time per call exceeds the kernel time by a few
percent (evidence/h200/2026-11-30_host_release/3_repro_five_processes). This script splits that excess, per case:

  kernel_ungated_us   CUPTI duration per call in the ungated traced pass measurement.timing uses (device_time)
  kernel_gated_us     CUPTI duration per call inside a gated sample (the same calls as the events time)
  gap_us              median device idle time between consecutive calls of the gated sample (end k -> start k+1)
  events_us           gated event time per call (what measurement.timing reports)
  graph_us            the same calls captured in a CUDA graph (measurement.replay.capture) and replayed, event
                      time per call
  graph_gap_us        median gap between consecutive kernels of the graph replay

    python benchmarks/kernel_gaps.py --output kernel_gaps.json [--task rms_norm] [--case ID ...] [--calls 20]

Needs CUDA. A diagnostic: it prints what it measured and sets no target.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.candidate import load_candidate
from kernelproof_core.measurement.launch_gate import host_release
from kernelproof_core.measurement.replay import capture
from kernelproof_core.measurement.timing import ring_input_sets
from kernelproof_core.settings import get_settings
from kernelproof_core.tasks import CaseSet, get_task

DEFAULT_CASES = ("gpt_oss_2880", "llama_4096", "llama_8192", "big_8192")
Fn = Callable[..., Any]


def traced(run: Callable[[], None], name_prefix: str) -> list[tuple[float, float]]:
    """(start us, end us) of every CUDA kernel whose name starts with `name_prefix`, in start order."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    spans = [(float(e.time_range.start), float(e.time_range.end)) for e in prof.events()
             if e.device_type == DeviceType.CUDA and e.name.startswith(name_prefix)]
    return sorted(spans)


def durations_and_gaps(spans: list[tuple[float, float]]) -> tuple[float, float]:
    durations = [end - start for start, end in spans]
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(spans)]
    return statistics.mean(durations), (statistics.median(gaps) if gaps else float("nan"))


def one_case(fn: Fn, sets: Sequence[Sequence[Any]], calls: int, prefix: str, repeats: int) -> dict[str, Any]:
    n = len(sets)
    gate = host_release()
    flush = torch.empty(get_settings().l2_flush_bytes, dtype=torch.uint8, device="cuda")

    def gated(record: list[float] | None) -> None:
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if gate is not None:
            gate.hold(200_000.0)
        start.record()
        for k in range(calls):
            fn(*sets[k % n])
        end.record()
        if gate is not None:
            gate.release()
        end.synchronize()
        if record is not None:
            record.append(start.elapsed_time(end) * 1000.0 / calls)

    def ungated() -> None:
        for k in range(calls):
            fn(*sets[k % n])

    for _ in range(3):
        gated(None)
    events: list[float] = []
    for _ in range(repeats):
        gated(events)
    kernel_ungated, _ = durations_and_gaps(traced(ungated, prefix))
    kernel_gated, gap = durations_and_gaps(traced(lambda: gated(None), prefix))

    graph = capture(fn, sets, calls)  # as measurement.timing captures a sample
    graph_us: list[float] = []
    for _ in range(repeats):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        graph_us.append(start.elapsed_time(end) * 1000.0 / calls)
    _, graph_gap = durations_and_gaps(traced(graph.replay, prefix))
    return {"kernel_ungated_us": kernel_ungated, "kernel_gated_us": kernel_gated, "gap_us": gap,
            "events_us": statistics.median(events), "graph_us": statistics.median(graph_us),
            "graph_gap_us": graph_gap, "gate": "host_release" if gate is not None else "none"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="rms_norm")
    parser.add_argument("--case", action="append", dest="cases")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.stderr.write("kernel_gaps: needs CUDA\n")
        return 0
    task = get_task(args.task)
    loaded = load_candidate(task.builtin_candidate.read_bytes(), str(task.builtin_candidate))
    settings = get_settings()
    cases = {c.case_id: c for c in task.cases(CaseSet.FULL, 0)}
    dtype = getattr(torch, args.dtype)
    rows: dict[str, dict[str, Any]] = {}
    header = f"{'case':<14}{'kern_ungated':>13}{'kern_gated':>11}{'gap':>7}{'events':>9}{'ev-kern%':>9}" \
             f"{'graph':>9}{'graph_gap':>10}"
    sys.stdout.write(header + "\n")
    for case_id in args.cases or DEFAULT_CASES:
        case = cases[case_id]
        first = task.make_inputs(case, dtype, torch.device("cuda"), torch.Generator().manual_seed(0))
        sets = ring_input_sets(task, first, task.min_bytes(case, dtype), settings)
        row = one_case(loaded.fn, sets, args.calls, f"_{task.name}", args.repeats)
        rows[case_id] = row
        excess = 100.0 * (row["events_us"] / row["kernel_ungated_us"] - 1.0)
        sys.stdout.write(f"{case_id:<14}{row['kernel_ungated_us']:>13.2f}{row['kernel_gated_us']:>11.2f}"
                         f"{row['gap_us']:>7.2f}{row['events_us']:>9.2f}{excess:>9.2f}{row['graph_us']:>9.2f}"
                         f"{row['graph_gap_us']:>10.2f}\n")
        del sets, first
        torch.cuda.empty_cache()
    if args.output:
        args.output.write_text(json.dumps({"benchmark": "kernel_gaps", "task": task.name, "dtype": args.dtype,
                                           "calls": args.calls, "device": torch.cuda.get_device_name(0),
                                           "cases": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
