"""kernel_sweep.py family `softmax_words`: the realigned softmax kernel reading x as 32-bit words (WORDS).

The realigned kernel holds the next row in registers across an iteration. Loaded as 16-bit elements, the row is
split into 16-bit values in LLVM and ptxas re-packs them with PRMTs, and in fp16's THREAD_STATS build at 32768 lanes
it spills 26 of them (STL.S16: the 52 bytes the notes name). Loaded as int32 words, two elements each, and split
only where it is used (_unwords), the held row stays two elements a register. sm_90 builds (ptxas -v, no GPU; 2048 x
32000 on one 32768-lane window, 16 warps): fp16 THREAD_STATS 1160 instructions a thread and 52 bytes of spill
against 1040 and none; bf16 THREAD_STATS 1152 against 1072; the two-reduction form 1288 against 1200 (fp16 25249 and
32768); fp16 16384+4096 with HALF_EXPS 888 instructions and 4 bytes of spill against 832 and none. The bits are the
same (the values are).

Per shape: the planned launch, its config, the same with WORDS turned the other way, and where THREAD_STATS is planned
the two-reduction form on its window with and without WORDS. Each launch checked against fp32 before it is timed.
evidence/h200/2026-12-04_words/1_* (at f30fe23, before WORDS was planned; HALF_EXPS planned on fp16 16384+4096):
WORDS ahead on 15 of 21 fp16 shapes (fp16 THREAD_STATS with it 89.9% of copy at 2048 x 32000 against the planned two
reductions' 87.8%; 8192 x 8191 86.7% against 74.6%), on 16 of 21 bf16 ones (up to +2.6 points; 2048 x 32000 and 32768
-0.4), and far behind on rows padded off the vector grid (38-45% against 71-73%; these notes first blamed PF_L1, but
those launches had none).

Family `softmax_words_padded`: the same on rows padded off the vector grid by an even count (x's rows start on a word,
not on y's vectors), which the plan read as words from 2_* until the campaign's hidden_odd (1898 x 14293 padded by
20) ran at 46-48% of copy; planned as elements since.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_padded import _checked, padded_inputs
from sweep_thread_stats import _grid, _label

from kernelproof_core.kernels import softmax

# (rows, width, padding): the campaigns' realigned cases (25249-32768 one window; hidden_constant 2412 x 7071), window
# parts, narrow 4-warp windows, and rows padded by an even count (x read at even offsets: words still line up)
SHAPES = ((2048, 32000, 0), (2048, 32768, 0), (1723, 25249, 0), (793, 28518, 0), (2048, 32001, 0), (4096, 32768, 0),
          (1024, 20001, 0), (2048, 18001, 0), (4096, 20480, 0), (700, 17001, 0), (2048, 22001, 0), (2048, 16377, 0),
          (3921, 6608, 0), (1673, 3185, 0), (2412, 7071, 0), (4096, 5000, 0), (8192, 8191, 0), (3373, 7683, 0),
          (2048, 20480, 8), (2048, 24001, 2), (2048, 11007, 4))


# (rows, width, padding): the campaign's hidden_odd draw, words' two padded shapes of 1_*, then rows across
# _padded_plan's configs (8 warps in parts, one 32768 window on 16 warps with PF_L1, 4-warp windows, PF_L1 ones)
PADDED_SHAPES = ((1898, 14293, 20), (2048, 11007, 4), (2048, 24001, 2), (1024, 20000, 2), (700, 24001, 2),
                 (620, 30001, 6), (1500, 12001, 6), (3000, 7001, 2), (4096, 5001, 2), (4096, 3001, 2),
                 (2048, 9001, 6), (8192, 2501, 2), (1029, 16655, 2),
                 # rows of 16378-16383 padded off the grid: THREAD_STATS on 16384+4096 lanes, read as words until the
                 # rule moved into _realigned_plan (elements ahead: evidence/h200/2026-12-04_thread_stats_windows/1_*)
                 (4096, 16381, 2), (2048, 16378, 4))


def softmax_words_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    yield from _words_trials(device, dtype, SHAPES)


def softmax_words_padded_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    yield from _words_trials(device, dtype, PADDED_SHAPES)


def _words_trials(device: torch.device, dtype: torch.dtype, shapes: tuple[tuple[int, int, int], ...],
                  ) -> Iterator[Trial]:
    if dtype not in (torch.float16, torch.bfloat16):
        return
    for m, n, pad in shapes:
        x, y, ref, moved = padded_inputs(m, n, pad, dtype, device)
        plan = softmax._plan(m, n, n + pad, x.element_size(), device, dtype)
        yield ("softmax.planned", (m, n), f"planned pad={pad}", partial(softmax.candidate, x), moved, True)
        if not isinstance(plan, tuple) or hasattr(plan, "_fields") or "WINDOW" not in plan[1]:
            continue  # not the realigned kernel
        launch, meta = plan
        if meta["ALIGN_X"] < 2:
            continue  # x's rows at odd offsets: no whole words
        warps, grid = meta["num_warps"], _grid(launch)
        window = (meta["WINDOW"], meta["PART1"], meta["PART2"])
        tags = "".join(f" {k.lower()}" for k in ("THREAD_STATS", "HALF_EXPS", "PF_L1", "WORDS") if meta.get(k))
        base = _label(warps, window, grid) + f" pad={pad}"
        yield from _checked(partial(launch, x, y, m, n, n + pad, **meta), y, ref, "softmax.realigned", (m, n),
                            base + tags + " (planned config)", moved)
        words = not meta.get("WORDS")
        yield from _checked(partial(launch, x, y, m, n, n + pad, **{**meta, "WORDS": words}), y, ref,
                            "softmax.realigned", (m, n), base + tags.replace(" words", "") + " words" * words, moved)
        if meta.get("THREAD_STATS") and not meta.get("PF_L1"):
            # the two-reduction form on the same window, with and without words
            for words in (False, True):
                yield from _checked(partial(launch, x, y, m, n, n + pad,
                                            **{**meta, "THREAD_STATS": 0, "HALF_EXPS": False, "WORDS": words}),
                                    y, ref, "softmax.realigned", (m, n), base + " two reductions" + " words" * words,
                                    moved)
