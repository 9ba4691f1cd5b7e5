"""kernel_sweep.py family `softmax_stagger`: the built-in softmax's resident path with half its programs starting a
number of SM clocks late (STAGGER) or not at all, so programs doing equal work stop passing through their HBM-idle
stats passes in lockstep. Each config is checked against an fp32 reference before it is timed, beside the planned
launch (which staggers one-program-per-SM plans by softmax._RESIDENT_STAGGER)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_resident import _correct, inputs

from kernelproof_core.kernels import softmax

# one program per SM (aligned and off the 16-byte grid), then two per SM and rows streamed past the budget
SHAPES = ((1024, 65536), (1024, 65535), (800, 60000), (683, 98304), (683, 98301), (1024, 40000), (1024, 131072))
STAGGERS = (0, 2500, 5000)  # SM clocks (H200: about 1.98 per ns at boost)


def softmax_stagger_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    for m, n in SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        plan = softmax._plan(m, n, n, x.element_size(), device, dtype)
        if type(plan) is not tuple or "STAGGER" not in plan[1]:
            print(f"softmax_stagger {m}x{n}: not resident", flush=True)
            continue
        launch, meta = plan
        for stagger in STAGGERS:
            run = partial(launch, x, y, m, n, n, **{**meta, "STAGGER": stagger})
            y.fill_(float("nan"))
            run()
            label = f"stagger={stagger} (planned {meta['STAGGER']}, {meta['num_warps']} warps)"
            if _correct(y, ref, f"softmax.stagger {m}x{n} {label}"):
                yield ("softmax.stagger", (m, n), label, run, moved, False)
