"""kernel_sweep.py family `softmax_stagger`: the built-in softmax's persistent paths (realigned, resident) with half
their programs starting a number of SM clocks late (STAGGER), so programs doing equal work stop passing through
their HBM-idle phases (reductions, stats passes) in lockstep. Each config is checked against an fp32 reference
before it is timed, beside the planned launch."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_resident import _correct, inputs

from kernelproof_core.kernels import softmax

SHAPES = ((1723, 25249), (2048, 32000), (4096, 32768), (1991, 33508), (1024, 40000), (1024, 65536), (683, 98304),
          (1024, 131072), (512, 128256))
STAGGERS = (0, 1000, 2500, 5000, 10000, 20000)  # SM clocks (H200: about 1.98 per ns at boost)


def softmax_stagger_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    for m, n in SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        plan = softmax._plan(m, n, n, x.element_size(), device, dtype)
        if type(plan) is not tuple:
            print(f"softmax_stagger {m}x{n}: {type(plan).__name__}, not persistent", flush=True)
            continue
        launch, meta = plan
        for stagger in STAGGERS:
            run = partial(launch, x, y, m, n, n, **{**meta, "STAGGER": stagger})
            y.fill_(float("nan"))
            run()
            label = f"stagger={stagger}"
            if _correct(y, ref, f"softmax.stagger {m}x{n} {label}"):
                yield ("softmax.stagger", (m, n), label, run, moved, False)


PREFETCH_SHAPES = ((1991, 33508), (1024, 40000), (1024, 65536), (683, 98304), (1024, 131072), (512, 128256),
                   (1024, 131071))


def softmax_resident_prefetch_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_resident_prefetch`: the resident kernel asking L2 for the next row's last PREFETCH chunks
    (bulk prefetches) as each row begins, so that row's HBM reads overlap this row's stats pass, with and without
    a stagger."""
    for m, n in PREFETCH_SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        plan = softmax._plan(m, n, n, x.element_size(), device, dtype)
        if type(plan) is not tuple or "NCHUNK" not in plan[1]:
            print(f"softmax_resident_prefetch {m}x{n}: not resident", flush=True)
            continue
        launch, meta = plan
        nchunk, streamed = meta["NCHUNK"], meta["NCHUNK"] - meta["RES_A"] - meta["RES_B"]
        for prefetch in sorted({0, streamed, nchunk // 4, nchunk // 2, nchunk}):
            for stagger in (0, 2500):
                run = partial(launch, x, y, m, n, n, **{**meta, "STAGGER": stagger, "PREFETCH": prefetch})
                y.fill_(float("nan"))
                run()
                label = f"prefetch={prefetch}/{nchunk} stagger={stagger}"
                if _correct(y, ref, f"softmax.prefetch {m}x{n} {label}"):
                    yield ("softmax.prefetch", (m, n), label, run, moved, False)
