"""kernel_sweep.py families for experimental_wide.py's softmax designs, each config checked against an fp32
reference before it is timed, beside the built-in's planned launch on the same input."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial

import experimental_wide
import torch
from sweep_common import Trial
from sweep_parity import _checked

from kernelproof_core.kernels import softmax


def softmax_reread_odd_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Padded rows whose padding is not a whole number of vectors (and two that are, for reference): the reductions
    on x's own vector window, the output pass re-reading x at y's window positions from cache, over programs per SM,
    warps and eviction hints, against the planned launch (realigned with scalar x loads, or the row kernel)."""
    for m, n, pad in ((1003, 19382, 13), (1080, 30898, 7), (2048, 32000, 3), (2048, 32000, 6), (4056, 5207, 3),
                      (2048, 12001, 5), (4096, 8192, 1)):
        x = torch.randn(m, n + pad, dtype=dtype, device=device)[:, :n]
        y = torch.empty((m, n), dtype=dtype, device=device)
        moved = 2 * x.numel() * x.element_size()
        ref = torch.softmax(x.float(), -1)
        yield ("softmax.planned", (m, n), f"planned pad={pad}", partial(softmax.candidate, x), moved, True)
        window = 1 << (n + 16 // x.element_size() - 2).bit_length()
        for per_sm, warps, evict in itertools.product((1, 2, 4, 8), (4, 8, 16, 32), (False, True)):
            if not 8 <= window // (warps * 32) <= 64 or per_sm * warps > 64 or (evict and per_sm * warps != 32):
                continue
            launch = partial(experimental_wide.softmax_reread, x, y, per_sm, warps, evict)
            label = f"pad={pad} per_sm={per_sm} warps={warps}" + (" evict" if evict else "")
            if _checked(launch, y, ref, f"softmax.reread {m}x{n} {label}"):
                yield ("softmax.reread", (m, n), label, launch, moved, False)


def softmax_split_realigned_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Rows of 32769-65536, unaligned (and aligned, for reference): the split path with chunks cut from the row's
    vector window, over chunk bytes and warps, against the planned launch (the split path, chunks cut from the
    row)."""
    for m, n in ((2048, 33508), (1024, 40001), (700, 49999), (1024, 65535), (1024, 65536), (512, 40000)):
        x = torch.randn(m, n, dtype=dtype, device=device)
        y = torch.empty_like(x)
        moved = 2 * x.numel() * x.element_size()
        ref = torch.softmax(x.float(), -1)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        for chunk_bytes, warps in itertools.product((8192, 16384, 32768), (4, 8, 16)):
            if not 8 <= chunk_bytes // x.element_size() // (warps * 32) <= 64:
                continue
            launch = partial(experimental_wide.softmax_split_realigned, x, y, chunk_bytes, warps)
            label = f"chunk={chunk_bytes // x.element_size()} warps={warps}"
            if _checked(launch, y, ref, f"softmax.split_realigned {m}x{n} {label}"):
                yield ("softmax.split_realigned", (m, n), label, launch, moved, False)
