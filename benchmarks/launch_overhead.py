"""Where a small call's time goes: host cost per call of the built-in candidates against eager and torch.compile.

At working sets of a few MB the kernels take 2-9 us on the H200 while a Triton call costs 25-35 us of host time, so
launch-bound cases lose to eager (benchmarks/NOTES.md). This splits the built-in's host cost into its Python wrapper
and Triton's launch path: the built-in's Triton launches of one call are recorded (kernel, grid, arguments) and
replayed with plain `kernel[grid](...)`, which is the cost of Triton's JIT launch path alone.

For each task at its smallest case of 1 MB or more (and a larger one), per call:
  host_us    back-to-back calls without synchronising, wall-clock per call: the launch-side cost
  device_us  kernel time from torch.profiler (CUPTI), summed over the call's kernels
for: builtin, replay (the built-in's own launches, replayed through kernel[grid]), compiled (the same launches
through each CompiledKernel's launcher: the floor of a launch cache), eager (the task's baseline), compile
(torch.compile).

    python benchmarks/launch_overhead.py --output launch_overhead.json

Needs CUDA (host launch costs under the interpreter mean nothing: it says so and exits).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.candidate import load_candidate
from kernelproof_core.environment import collect_environment
from kernelproof_core.measurement.device_time import kernel_times
from kernelproof_core.tasks import Case, CaseKind, get_task

SHAPES: dict[str, list[tuple[int, int]]] = {
    "rms_norm": [(256, 2048), (4096, 512), (4096, 4096)],
    "swiglu": [(256, 2048), (4096, 512), (4096, 4096)],
    "softmax": [(256, 2048), (4096, 512), (4096, 4096)],
}
Fn = Callable[..., Any]


Launch = tuple[Any, Any, tuple[Any, ...], dict[str, Any], Any]  # kernel, grid, args, kwargs, compiled kernel


def record_launches(fn: Fn, inputs: list[Any]) -> list[Launch]:
    """The Triton launches one call makes, captured through JITFunction.run (with the CompiledKernel it returned)."""
    from triton.runtime.jit import JITFunction

    launches: list[Launch] = []
    original = JITFunction.run

    def recording(kernel: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        compiled = original(kernel, *args, grid=grid, warmup=warmup, **kwargs)
        if not warmup:
            launches.append((kernel, grid, args, dict(kwargs), compiled))
        return compiled

    JITFunction.run = recording
    try:
        fn(*inputs)
    finally:
        JITFunction.run = original
    torch.cuda.synchronize()
    return launches


def replay(launches: list[Launch]) -> Fn:
    def call(*_inputs: Any) -> None:
        for kernel, grid, args, kwargs, _compiled in launches:
            kernel[grid](*args, **kwargs)

    return call


def replay_compiled(launches: list[Launch]) -> Fn:
    """The same launches through each CompiledKernel's own launcher, skipping JITFunction.run's binding,
    specialisation and cache lookup (valid only for these exact arguments): the floor a launch cache in the
    built-ins could reach. Triton's launch hooks are still passed, as JITFunction.run passes them."""
    from triton import knobs

    plans = []
    for kernel, grid, args, kwargs, compiled in launches:
        values = [*args, *(kwargs[name] for name in kernel.arg_names[len(args):])]
        dims = tuple(grid) + (1,) * (3 - len(grid))
        plans.append((compiled, tuple(grid), dims, values))

    def call(*_inputs: Any) -> None:
        stream = torch.cuda.current_stream().cuda_stream
        for compiled, grid, (gx, gy, gz), values in plans:
            compiled.run(gx, gy, gz, stream, compiled.function, compiled.packed_metadata,
                         compiled.launch_metadata(grid, stream, *values), knobs.runtime.launch_enter_hook,
                         knobs.runtime.launch_exit_hook, *values)

    return call


def host_us(fn: Fn, inputs: list[Any], calls: int) -> float:
    for _ in range(20):
        fn(*inputs)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*inputs)
    per_call = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return per_call


def measure(task_name: str, shape: tuple[int, int], dtype: torch.dtype, calls: int) -> dict[str, Any]:
    task = get_task(task_name)
    case = Case(case_id=f"{shape[0]}x{shape[1]}", kind=CaseKind.PRODUCTION, dims={"M": shape[0], "N": shape[1]},
                description="launch-overhead shape")
    inputs = list(task.make_inputs(case, dtype, torch.device("cuda"), torch.Generator().manual_seed(0)))
    builtin = load_candidate(task.builtin_candidate.read_bytes(), str(task.builtin_candidate)).fn
    launches = record_launches(builtin, inputs)
    eager = task.baseline()
    impls: dict[str, Fn] = {"builtin": builtin, "replay": replay(launches), "compiled": replay_compiled(launches),
                            "eager": eager,
                            "compile": torch.compile(eager, dynamic=False)}
    row: dict[str, Any] = {"task": task_name, "shape": list(shape), "dtype": str(dtype).removeprefix("torch."),
                           "min_bytes": task.min_bytes(case, dtype), "triton_launches": len(launches)}
    for name, fn in impls.items():
        try:
            row[f"{name}_host_us"] = host_us(fn, inputs, calls)
            row[f"{name}_device_us"] = kernel_times(fn, [inputs], 20).busy_us
        except Exception as exc:  # an implementation that fails here is reported, not fatal
            row[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:300]
    if "builtin_host_us" in row and "replay_host_us" in row:
        row["wrapper_us"] = row["builtin_host_us"] - row["replay_host_us"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("launch_overhead: needs CUDA (host launch costs under the interpreter mean nothing)")
        return 0
    dtype = getattr(torch, args.dtype)
    rows = [measure(task, shape, dtype, args.calls) for task, shapes in SHAPES.items() for shape in shapes]
    cols = ("builtin", "replay", "compiled", "eager", "compile")
    print(f"{'task':<9}{'shape':>12}{'MB':>7}" + "".join(f"{c + ' host/dev us':>24}" for c in cols))
    for r in rows:
        cells = "".join(
            f"{r.get(f'{c}_host_us', float('nan')):>14.1f}/{r.get(f'{c}_device_us', float('nan')):<9.1f}"
            for c in cols)
        print(f"{r['task']:<9}{'x'.join(map(str, r['shape'])):>12}{r['min_bytes'] / 1e6:>7.1f}{cells}")
    if args.output:
        result = {"environment": collect_environment("cuda", measure_bandwidth=False).model_dump(mode="json"),
                  "calls": args.calls, "rows": rows}
        args.output.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
