"""kernel_sweep.py family `softmax_small_rows`: short softmax rows off the 16-byte grid in tensors of 1-8 MB, where
the campaign found the built-in behind eager (bf16 `tail127`, 4096 x 127: 2.84 us kernel time against eager's 2.37,
evidence/h200/2026-12-02_carry_rms_resident/4_gpu_campaign/). The row kernel over rows per program and warps, and the
realigned (vector window) kernel over programs per SM and warps, beside eager and torch.compile, each checked against
fp32 before it is timed.

Family `rms_norm_small_rows`: the same question for rms_norm (bandwidth.py, bf16 4096 x 127: 2.85 us kernel time
against torch.compile's 2.66 in evidence/h200/2026-12-02_in_vec_table/3_*, 3.76 in the run before): the row kernel
over rows per program, warps and the re-read, beside torch.compile and Liger."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial, rms_norm_close, rms_norm_inputs, rms_norm_planned, rms_norm_ref
from sweep_parity import _others
from sweep_resident import _correct, inputs

from kernelproof_core.kernels import rms_norm, softmax
from kernelproof_core.tasks import get_task

# scalar rows (shipped: _SHORT_*), then rows of 8-byte accesses (shipped: _PACKED_*, from
# evidence/h200/2026-12-02_pending_runs/1_*), then rows of 4-byte accesses (planned as the 8-byte ones, checking that)
SHAPES = ((4096, 127), (8192, 127), (4096, 255), (16384, 100), (32768, 100), (8192, 196), (16384, 60), (65536, 100),
          (16384, 98), (8192, 194), (32768, 62))


def softmax_small_rows_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    for m, n in SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        yield ("softmax.eager", (m, n), "eager", partial(torch.softmax, x, -1), moved, False)
        yield ("softmax.inductor", (m, n), "torch.compile", partial(torch.compile(get_task("softmax").baseline()), x),
               moved, False)
        block_n = 1 << (n - 1).bit_length()
        for block_m, warps in itertools.product((1, 2, 4, 8, 16, 32), (1, 2, 4, 8)):
            if block_m * block_n < 32 * warps:
                continue
            meta = {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": softmax._align(x.element_size(), n),
                    "num_warps": warps}
            run = partial(softmax._softmax_rows[(-(-m // block_m),)], x, y, m, n, n, **meta)
            y.fill_(float("nan"))
            run()
            if _correct(y, ref, f"softmax.rows {m}x{n} {meta}"):
                yield ("softmax.rows", (m, n), f"block_m={block_m} warps={warps}", run, moved, False)
        if n % 2 == 0:  # the realigned kernel lost 2-3x on scalar rows of these widths; not tried on even ones
            continue
        window = softmax._window(n, x.element_size())
        for per_sm, warps in itertools.product((4, 8, 16, 32), (1, 2, 4)):
            if 32 * warps > 2 * (window // 8):  # over two threads a vector of the window
                continue
            launch, meta = softmax._realigned_plan(m, n, n, x.element_size(), softmax._num_sms(device), per_sm, warps,
                                                   False, (window, 0, 0))
            run = partial(launch, x, y, m, n, n, **meta)
            y.fill_(float("nan"))
            run()
            if _correct(y, ref, f"softmax.realigned {m}x{n} per_sm={per_sm} warps={warps}"):
                yield ("softmax.realigned", (m, n), f"window={window} per_sm={per_sm} warps={warps}", run, moved,
                       False)


RMS_SHAPES = ((4096, 127), (8192, 127), (4096, 255), (16384, 100), (4096, 1000), (8192, 196))


def rms_norm_small_rows_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    for m, n in RMS_SHAPES:
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        yield rms_norm_planned(x, w, moved)
        ref = rms_norm_ref(x, w)
        block_n = 1 << (n - 1).bit_length()
        for block_m, warps, reread in itertools.product((1, 2, 4, 8, 16, 32), (1, 2, 4, 8), (False, True)):
            if not 32 * warps <= block_m * block_n <= 64 * 32 * warps:
                continue
            meta = {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": rms_norm._align(x.element_size(), n),
                    "REREAD": reread, "num_warps": warps}
            run = partial(rms_norm._rms_norm_rows[(-(-m // block_m),)], x, w, y, m, n, n, 1e-6, **meta)
            y.fill_(float("nan"))
            run()
            if rms_norm_close(y, ref, f"rms_norm.rows {m}x{n} {meta}"):
                yield ("rms_norm.rows", (m, n), f"block_m={block_m} warps={warps}" + (" reread" if reread else ""),
                       run, moved, False)
        for name, other in _others("rms_norm", (x, w, 1e-6)):
            yield (f"rms_norm.{name}", (m, n), name, other, moved, False)
