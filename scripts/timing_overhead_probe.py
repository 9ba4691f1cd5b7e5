"""Where the fixed per-sample cost of CUDA-event timing comes from (run on the GPU host; about 30 s).

On the H200, launch-inclusive event medians exceed CUPTI kernel time by 100-150 us per sample, spread over the
sample's calls (evidence/h200/2026-11-30_kernels_throughput/). This fits elapsed(k) = a + b * k over samples of k
calls of one built-in at a few shapes, for variants of the sample bracket:

  plain        flush, start, k calls, device synchronize, end            (what measurement.timing does)
  spin         same, but spin on the stream's query() before the device synchronize (no blocking wake-up)
  end_first    end event recorded on the stream before the synchronize (no sync in the bracket at all)
  head_start   a ~200 us GPU sleep queued before the start event, so the first launch is hidden behind it
  no_flush     plain without the L2 flush

a (us) is the fixed cost per sample, b (us) the cost per call; b is compared with the CUPTI kernel time.

    python scripts/timing_overhead_probe.py [--output probe.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.candidate import load_candidate
from kernelproof_core.measurement.device_time import kernel_time_us
from kernelproof_core.tasks import Case, CaseKind, get_task

SHAPES = [("rms_norm", 8192, 2880), ("rms_norm", 32768, 8192), ("softmax", 8192, 8192)]
COUNTS = (2, 5, 10, 20, 40)
VARIANTS = ("plain", "spin", "end_first", "head_start", "no_flush")


def sample_us(fn: Callable[..., Any], inputs: tuple[Any, ...], k: int, variant: str, flush: torch.Tensor) -> float:
    stream = torch.cuda.current_stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if variant != "no_flush":
        flush.zero_()
    if variant == "head_start":
        torch.cuda._sleep(400_000)  # ~200 us at 2 GHz
    start.record()
    for _ in range(k):
        fn(*inputs)
    if variant == "end_first":
        end.record()
        torch.cuda.synchronize()
    else:
        if variant == "spin":
            while not stream.query():
                pass
        torch.cuda.synchronize()
        end.record()
    end.synchronize()
    return float(start.elapsed_time(end) * 1000.0)


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares a + b * k."""
    ks, ys = [p[0] for p in points], [p[1] for p in points]
    mk, my = statistics.fmean(ks), statistics.fmean(ys)
    b = sum((k - mk) * (y - my) for k, y in points) / sum((k - mk) ** 2 for k in ks)
    return my - b * mk, b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15, help="samples per (variant, k); the median is fitted")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("timing_overhead_probe: needs CUDA")
        return 0
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for task_name, m, n in SHAPES:
        task = get_task(task_name)
        case = Case(f"{m}x{n}", CaseKind.PRODUCTION, {"M": m, "N": n}, "probe shape")
        inputs = task.make_inputs(case, torch.bfloat16, torch.device("cuda"), torch.Generator().manual_seed(0))
        fn = load_candidate(task.builtin_candidate.read_bytes(), str(task.builtin_candidate)).fn
        for _ in range(5):
            fn(*inputs)
        kernel = kernel_time_us(fn, [inputs], 20)
        for variant in VARIANTS:
            points = [(k, statistics.median(sample_us(fn, inputs, k, variant, flush) for _ in range(args.repeats)))
                      for k in COUNTS]
            a, b = fit(points)
            rows.append({"task": task_name, "shape": [m, n], "variant": variant, "kernel_us": kernel,
                         "per_sample_us": a, "per_call_us": b, "points": points})
            print(f"{task_name:<9}{m}x{n:<8} {variant:<11} per sample {a:8.1f} us  per call {b:8.2f} us  "
                  f"kernel (CUPTI) {kernel:8.2f} us  per call / kernel - 1 = {b / kernel - 1:+.1%}", flush=True)
    if args.output:
        args.output.write_text(json.dumps({"counts": COUNTS, "repeats": args.repeats, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
