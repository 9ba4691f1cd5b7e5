"""kernel_sweep.py family `softmax_padded`: 16-bit softmax rows of 8193-32768 whose row padding is not a whole number
of vectors (the hidden `odd` profile's draws of 64 MB and more: 46-67% of copy in the campaigns, 1029 x 16655
padded by 3 at 46-50% in evidence/h200/2026-12-02_in_vec_table/2_*). Rows wider than 16384 take the realigned
kernel on one power-of-two window: 16662 positions in 32768 lanes, 128 registers a thread on 16 warps and 88 bytes
of stack (an sm_90 build), x read element by element. Timed against it: the window in parts (16384 + 1024 lanes),
8 warps, one or two programs an SM, and FLAT_X (x read in flat runs, consecutive threads on consecutive elements,
then regrouped in vectors through shared memory: one 64-byte access a warp instruction where the vector layout's
scalar loads span 512 bytes), beside eager and torch.compile. Each config is checked against fp32 before it is timed.
Written and compiled for sm_90, not yet run. The builds (1029 x 16655 padded by 3, registers / stack bytes a thread):
one window on 16 warps 128 / 88, with FLAT_X 128 / 216; in parts (16384 + 2048) 128 / 0 either way; on 8 warps one
window spills 104 (824 with FLAT_X), parts none. Rows of 9001-16384 padded off the vector grid take the row kernel
today (scalar accesses both ways): the realigned kernel is new to them here.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_resident import _correct

from kernelproof_core.kernels import softmax
from kernelproof_core.tasks import get_task

# (rows, width, row padding): the hidden draw above, then padded widths across the realigned kernel's range
SHAPES = ((1029, 16655, 3), (1024, 16655, 2), (1500, 12001, 6), (2048, 9001, 5), (700, 24001, 1), (620, 30001, 7),
          (1024, 20000, 3))


def _parts_options(n: int) -> list[tuple[int, int, int]]:
    """One power-of-two window and, where softmax._parts' rounding cuts the row's span in parts, those parts."""
    one = (softmax._window(n, 2), 0, 0)
    cut = softmax._parts(n, 2, max_span=softmax._MAX_FUSED_N)
    return [one] if cut == one else [one, cut]


def softmax_padded_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    sms = softmax._num_sms(device)
    for m, n, pad in SHAPES:
        x = (torch.randn(m, n + pad, dtype=dtype, device=device) * 4)[:, :n]
        y = torch.empty((m, n), dtype=dtype, device=device)
        ref = torch.softmax(x.float(), -1)
        moved = 2 * m * n * x.element_size()
        yield ("softmax.planned", (m, n), f"planned pad={pad}", partial(softmax.candidate, x), moved, True)
        yield ("softmax.eager", (m, n), "eager", partial(torch.softmax, x, -1), moved, False)
        yield ("softmax.inductor", (m, n), "torch.compile", partial(torch.compile(get_task("softmax").baseline()), x),
               moved, False)
        for parts, warps, per_sm, flat in itertools.product(_parts_options(n), (8, 16), (1, 2), (False, True)):
            launch, meta = softmax._realigned_plan(m, n, n + pad, x.element_size(), sms, per_sm, warps, False, parts)
            if flat and meta["ALIGN_X"] >= meta["VEC"]:
                continue
            run = partial(launch, x, y, m, n, n + pad, **{**meta, "FLAT_X": flat})
            label = "+".join(str(p) for p in parts if p) + f" warps={warps} per_sm={per_sm}" + (" flat" if flat else "")
            y.fill_(float("nan"))
            run()
            if _correct(y, ref, f"softmax.realigned {m}x{n} pad={pad} {label}"):
                yield ("softmax.realigned", (m, n), label, run, moved, False)
