"""kernel_sweep.py family `softmax_tail`: how much of the wide softmax rows' gap to copy bandwidth is the last round.
Programs hold whole rows, so the busiest SM does ceil(rows / SMs) rows (2048 rows on 132 SMs: 16 against 15.52 on
average, 97.0%; 1723: 14 against 13.05, 93.2%). The planned launch on the campaign's row counts and on whole
multiples of the SM count next to them (same width, same kernel), and the realigned kernel on 1 and 2 programs an SM:
if whole rounds reach 90% where the campaign's counts stay at 88-89%, cutting the last round's rows in parts is worth
building (benchmarks/NOTES.md, "Still to do")."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_resident import _correct, inputs

from kernelproof_core.kernels import softmax

# (width, row counts as multiples of the SM count: the campaign's count lies between the two given)
WIDTHS = ((32000, (15, 16)), (32768, (15, 16)), (25249, (13, 14)), (65536, (7, 8)), (33508, (14, 16)))
CAMPAIGN_ROWS = {32000: 2048, 32768: 2048, 25249: 1723, 65536: 1024, 33508: 1991}


def softmax_tail_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    n_sm = softmax._num_sms(device)
    for n, (lo, hi) in WIDTHS:
        for m in (lo * n_sm, CAMPAIGN_ROWS[n], hi * n_sm):
            x, y, ref, moved = inputs(m, n, dtype, device)
            yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
            if n > softmax._MAX_FUSED_N:
                continue
            for per_sm in (1, 2):
                launch, meta = softmax._realigned_plan(m, n, n, x.element_size(), n_sm, per_sm, 16, False)
                run = partial(launch, x, y, m, n, n, **meta)
                y.fill_(float("nan"))
                run()
                if _correct(y, ref, f"softmax.realigned {m}x{n} per_sm={per_sm}"):
                    yield ("softmax.realigned", (m, n), f"per_sm={per_sm} warps=16", run, moved, False)
