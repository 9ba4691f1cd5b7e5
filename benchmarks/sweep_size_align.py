"""kernel_sweep.py family `softmax_size_align`: is a softmax case under 90% of copy short because of its size or
because its rows are off the 16-byte grid?

The H200 campaign at 20e78eb (evidence/h200/2026-12-05_pair_on_h200/3_*) has contiguous softmax cases under 90% whose
rows start off the 16-byte grid: `hidden_constant` 2770 x 7294 (80.8 MB moved, 79%), `random0` 1723 x 25249 (83%),
`random2` 1991 x 33508 (76%); the draw before, 1830 x 6132, was at 80%. Each is timed here beside the same rows
widened or narrowed to the grid (a multiple of 8 elements: same bytes within 0.2%), beside the same width with four
times the rows (is it the working set: 80 MB is 19 us at copy speed, where a launch's ramp and last wave weigh
more), and beside torch's copy of the same tensor (the ceiling at that size, which the speed of light's copy figure,
measured on a large buffer, does not show). Every softmax launch is checked against the fp32 softmax first.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial, output_close, softmax_inputs

# (rows, width): each campaign draw, its width on the 16-byte grid (below and above where both exist), and four
# times its rows
SHAPES = ((2770, 7294), (2770, 7288), (2770, 7296), (11080, 7294), (11080, 7296),
          (1830, 6132), (1830, 6136), (7320, 6132), (7320, 6136),
          (1723, 25249), (1723, 25256), (6892, 25249), (6892, 25256),
          (1991, 33508), (1991, 33512), (7964, 33508), (7964, 33512))


def softmax_size_align_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    for m, n in SHAPES:
        x, y, ref, moved, planned = softmax_inputs(m, n, 3.0, dtype, device)
        grid = "on" if n % 8 == 0 else "off"
        yield ("copy.torch", (m, n), f"y.copy_(x) rows {grid} the grid", partial(y.copy_, x), moved, False)
        kind, shape, _, launch, _, chosen = planned
        if output_close(launch(), ref, f"softmax_size_align {m}x{n}"):  # it returns its output
            yield (kind, shape, f"planned rows {grid} the grid", launch, moved, chosen)
