"""What torch.compile generates for the tasks' eager references: the Triton source inductor writes, per shape.

torch.compile is one of the two bars the built-ins are held to (benchmarks/bandwidth.py). Where it is ahead on kernel
time, its generated kernel (block sizes, warps, eviction hints, loop structure) is the first thing to compare with:

    python benchmarks/inductor_kernels.py --output-dir inductor/ [--shape rms_norm:16384x8192 ...]

Writes one file per task and shape with every kernel inductor generated for it, and prints each kernel's launch
configuration lines and the configuration its autotuner picked at run time (the candidates it chose among are only
in the heuristics, not in the source). Needs CUDA.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.tasks import Case, CaseKind, get_task

DEFAULT_SHAPES = ("rms_norm:16384x8192", "rms_norm:256x2048", "rms_norm:8192x4096", "softmax:4096x4096",
                  "softmax:4096x32768", "swiglu:256x2048")
_CONFIG = re.compile(r"(num_warps|XBLOCK|R0_BLOCK|RBLOCK|YBLOCK|eviction_policy|triton_heuristics\.\w+)")


def chosen_configs() -> list[str]:
    """`kernel: config` of every inductor kernel loaded so far: the one launcher its autotuner kept after running."""
    from torch._inductor.codecache import PyCodeCache

    rows: list[str] = []
    for module in list(PyCodeCache.modules):
        for name, obj in vars(module).items():
            launchers = getattr(obj, "launchers", None)
            if isinstance(launchers, list) and launchers:
                rows.extend(f"{name}: {getattr(launcher, 'config', launcher)}" for launcher in launchers)
    return sorted(set(rows))


def generated_source(task_name: str, m: int, n: int, dtype: torch.dtype) -> str:
    from torch._inductor.utils import run_and_get_code

    task = get_task(task_name)
    case = Case(f"inductor_{m}x{n}", CaseKind.THROUGHPUT, {"M": m, "N": n}, "inductor shape")
    inputs = task.make_inputs(case, dtype, torch.device("cuda"), torch.Generator().manual_seed(0))
    torch._dynamo.reset()
    compiled = torch.compile(task.baseline(), dynamic=False)
    _, sources = run_and_get_code(compiled, *inputs)
    return "\n\n".join(sources)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--shape", action="append", help="task:MxN (default: a few shapes of each task)")
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.stderr.write("inductor_kernels: needs CUDA\n")
        return 0
    args.output_dir.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()  # configs of earlier shapes' kernels (their modules stay loaded)
    for spec in args.shape or DEFAULT_SHAPES:
        task_name, _, dims = spec.partition(":")
        m, n = (int(v) for v in dims.split("x"))
        source = generated_source(task_name, m, n, getattr(torch, args.dtype))
        (args.output_dir / f"{task_name}_{m}x{n}_{args.dtype}.py").write_text(source)
        configs = sorted({line.strip() for line in source.splitlines() if _CONFIG.search(line)})
        sys.stdout.write(f"== {spec} ({args.dtype})\n" + "\n".join(f"   {c[:160]}" for c in configs) + "\n")
        chosen = [c for c in chosen_configs() if c not in seen]
        seen.update(chosen)
        sys.stdout.write("   chosen at run time:\n" + "\n".join(f"   {c[:300]}" for c in chosen) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
