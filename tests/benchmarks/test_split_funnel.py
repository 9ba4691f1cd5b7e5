"""benchmarks/experimental_split_funnel.py: softmax's realigned split reading x through FUNNEL (two aligned 16-byte
vectors a run, funnel-shifted into place) computes what the planned split computes. Under the interpreter a row's
programs only meet when there is one a row, so there the chunk covers the row and the output is compared bit for bit
with the planned split's on the same chunk; on a GPU rows of several chunks run too, against fp32. The timing is
kernel_sweep.py's (family `softmax_split_funnel`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import experimental_split_funnel

from kernelproof_core.kernels import softmax
from tests.sm90_build import compile_for_sm90

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _padded(m: int, n: int, pad: int, lead: int, dtype: torch.dtype) -> torch.Tensor:
    """x (m x n) with rows padded by `pad`, its first element `lead` elements into a fresh storage."""
    storage = (torch.randn(m * (n + pad) + lead + 8, device=DEVICE) * 4).to(dtype)
    return storage[lead:lead + m * (n + pad)].view(m, n + pad)[:, :n]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad", "lead"), [
    (7, 101, 3, 0),  # odd width and padding: the row starts on every element of a vector, row after row
    (5, 61, 1, 3),  # x's first element off its 16-byte grid
    (6, 200, 9, 5),  # even width, odd padding
    (4, 33, 21, 7),  # the swiglu campaign's padding, rows of four vectors and a bit
    (9, 9, 1, 1),  # rows barely over one vector: only edge vectors and at most one whole one
    (5, 100, 2, 1),  # an even padding (the plan reads those in pairs; the kernel reads any)
])
def test_funnel_split_matches_the_planned_split(m: int, n: int, pad: int, lead: int, dtype: torch.dtype) -> None:
    x = _padded(m, n, pad, lead, dtype)
    chunk_bytes = 2 * triton.next_power_of_2(n + 7)  # the row's whole window in one chunk: one program a row
    y = torch.full((m, n), float("nan"), dtype=dtype, device=DEVICE)
    assert experimental_split_funnel.run(x, y, chunk_bytes, warps=1)[0] == 1
    plan = softmax._split_realigned_plan(m, n, x.stride(0), 2, chunk_bytes, 1)
    planned = torch.full((m, n), float("nan"), dtype=dtype, device=DEVICE)
    softmax._run(plan, x, planned, m, n, x.stride(0))
    if DEVICE.type == "cpu":
        assert torch.equal(y, planned)
    else:  # compiled, the two builds may reduce in another order
        torch.testing.assert_close(y.float(), planned.float(), atol=2e-3, rtol=1e-2)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=2e-3, rtol=1.6e-2)


@pytest.mark.skipif(DEVICE.type != "cuda", reason="a row's programs meet only on a GPU")
@pytest.mark.parametrize(("m", "n", "pad"), [(300, 43657, 9), (128, 40001, 3), (64, 60001, 5), (96, 36001, 1)])
def test_funnel_split_rows_of_many_chunks(m: int, n: int, pad: int) -> None:
    x = _padded(m, n, pad, 0, torch.bfloat16)
    y = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    assert experimental_split_funnel.run(x, y)[0] > 1
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=1e-2, rtol=1.6e-2)


def test_an_input_off_the_allocators_grid_is_refused() -> None:
    raw = torch.randn(5 * 26 + 1, device=DEVICE).to(torch.bfloat16)
    x = torch.empty(0, dtype=torch.bfloat16, device=DEVICE).set_(raw.untyped_storage()[2:], 0, (5, 23), (26, 1))
    assert x.data_ptr() % 16 == 2 and x.storage_offset() == 0
    with pytest.raises(ValueError, match="16-byte grid"):
        experimental_split_funnel.run(x, torch.empty((5, 23), dtype=torch.bfloat16, device=DEVICE))


_COMPILE = """
import json, re, sys, torch
sys.path.insert(0, sys.argv[2])
import experimental_split_funnel
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, pad in json.loads(sys.argv[1]):
    x = torch.empty(m, n + pad, dtype=torch.bfloat16)[:, :n]
    y = torch.empty(m, n, dtype=x.dtype)
    with compile_only("cuda", 90, 32):
        ptx = experimental_split_funnel.run(x, y)[1].asm["ptx"]
        plan = softmax._split_realigned_plan(m, n, n + pad, 2)
        planned = plan.launch(x, y, y, y, m, n, n + pad, plan.n_parts, **plan.meta).asm["ptx"]
    out.append({k: [p.count("ld.global.v4"), len(re.findall(r"ld\\.global[^;]*\\.b16", p)), p.count(".local")]
                for k, p in (("funnel", ptx), ("planned", planned))})
print(json.dumps(out))
"""


def test_funnel_split_reads_x_in_16_byte_vectors() -> None:
    """Built for sm_90 at the hidden draw's shape: the FUNNEL split reads x in 16-byte vectors (two a window
    vector: 8 KB chunks on 4 warps are 4 vectors a thread) and element by element only at the row's two edge
    vectors (16 elements over 128 threads: one a thread), where the planned split reads all 32 of a thread's
    elements alone; nothing in local memory either way."""
    (r,) = compile_for_sm90(_COMPILE, [[1965, 43657, 9]])
    v4, b16, local = r["funnel"]
    assert (v4, b16, local) == (8, 1, 0), r
    assert r["planned"][0] == 0 and r["planned"][1] >= 32 and r["planned"][2] == 0, r
