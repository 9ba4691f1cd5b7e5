"""kernel_sweep.py family `softmax_grid`: the realigned softmax kernel's persistent grid, programs per SM.

The realigned plans launch a fixed number of persistent programs per SM (_REALIGNED_SMALL: 8 on 4- and 8-warp
windows up to 8192 lanes; _REALIGNED_MID and _REALIGNED_CONFIG: 2 on 16 warps), chosen when those builds held 64-80
registers a thread. THREAD_STATS and WORDS builds hold more (4096+2048+1024 lanes on 4 warps: 127 registers, so 4
programs of 4 warps fit an SM's 65536 registers, not 8): the planned grid may no longer be resident at once, and a
grid twice the resident count runs as two waves of programs whose rows do not balance. Each program walks rows
pid, pid + grid, ..., so the last round of rows is partly idle whenever the row count is not a multiple of the grid.

Per shape: the planned launch, its config on 1, 2, 3, 4, 5, 6 and 8 programs an SM (where fewer than the rows), and on
one program a row. Each launch checked against fp32 before it is timed.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_padded import _checked, padded_inputs
from sweep_thread_stats import _grid, _label

from kernelproof_core.kernels import softmax

# (rows, width): 4-warp windows (the campaigns' hidden_constant 2412 x 7071, 3921 x 6608, 4096 x 5000, 1673 x 3185),
# 8-warp ones (8192 x 8191, 4096 x 8185, 3373 x 7683), 16-warp ones (2048 x 16377, 1723 x 25249 `random0`, 2048 x
# 32000 `vocab_32000`); then more rows on one 4096-lane window (THREAD_STATS, 80 registers: 6 programs an SM resident)
SHAPES = ((2412, 7071), (3921, 6608), (4096, 5000), (1673, 3185), (8192, 8191), (4096, 8185), (3373, 7683),
          (2048, 16377), (2048, 14500), (1723, 25249), (2048, 32000), (4096, 3185), (8192, 2731), (2500, 3901),
          (1000, 4001), (6000, 3333), (3000, 2049),
          # few rows on the 16-warp windows, where 2 programs an SM leave most of the last round idle (the campaign's
          # hidden_offset 625 x 30804: 2.37 rounds of 264 programs, 74.7-76.6% of copy in padded_words/2_*)
          (625, 30804), (700, 28001), (500, 32000), (900, 20001), (800, 16400))
PER_SM = (1, 2, 3, 4, 5, 6, 8)


def softmax_grid_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    if dtype not in (torch.float16, torch.bfloat16):
        return
    n_sm = softmax._num_sms(device)
    for m, n in SHAPES:
        x, y, ref, moved = padded_inputs(m, n, 0, dtype, device)
        plan = softmax._plan(m, n, n, x.element_size(), device, dtype)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        if not isinstance(plan, tuple) or hasattr(plan, "_fields") or "WINDOW" not in plan[1]:
            continue  # not the realigned kernel
        launch, meta = plan
        planned = _grid(launch)
        window = (meta["WINDOW"], meta["PART1"], meta["PART2"])
        tags = "".join(f" {k.lower()}" for k in ("THREAD_STATS", "PF_L1", "WORDS") if meta.get(k))
        grids = sorted({g for g in (*(k * n_sm for k in PER_SM), m) if g <= m} - {planned})
        yield from _checked(partial(launch, x, y, m, n, n, **meta), y, ref, "softmax.realigned", (m, n),
                            _label(meta["num_warps"], window, planned) + tags + " (planned config)", moved)
        for grid in grids:
            run = partial(softmax._softmax_realigned[(grid,)], x, y, m, n, n, **meta)
            yield from _checked(run, y, ref, "softmax.realigned", (m, n),
                                _label(meta["num_warps"], window, grid) + tags, moved)
