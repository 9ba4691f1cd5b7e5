"""kernel_sweep.py family `softmax_fma_exp`: the realigned register kernel's planned launch with FMA_EXP (exponents by
one fused multiply-add against the max times log2 e; softmax._FMA_EXP, an experiment, off) and without it (the max
subtracted, then multiplied by log2 e), at THREAD_STATS windows (the campaign's random0 and hidden_spike draws),
windows without THREAD_STATS (fp16 8192 x 3001, the hidden_constant draw 2770 x 7294) and rows padded off the vector
grid (the hidden_odd draws). Each launch is checked against fp32 twice, on logits offset by 1e4 as well."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_resident import _correct_twice

from kernelproof_core.kernels import softmax

# (m, n, pad)
SHAPES = ((1723, 25249, 0), (2048, 32768, 0), (1938, 13130, 0), (2048, 20001, 0), (8192, 3001, 0), (2770, 7294, 0),
          (1322, 23450, 1), (1898, 14261, 1), (4096, 9554, 0))


def softmax_fma_exp_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """At each shape the planned launch, then the realigned kernel's launch with FMA_EXP and without it."""
    for m, n, pad in SHAPES:
        x = (torch.randn(m, n + pad, dtype=dtype, device=device) * 4)[:, :n]
        y, ref, moved = torch.empty((m, n), dtype=dtype, device=device), torch.softmax(x.float(), -1), 4 * m * n
        plan = softmax._plan(m, n, n + pad, x.element_size(), device, dtype)
        if not isinstance(plan, tuple) or "WINDOW" not in plan[1]:
            print(f"softmax.fma_exp {m}x{n}: not the realigned kernel", flush=True)
            continue
        meta = plan[1]
        label = (f"pad={pad} WINDOW={meta['WINDOW']}+{meta['PART1']}+{meta['PART2']} "
                 f"THREAD_STATS={meta.get('THREAD_STATS', 0)} warps={meta['num_warps']}")
        yield ("softmax.planned", (m, n), f"planned FMA_EXP={int(bool(meta.get('FMA_EXP')))} {label}",
               partial(softmax.candidate, x), moved, True)
        # padded as x is (the launch reads rows n + pad apart)
        offset = torch.empty((m, n + pad), dtype=dtype, device=device)[:, :n]
        offset.copy_(x.float().add(1e4 if dtype == torch.bfloat16 else 6e3))
        off_ref = torch.softmax(offset.float(), -1)
        for fma in (False, True):
            launch = (plan[0], {**meta, "FMA_EXP": fma})
            run = partial(softmax._run, launch, x, y, m, n, n + pad)
            off_run = partial(softmax._run, launch, offset, y, m, n, n + pad)
            name = f"softmax.fma_exp {m}x{n} FMA_EXP={int(fma)} {label}"
            if _correct_twice(off_run, y, off_ref, f"{name} offset") and _correct_twice(run, y, ref, name):
                yield ("softmax.fma_exp", (m, n), f"FMA_EXP={int(fma)} {label}", run, moved, False)
