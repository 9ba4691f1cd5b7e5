"""The experimental kernels the sweep evaluates compute the right thing before any timing of them means anything.

Under the interpreter programs run one after another, so a row's programs can only meet when there is one per row:
these tests run the split rms_norm with one chunk per row (its arithmetic, masks, strides and the counter path);
the many-chunk rendezvous runs on the GPU, checked by benchmarks/kernel_sweep.py before it is timed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import experimental_kernels

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [1000, 1001])  # aligned and unaligned rows
def test_split_rms_norm_matches_the_reference(n: int, dtype: torch.dtype) -> None:
    base = torch.randn(5, n + 24, device=DEVICE).to(dtype)
    x = base[:, :n]  # padded rows: stride n + 24
    w = torch.randn(n, device=DEVICE).to(dtype)
    y = experimental_kernels.rms_norm_split(x, w, 1e-6, chunk=1024, warps=4)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(y.float(), ref, rtol=2e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-5)
    assert torch.equal(experimental_kernels.rms_norm_split(x, w, 1e-6, chunk=1024, warps=4), y)
