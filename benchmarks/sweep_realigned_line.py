"""kernel_sweep.py family `softmax_realigned_line`: the realigned register kernel (16-bit rows of up to 32768 off the
16-byte grid: the campaign's hidden_spike, hidden_odd and narrower draws) with its windows on 16-byte vectors, as
planned, against the same launch with windows on 128-byte lines (LINE, softmax._realigned_on_lines), the change that
ran the resident kernel's windows 4-14 points ahead on an H100 (evidence/h100/2026-12-06_seventeenth/1_*)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_resident import _correct_twice

from kernelproof_core.kernels import softmax

# (m, n, pad): hidden_spike (1938 x 13130) and its neighbours, three-part and two-part windows, the narrow configs,
# a padded hidden_odd-like row (its x off y's grid; 14293 + 63 lanes would not fit its 14336) and a wider two-part one.
SHAPES = ((1938, 13130, 0), (1960, 13778, 0), (2000, 12345, 0), (4096, 9554, 0), (3921, 6608, 0), (8192, 3001, 0),
          (1898, 14261, 20), (2048, 20001, 0))


def softmax_realigned_line_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """At each shape the planned launch, then, where the plan is the realigned kernel and its window covers the n + 63
    lanes a row starting anywhere in a line spans, the same launch with windows on vectors and with LINE (planned
    there since the eighteenth session); each checked against fp32 twice."""
    for m, n, pad in SHAPES:
        x = (torch.randn(m, n + pad, dtype=dtype, device=device) * 4)[:, :n]
        y, ref, moved = torch.empty((m, n), dtype=dtype, device=device), torch.softmax(x.float(), -1), 4 * m * n
        plan = softmax._plan(m, n, n + pad, x.element_size(), device, dtype)
        yield ("softmax.planned", (m, n), f"planned pad={pad}", partial(softmax.candidate, x), moved, True)
        if not isinstance(plan, tuple) or "WINDOW" not in plan[1]:
            print(f"softmax.realigned_line {m}x{n}: not the realigned kernel", flush=True)
            continue
        vectors = (plan[0], {k: v for k, v in plan[1].items() if k != "LINE"})
        try:
            lines = softmax._realigned_on_lines(vectors, n, x.element_size())
        except ValueError as exc:
            print(f"softmax.realigned_line {m}x{n}: {exc}", flush=True)
            continue
        for line, launch in ((0, vectors), (64, lines)):
            meta = launch[1]
            label = (f"line={line} pad={pad} WINDOW={meta['WINDOW']}+{meta['PART1']}+{meta['PART2']} "
                     f"THREAD_STATS={meta.get('THREAD_STATS', 0)} warps={meta['num_warps']}")
            run = partial(softmax._run, launch, x, y, m, n, n + pad)
            if _correct_twice(run, y, ref, f"softmax.realigned_line {m}x{n} {label}"):
                yield ("softmax.realigned_line", (m, n), label, run, moved, False)
