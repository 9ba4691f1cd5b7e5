"""Built-in kernels against the best public work, side by side in one run on one GPU.

For each task, dtype and shape (every shape moves 1 MB or more): the built-in Triton candidate, PyTorch eager,
torch.compile (default mode, static shapes) and Liger-Kernel (when importable). Each implementation is checked against
the task's oracle first; an incorrect one is reported, not timed. Times are medians of triton.testing.do_bench
(CUDA events, L2 flushed before every call), taken in --rounds rounds (default 3) that interleave the implementations;
the median of the rounds is reported and every round is kept in the JSON (`ms_rounds`). At a few MB one do_bench
median of the same launch varied from 5.6 to 20.9 us between dtypes and runs, for the Triton-based columns (ours,
torch.compile), while the kernel-only times held (evidence/h200/2026-12-04_words/4_*): the kernel-only sessions left
CUPTI's callbacks on every later launch, until TEARDOWN_CUPTI=1 (set below; 2026-12-04_thread_stats_windows/).
Beside do_bench, each implementation is also timed as the harness times candidates (measurement/replay.py): a CUDA
graph of calls over a ring of input sets (measurement.timing.ring_input_sets: 64 MB or more of distinct inputs, so
L2 holds none of a call's inputs from the call before), replayed between two events (`graph_gbps`): no per-call
launch gap, no flush kernel, no host in the measurement. At 2-6 MB, where a do_bench call is 2-3 us of kernel and
2-3 us of event and launch overhead, its medians swung by 0.3-1.3x between runs (2026-12-04_padded_words/4_*,
thread_stats_windows/7_*); the graph column is the comparison at those sizes that does not hinge on that.
Bandwidth counts the task's minimum bytes (inputs read once, output written once); the speed of light is the
measured device-to-device copy bandwidth.

    python benchmarks/bandwidth.py --output bandwidth.json [--quick]

Prints one table and the ratios the targets are about: built-in / best-other and built-in / copy bandwidth by
do_bench; next to them, the built-in over the best other by graph replay (graph/best), the built-in over a same-size
memcpy timed by do_bench (/copy@size: per-call costs of a ~10-40 us call, not the kernel, are what keep mid-size
shapes below the asymptotic copy bandwidth), the built-in's CUPTI kernel-only
bandwidth over copy bandwidth (kernel/copy) and over the best other implementation's kernel-only bandwidth
(kernel/best: all of each implementation's kernels per call, no launch gaps, L2 flushed before each call).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Kineto finalizes CUPTI after each kernel-only session only when told to: without it every later launch in the
# process kept CUPTI's callbacks (host cost per call 35 -> 41 us for the built-in softmax, 12 -> 17 us for eager), and
# the next rows' event times measured the host (evidence/h200/2026-12-04_thread_stats_windows/, event_modes.py).
os.environ.setdefault("TEARDOWN_CUPTI", "1")
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.candidate import load_candidate
from kernelproof_core.environment import collect_environment, copy_bandwidth_gbps
from kernelproof_core.measurement.replay import capture, recover_failed_capture
from kernelproof_core.measurement.timing import ring_input_sets
from kernelproof_core.metrics import error_metrics, within_tolerance
from kernelproof_core.settings import get_settings
from kernelproof_core.tasks import Case, CaseKind, get_task

# (M, N) or (M, N, row padding): a padded shape's inputs are views with row stride N + padding (swiglu: the halves of
# a fused [M, 2N] projection read in place have row stride 2N).
SHAPES: dict[str, list[tuple[int, ...]]] = {
    "rms_norm": [(4096, 127), (256, 2048), (4096, 2880), (8192, 4096), (16384, 8192), (65536, 1024), (65536, 4096),
                 (1024, 65536), (32768, 8192)],
    "swiglu": [(4095, 127), (256, 2048), (4096, 4096), (4096, 11008), (16384, 14336), (32768, 8192), (4096, 5000, 24),
               (16384, 14336, 14336)],
    "softmax": [(4096, 127), (16384, 100), (4096, 1000, 24), (256, 2048), (65536, 1024), (4096, 4096), (8192, 8192),
                (1723, 25249), (2048, 32000), (2048, 32001), (4096, 32768), (32768, 8192), (1024, 65536),
                (512, 128256), (64, 131072)],
}
QUICK = {k: v[-1:] for k, v in SHAPES.items()}


def liger_impl(task: str) -> Callable[..., torch.Tensor] | None:
    try:
        if task == "rms_norm":
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction

            return lambda x, w, eps: LigerRMSNormFunction.apply(x, w, eps)
        if task == "swiglu":
            from liger_kernel.ops.swiglu import LigerSiLUMulFunction

            return lambda a, b: LigerSiLUMulFunction.apply(a, b)
        if task == "softmax":
            from liger_kernel.ops.softmax import LigerSoftmaxFunction

            return lambda x: LigerSoftmaxFunction.apply(x)
    except Exception:
        return None
    return None


def implementations(task_name: str) -> dict[str, Callable[..., Any]]:
    task = get_task(task_name)
    builtin = load_candidate(task.builtin_candidate.read_bytes(), str(task.builtin_candidate)).fn
    # torch.compile is added per shape and dtype in main(), after a dynamo reset.
    impls: dict[str, Callable[..., Any]] = {"kernelproof": builtin, "eager": task.baseline()}
    liger = liger_impl(task_name)
    if liger is not None:
        impls["liger"] = liger
    return impls


def bench(fn: Callable[..., Any], inputs: tuple[Any, ...]) -> float:
    import triton.testing

    return float(triton.testing.do_bench(lambda: fn(*inputs), warmup=50, rep=200, return_mode="median"))


# Graph replay: a sample of calls lasting about _GRAPH_SAMPLE_MS (between _GRAPH_CALLS_MIN and _GRAPH_CALLS_MAX
# calls), _GRAPH_SAMPLES samples; the median sample's time per call.
_GRAPH_SAMPLE_MS, _GRAPH_CALLS_MIN, _GRAPH_CALLS_MAX, _GRAPH_SAMPLES = 2.0, 10, 200, 15


def graph_ms(fn: Callable[..., Any], input_sets: list[Any], call_ms: float) -> float:
    """Milliseconds a call as the harness times a candidate: `calls` calls captured in one CUDA graph, call k
    reading input set k mod len(input_sets), the graph replayed between two events; median over the samples."""
    calls = max(_GRAPH_CALLS_MIN, min(_GRAPH_CALLS_MAX, int(_GRAPH_SAMPLE_MS / max(call_ms, 1e-6))))
    for inputs in input_sets[:2]:  # the ring's own tensors seen once before the capture
        fn(*inputs)
    try:
        sample = capture(fn, input_sets, calls)
    except Exception:
        recover_failed_capture()
        raise
    sample.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(_GRAPH_SAMPLES):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        sample.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    del sample
    return statistics.median(times)


_FLUSH = 256 << 20


def kernel_only_us(fn: Callable[..., Any], inputs: tuple[Any, ...], calls: int = 10) -> float:
    """CUPTI kernel time per call (all of the call's kernels, no launch gaps), L2 flushed before each call."""
    from kernelproof_core.integrity.profiled import ProfilerGap
    from kernelproof_core.measurement.device_time import kernel_times

    cache = torch.empty(_FLUSH, dtype=torch.uint8, device="cuda")

    def measure() -> float:
        flush_names = set(kernel_times(cache.zero_, [()], 3).per_kernel)
        times = kernel_times(lambda *a: (cache.zero_(), fn(*a)), [inputs], calls).per_kernel
        return sum(t for name, t in times.items() if name not in flush_names)

    # With TEARDOWN_CUPTI a session started during the last one's teardown can record nothing (the H200 run of
    # evidence/h200/2026-12-04_thread_stats_windows/6_*): a record without the harness's canaries, or part of one
    # (kernel_times' ProfilerGap), or with no kernels (RuntimeError). Wait and try again, twice.
    for _ in range(2):
        try:
            return measure()
        except (RuntimeError, ProfilerGap):
            time.sleep(1.0)
    return measure()


def same_size_copy_gbps(nbytes: int) -> float:
    """A device memcpy moving the case's bytes (half read, half written), timed like the kernels: what the memory
    system does at this size once per-call costs (ramp-up, tail, event gaps) are counted as they are for a kernel."""
    src = torch.empty(max(16, nbytes // 2), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() / (bench(dst.copy_, (src,)) * 1e-3) / 1e9


def _shape(row: dict[str, Any]) -> str:
    """M x N, with the row stride when the inputs are padded views."""
    stride = row.get("row_stride", row["N"])
    return f"{row['M']}x{row['N']}" + (f" s{stride}" if stride != row["N"] else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path)
    parser.add_argument("--quick", action="store_true", help="the largest shape per task only")
    parser.add_argument("--dtype", action="append", default=None)
    parser.add_argument("--task", action="append", choices=sorted(SHAPES), help="these tasks only (default: all)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="do_bench medians per implementation, interleaved; the median of them is reported")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/bandwidth.py needs a CUDA device")
    sol = copy_bandwidth_gbps()
    dtypes = [getattr(torch, d) for d in (args.dtype or ["bfloat16", "float16"])]
    rows: list[dict[str, Any]] = []
    for task_name, shapes in (QUICK if args.quick else SHAPES).items():
        if args.task and task_name not in args.task:
            continue
        task = get_task(task_name)
        impls = implementations(task_name)
        for dtype in dtypes:
            for m, n, *padding in shapes:
                pad = padding[0] if padding else 0
                # A fresh compile per shape and dtype: one compiled function reused across 12 of them hit dynamo's
                # recompile limit and silently ran eager (the fp16 torch.compile column of the 2026-11-30 evidence).
                torch._dynamo.reset()
                impls["torch.compile"] = torch.compile(task.baseline(), dynamic=False)
                case = Case(f"bench_{m}x{n}", CaseKind.THROUGHPUT, {"M": m, "N": n}, "benchmark shape",
                            row_stride_pad=pad)
                inputs = task.make_inputs(case, dtype, torch.device("cuda"), torch.Generator().manual_seed(0))
                ref = task.oracle(inputs)
                nbytes = task.min_bytes(case, dtype)
                row: dict[str, Any] = {"task": task_name, "dtype": str(dtype).removeprefix("torch."),
                                       "M": m, "N": n, "row_stride": n + pad, "MB": nbytes / 1e6, "gbps": {}, "ms": {},
                                       "errors": {}}
                timed: dict[str, list[float]] = {}
                for name, fn in impls.items():
                    try:
                        out = fn(*inputs)
                        metrics = error_metrics(out, ref, task.tolerance(dtype))
                        if not within_tolerance(metrics, task.tolerance(dtype)):
                            row["errors"][name] = f"incorrect: rel_l2={metrics.rel_l2:.3g}"
                            continue
                        timed[name] = []
                    except Exception as exc:
                        row["errors"][name] = f"{type(exc).__name__}: {str(exc)[:200]}"
                # Rounds interleave the implementations (ours, eager, compile, ..., ours, eager, ...), so a slow
                # spell of the host or the GPU lands on all of them rather than on whichever ran during it.
                for _ in range(args.rounds):
                    for name in list(timed):
                        try:
                            timed[name].append(bench(impls[name], inputs))
                        except Exception as exc:
                            row["errors"][name] = f"{type(exc).__name__}: {str(exc)[:200]}"
                            del timed[name]
                for name, times in timed.items():
                    row["ms"][name] = ms = statistics.median(times)
                    row["gbps"][name] = nbytes / (ms * 1e-3) / 1e9
                row["ms_rounds"] = timed
                ring = ring_input_sets(task, inputs, nbytes, get_settings())
                row["ring_sets"] = len(ring)
                row["graph_gbps"], row["graph_errors"] = {}, {}
                for name in row["ms"]:
                    try:
                        row["graph_gbps"][name] = nbytes / (graph_ms(impls[name], ring, row["ms"][name]) * 1e-3) / 1e9
                    except Exception as exc:  # not capturable: reported, the other columns stand
                        row["graph_errors"][name] = f"{type(exc).__name__}: {str(exc)[:200]}"
                del ring
                graph_ours = row["graph_gbps"].get("kernelproof")
                graph_others = [v for k, v in row["graph_gbps"].items() if k != "kernelproof"]
                row["graph_vs_best_other"] = graph_ours / max(graph_others) if graph_ours and graph_others else None
                row["graph_fraction_of_copy"] = graph_ours / sol if graph_ours else None
                others = [v for k, v in row["gbps"].items() if k != "kernelproof"]
                ours = row["gbps"].get("kernelproof")
                row["vs_best_other"] = ours / max(others) if ours and others else None
                row["fraction_of_copy"] = ours / sol if ours else None
                row["copy_same_size_gbps"] = same_size_copy_gbps(nbytes)
                row["fraction_of_same_size_copy"] = ours / row["copy_same_size_gbps"] if ours else None
                row["kernel_only_gbps"] = {name: nbytes / (kernel_only_us(impls[name], inputs) * 1e-6) / 1e9
                                           for name in row["gbps"]}
                kernel_ours = row["kernel_only_gbps"].get("kernelproof")
                kernel_others = [v for k, v in row["kernel_only_gbps"].items() if k != "kernelproof"]
                row["kernel_only_fraction_of_copy"] = kernel_ours / sol if kernel_ours else None
                row["kernel_only_vs_best_other"] = (kernel_ours / max(kernel_others)
                                                    if kernel_ours and kernel_others else None)
                rows.append(row)
                # Progress as it goes, and the JSON so far: a run cut short by a time box still reports.
                done = "  ".join(f"{k} {v:.0f}" for k, v in row["gbps"].items())
                print(f"{task_name} {row['dtype']} {_shape(row)}: {done} GB/s", flush=True)
                if args.output:
                    args.output.write_text(json.dumps({"copy_gbps": sol, "partial": True, "rows": rows}, indent=1))
                del inputs, ref
                torch.cuda.empty_cache()
    names = ["kernelproof", "eager", "torch.compile", "liger"]
    header = f"{'task':<9}{'dtype':<10}{'shape':>20}{'MB':>9}" + "".join(f"{n:>15}" for n in names)
    lines = [f"copy bandwidth (read+write): {sol:.0f} GB/s",
             header + f"{'ours/best':>11}{'ours/copy':>11}{'graph/best':>11}{'/copy@size':>11}{'kernel/copy':>12}"
             f"{'kernel/best':>12}"]

    def ratio(value: float | None, width: int = 11) -> str:
        return f"{value:>{width}.3f}" if value else f"{'–':>{width}}"

    for r in rows:
        cells = "".join(f"{r['gbps'][n]:>15.0f}" if n in r["gbps"] else f"{'–':>15}" for n in names)
        lines.append(f"{r['task']:<9}{r['dtype']:<10}{_shape(r):>20}{r['MB']:>9.1f}{cells}{ratio(r['vs_best_other'])}"
                     f"{ratio(r['fraction_of_copy'])}{ratio(r.get('graph_vs_best_other'))}"
                     f"{ratio(r.get('fraction_of_same_size_copy'))}"
                     f"{ratio(r.get('kernel_only_fraction_of_copy'), 12)}"
                     f"{ratio(r.get('kernel_only_vs_best_other'), 12)}")
        for name, err in r["errors"].items():
            lines.append(f"    {name}: {err}")
        for name, err in r.get("graph_errors", {}).items():
            lines.append(f"    {name} (graph): {err}")
    sys.stdout.write("\n".join(lines) + "\n")
    if args.output:
        env = collect_environment("cuda").model_dump(mode="json")
        args.output.write_text(json.dumps({"environment": env, "copy_gbps": sol, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
