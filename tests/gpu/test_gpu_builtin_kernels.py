"""The built-in kernels' GPU-only paths and the speed-of-light reference, on a real GPU. Skipped without CUDA.

Softmax's split path (rows 32769-65536 wide: one program per chunk, partials exchanged through a per-row counter)
cannot run under the interpreter, which runs programs one after another, so this is where its cross-program
rendezvous is tested: odd widths, -inf entries, padded rows, bit-exact replays.
"""

from __future__ import annotations

import pytest
import torch

from kernelproof_core.kernels import softmax

pytestmark = pytest.mark.gpu
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(("shape", "path"), [((3, 32769), softmax._Split), ((257, 65536), softmax._Split),
                                             ((1991, 33508), softmax._Split), ((64, 131072), softmax._Staged),
                                             ((5, 128256), softmax._Staged), ((2, 250007), softmax._Staged)])
def test_wide_softmax_matches_fp32_reference(shape: tuple[int, int], path: type, dtype: torch.dtype) -> None:
    """Both wide-row paths (split up to 65536 wide, staged beyond) against an fp32 reference."""
    m, n = shape
    x = (torch.randn(m, n, device="cuda") * 4).to(dtype)
    x[0, ::7] = float("-inf")  # masked logits, as attention produces
    x[-1, : n // 2] = float("-inf")  # whole chunks of -inf: their partials are (max=-inf, sum=0)
    plan = softmax._plan(m, n, n, x.element_size(), x.device)
    assert isinstance(plan, path), plan
    y = softmax.candidate(x)
    ref = torch.softmax(x.float(), dim=-1)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y.float(), ref, rtol=2e-2 if dtype != torch.float32 else 1e-5, atol=1e-6)
    assert torch.equal(softmax.candidate(x), y), "replays must be bit-exact (fixed reduction order)"


@requires_cuda
def test_split_softmax_on_padded_rows() -> None:
    base = torch.randn(33, 70000, device="cuda", dtype=torch.bfloat16)
    x = base[:, :65600]  # row stride 70000, not the width
    y = softmax.candidate(x)
    assert y.is_contiguous()
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=2e-2, atol=1e-6)


@requires_cuda
def test_copy_reference_is_the_best_method() -> None:
    from kernelproof_core.environment import copy_bandwidth_gbps
    from kernelproof_core.measurement.copy_reference import measure_copy_gbps

    methods = measure_copy_gbps(256 << 20, 5)
    assert set(methods) == {"memcpy", "triton"}
    assert all(500 < v < 20000 for v in methods.values()), methods  # GB/s a real GPU's HBM can do
    assert copy_bandwidth_gbps(256 << 20, 5) >= 0.97 * max(methods.values())
