"""kernel_sweep.py family `softmax_prefetch_l2`: PF_L2 on the realigned softmax kernel.

The realigned kernel holds the row it works on and the next one in registers (125-128 of them a thread on 16 warps:
one program an SM resident), so each program has at most one row of reads in flight, issued only once the row
before it has left its registers. PF_L2 also asks L2 for the lines of the row PF_L2 rows past the next one (one
`prefetch.global.L2` a 128-byte line, 512 a 32768-lane row: one instruction a thread, no registers held), so the next
row's register loads hit L2 and HBM sees a program's demand a row earlier. On 2048 x 32000 that is 132 x 64 KB = 8.4
MB of L2 a row ahead, against 60 MB (the resident kernel's bulk L2 prefetch of whole 128-256 KB rows lost: 17-34 MB,
evidence/h200/2026-12-01_stagger_prefetch/1_*). Shapes: the campaigns' realigned cases below 90% of copy (vocab_32000,
long_32768, random0 and the hidden neg_inf/spike draws), a padded PF_L1 plan, and 4096 x 32768 (90-92% already). Per
shape: the planned launch, then its config with PF_L2 1 (plain and evict_last) and 2 rows ahead, and on one program an
SM; each config is checked against fp32 before it is timed.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_padded import _checked, padded_inputs

from kernelproof_core.kernels import softmax

# (rows, width, row padding)
SHAPES = ((2048, 32000, 0), (2048, 32768, 0), (1723, 25249, 0), (2048, 32001, 0), (4096, 32768, 0), (3369, 5958, 0),
          (1142, 13543, 0), (1029, 16655, 3), (620, 30001, 7))
# (PF_L2, PF_L2_LAST) variants of the planned config
VARIANTS = ((1, False), (1, True), (2, False))


def _grid(launch: object) -> int:
    """The programs of a planned launch (`kernel[grid]` keeps its grid in the proxy's closure)."""
    for cell in getattr(launch, "__closure__", None) or ():
        if isinstance(cell.cell_contents, tuple):
            return int(cell.cell_contents[0])
    raise ValueError("not a kernel[grid] launch")


def softmax_prefetch_l2_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    sms = softmax._num_sms(device)
    for m, n, pad in SHAPES:
        x, y, ref, moved = padded_inputs(m, n, pad, dtype, device)
        stride = x.stride(0)
        plan = softmax._plan(m, n, stride, x.element_size(), device, dtype)
        yield ("softmax.planned", (m, n), f"planned pad={pad}", partial(softmax.candidate, x), moved, True)
        if not isinstance(plan, tuple) or hasattr(plan, "_fields") or "WINDOW" not in plan[1]:
            continue  # not the realigned kernel
        launch, meta = plan
        grid = _grid(launch)
        base = f"w{meta['num_warps']} grid={grid}" + (" pf_l1" if meta.get("PF_L1") else "")
        yield from _checked(partial(launch, x, y, m, n, stride, **meta), y, ref, "softmax.realigned", (m, n),
                            f"{base} (planned config)", moved)
        for pf, last in VARIANTS:
            label = f"{base} pf_l2={pf}" + (" last" if last else "")
            yield from _checked(partial(launch, x, y, m, n, stride, **{**meta, "PF_L2": pf, "PF_L2_LAST": last}), y,
                                ref, "softmax.realigned", (m, n), label, moved)
        if grid > sms:  # one program an SM (the plan: two, of which one fits at 125-128 registers)
            one = softmax._softmax_realigned[(min(m, sms),)]
            for pf in (0, 1):
                label = f"w{meta['num_warps']} grid={min(m, sms)}" + (f" pf_l2={pf}" if pf else "")
                yield from _checked(partial(one, x, y, m, n, stride, **{**meta, "PF_L2": pf}), y, ref,
                                    "softmax.realigned", (m, n), label, moved)
