"""kernel_sweep.py family `softmax_realigned_parts`: the realigned softmax kernel with its window cut in up to three
power-of-two parts (softmax._parts: at most 12.5% of the lanes idle) against the one power-of-two window it had
before (up to half idle: 16384 lanes for a 9554-wide row), over programs per SM and warps, beside the planned launch.
Each config is checked against fp32 before it is timed. Aligned rows that are not a power of two (rows path today,
a 16384-wide tile for 9600) run through the realigned kernel too, to see whether their lanes are worth the move."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_resident import _correct, inputs

from kernelproof_core.kernels import softmax

SHAPES = ((1877, 9554), (2000, 12345), (3124, 5999), (4096, 9600), (4096, 12288), (4096, 8191), (4056, 5207),
          (8192, 3001), (4096, 2049), (4096, 4097), (4096, 10000), (1723, 25249))
# Aligned 16-bit rows of 2049-8191 that are not a power of two: the row kernel holds them in a power-of-two tile.
ALIGNED_SMALL = ((3921, 6608), (4096, 5000), (8192, 3000), (4096, 7000), (4096, 2560))
CONFIGS = ((1, 16), (1, 32), (2, 8), (2, 16), (2, 32), (4, 8), (4, 16), (8, 4), (8, 8))


def softmax_realigned_parts_trials(device: torch.device, dtype: torch.dtype,
                                   shapes: tuple[tuple[int, int], ...] = SHAPES) -> Iterator[Trial]:
    """Every shape: the planned launch, the row kernel (one row per program), the one-window kernel and the parted
    kernel over CONFIGS with 8-64 elements per thread."""
    sms = softmax._num_sms(device)
    elsize = torch.tensor([], dtype=dtype).element_size()
    for m, n in shapes:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        block = 1 << (n - 1).bit_length()
        rows = partial(softmax._softmax_rows[(m,)], x, y, m, n, n, BLOCK_M=1, BLOCK_N=block,
                       ALIGN=softmax._align(elsize, n), num_warps=16 if block == 8192 else softmax._warps(block))
        y.fill_(float("nan"))
        rows()
        if _correct(y, ref, f"softmax.rows {m}x{n}"):
            yield ("softmax.rows", (m, n), f"block={block}", rows, moved, False)
        window = softmax._window(n, elsize)
        parts = softmax._parts(n, elsize)
        for label, cut in ((f"window={window}", (window, 0, 0)), ("parts=" + "+".join(map(str, parts)), parts)):
            if cut == (window, 0, 0) and label.startswith("parts"):
                continue  # no cut: the one-window rows above are this kernel
            for per_sm, warps in CONFIGS:
                if not 8 <= sum(cut) // (32 * warps) <= 64 or per_sm * warps > 64:
                    continue
                kernel, meta = softmax._realigned_plan(m, n, x.stride(0), elsize, sms, per_sm, warps, False, cut)
                run = partial(kernel, x, y, m, n, x.stride(0), **meta)
                y.fill_(float("nan"))
                run()
                name = f"{label} per_sm={per_sm} warps={warps}"
                if _correct(y, ref, f"softmax.realigned {m}x{n} {name}"):
                    yield ("softmax.realigned", (m, n), name, run, moved, False)


def softmax_realigned_parts_aligned_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_realigned_parts_aligned`: the same trials over ALIGNED_SMALL (row kernel today)."""
    return softmax_realigned_parts_trials(device, dtype, ALIGNED_SMALL)
