"""kernel_sweep.py family `softmax_mid`: 16-bit softmax rows of 4097-16384 off the 16-byte grid on the realigned
kernel, contiguous or padded, across programs an SM, warps and PF_L1. The campaign of
evidence/h200/2026-12-02_pf_l1_plan/2_* drew contiguous 1960 x 13778 (`hidden_spike`, 54% of copy on the planned
8192+4096+2048 lanes, 16 warps, 2 an SM), 3305 x 7975 (82%) and 3249 x 7298 (80%). PF_L1 takes registers down
(8192+4096 lanes on 8 warps: 80 against 128 in pf_l1_plan/1_*), so three or four programs may fit an SM where two
did; the planned configs were chosen before PF_L1 existed and on few shapes. Every config is checked against fp32
before it is timed.

H200, bf16, CUPTI (evidence/h200/2026-12-02_pf_l1_plan/3_*, then 4_* with the plan below): three-part windows with a
2048 part on 16 warps hold 88 registers, so one program fits an SM where two were planned: 1960 x 13778 47.2 us
(54.6%) against 33.0 on 8 warps (77.9%); planned on 8 since (33.3 us in 4_*). Two-part windows keep 16 warps (8192
+2048: 26.1 against 28.2 on 8 at 2048 x 10001; 8192+4096 level either way at contiguous 12001 and aligned 12288).
PF_L1 won only on padded 8192+1024 lanes (2048 x 9001 padded by 5: 26.9 us on 3 programs an SM against 29.7
planned; planned since, 27.9 in 4_*) and by 1-2% on padded 8192-lane windows (3000 x 7001 26.3-26.4 against
26.8-26.9, 8 an SM; not planned); on contiguous rows its best config was 6-26% behind the best without it at
every shape. Elsewhere the planned launch was best or within 2.5% of the best config (3249 x 7298 27.7 on 3 an SM
against 28.3-28.5; 4056 x 5207 25.4-25.5 against 26.1).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_padded import padded_inputs, realigned_trials

from kernelproof_core.kernels import softmax

# (rows, width, row padding): the campaign's contiguous draws first, then widths across 4097-16384 lanes
SHAPES = ((1960, 13778, 0), (2000, 12345, 0), (4096, 12901, 0), (2048, 10001, 0), (2048, 9554, 0), (3305, 7975, 0),
          (3249, 7298, 0), (4056, 5207, 0), (1500, 12001, 6), (2048, 9001, 5), (3000, 7001, 2), (4096, 5001, 1),
          (2048, 12001, 0), (2048, 12288, 0))
MID = ((8, 2), (8, 3), (8, 4), (16, 1), (16, 2))  # (warps, programs an SM) over 8192 lanes
NARROW = ((4, 4), (4, 8), (8, 2), (8, 3), (8, 4), (8, 8))  # up to 8192 lanes


def _cuts(n: int) -> list[tuple[int, int, int]]:
    """softmax._parts' cut of the span and, up to 8192 lanes, one power-of-two window too (over 8192 it lost to the
    parts at every padded shape of padded_parts/8_*)."""
    one = (softmax._window(n, 2), 0, 0)
    cut = softmax._parts(n, 2)
    return [cut] if cut == one or sum(one) > 8192 else [one, cut]


def softmax_mid_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    sms = softmax._num_sms(device)
    for m, n, pad in SHAPES:
        x, y, ref, moved = padded_inputs(m, n, pad, dtype, device)
        yield ("softmax.planned", (m, n), f"planned pad={pad}", partial(softmax.candidate, x), moved, True)
        for parts in _cuts(n):
            configs = [(per_sm, warps) for warps, per_sm in (MID if sum(parts) > 8192 else NARROW)]
            yield from realigned_trials(x, y, ref, moved, sms, parts, configs)
