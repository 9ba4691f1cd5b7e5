"""swiglu's FUNNEL path (padded 16-bit rows whose paddings are odd): each output vector's run read as the two aligned
16-byte vectors holding it and funnel-shifted into place. Bit for bit the flat kernel on contiguous copies at every
alignment of the inputs, planned exactly where the paddings are odd, and built for sm_90 with 16-byte reads."""

from __future__ import annotations

import pytest
import torch

from kernelproof_core.kernels import swiglu
from tests.conftest import HAS_CUDA
from tests.sm90_build import compile_for_sm90

DEVICE = torch.device("cuda" if HAS_CUDA else "cpu")


def _flat(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    m, n = g.shape
    y = torch.full((m, n), float("nan"), dtype=g.dtype, device=g.device)
    swiglu._swiglu_flat[(-(-m * n // 64),)](g.contiguous(), u.contiguous(), y, m * n, BLOCK=64)
    return y


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad", "lead"), [
    (37, 101, 3, 0),  # odd width, odd padding: runs start on every element of a vector
    (20, 61, 1, 3),  # the input's first element off its 16-byte grid (lead)
    (16, 64, 5, 1),  # even width, odd padding
    (9, 17, 21, 7),  # the campaign's padding (21), rows of two vectors and a bit
    (12, 8, 7, 1),  # one vector a row: every vector straddles or ends a row
    (3, 1001, 3, 2),  # the last block partial
    (9, 17, 2, 7),  # an even padding (planned on SHIFTED, but the kernel reads any)
    (33, 99, 0, 5),  # no padding, the input off its grid
    (7, 9, 21, 6),  # rows barely over one vector, a wide padding
])
def test_funnel_is_bit_exact_to_the_flat_kernel(m: int, n: int, pad: int, lead: int, dtype: torch.dtype) -> None:
    """At every padding and input offset, row ends inside vectors and the last partial block, the kernel (on a
    64-element block, so that most blocks hold a row end) writes what the flat kernel writes, and nothing past y."""
    storage = torch.randn(m * (n + pad) + lead + 8, device=DEVICE).to(dtype)
    g = storage[lead:lead + m * (n + pad)].view(m, n + pad)[:, :n]
    u = torch.randn(m, n + pad + 1, device=DEVICE).to(dtype)[:, 1:n + 1]  # u's own offset (1) and padding
    out = torch.full((m * n + 16,), 7.0, dtype=dtype, device=DEVICE)
    swiglu._launch_funnel(swiglu._swiglu_funnel[(-(-m * n // 64),)], g, u, out, m * n, n, g.stride(0), u.stride(0),
                          BLOCK=64, WIDE=False, num_warps=1)
    assert torch.equal(out[:m * n].view(m, n), _flat(g, u))
    assert bool((out[m * n:] == 7.0).all())


@pytest.mark.parametrize(("n", "pad_g", "pad_u", "funnel"), [
    (23, 3, 1, True),  # odd paddings
    (24, 5, 0, True),  # even width, one odd padding, the other input contiguous
    (23, 2, 6, False),  # even paddings: SHIFTED
    (23, 8, 16, False),  # paddings of whole vectors: SHIFTED
    (42, 2, 4, False),  # even width and paddings: inputs in pairs
])
def test_funnel_is_planned_exactly_where_a_padding_is_odd(n: int, pad_g: int, pad_u: int, funnel: bool) -> None:
    """16-bit rows off the 16-byte grid whose width and paddings share no factor of 2 take FUNNEL; the candidate
    then writes the flat kernel's output."""
    m = 9
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        g = torch.randn(m, n + pad_g, device=DEVICE).to(dtype)[:, :n]
        u = torch.randn(m, n + pad_u, device=DEVICE).to(dtype)[:, :n]
        launch, meta, flat = swiglu._plan(m, n, g.stride(0), u.stride(0), g.element_size(), g.device)
        planned = getattr(launch, "func", None) is swiglu._launch_funnel
        assert planned == (funnel and dtype != torch.float32) and not flat, (dtype, meta)
        assert swiglu.candidate(g, u).equal(_flat(g, u))


def test_funnel_falls_back_to_element_reads_off_the_allocators_grid() -> None:
    """An input whose storage itself starts off the 16-byte grid (the kernel could not see it from an aligned base
    inside the storage) takes the element reads and still writes the flat kernel's output."""
    m, n, pad = 5, 23, 3
    raw = torch.randn(m * (n + pad) + 1, device=DEVICE).to(torch.bfloat16)
    # a storage of its own that starts one element into raw's: storage offset 0, data 2 bytes off the grid
    g = torch.empty(0, dtype=torch.bfloat16, device=DEVICE).set_(raw.untyped_storage()[2:], 0, (m, n), (n + pad, 1))
    assert g.data_ptr() % 16 == 2 and g.storage_offset() == 0
    u = torch.randn(m, n + pad, device=DEVICE).to(torch.bfloat16)[:, :n]
    assert swiglu.candidate(g, u).equal(_flat(g, u))


_COMPILE_FUNNEL = """
import json, re, sys, torch
from kernelproof_core.kernels import swiglu
from kernelproof_core.precompile import compile_only
out = []
for dtype, pad in json.loads(sys.argv[1]):
    g = torch.empty(64, 1001 + pad, dtype=getattr(torch, dtype))[:, :1001]
    y = torch.empty(64, 1001, dtype=g.dtype)
    with compile_only("cuda", 90, 32):
        ptx = swiglu._swiglu_funnel[(1,)](g, g, y, 64 * 1001, 1001, 1001 + pad, 1001 + pad, 0, 0, BLOCK=512,
                                          WIDE=False, num_warps=2).asm["ptx"]
    out.append({"v4_loads": ptx.count("ld.global.v4"), "b16_loads": len(re.findall(r"ld\\.global[^;]*\\.b16", ptx)),
                "local": ptx.count(".local")})
print(json.dumps(out))
"""


def test_funnel_reads_its_inputs_in_16_byte_vectors() -> None:
    """Built for sm_90: a full block reads each input as two 16-byte vectors a vector's run, and the next row's two
    for a straddling vector's tail (8 in all); element reads only in the last block's path (8 a thread for each
    input); nothing in local memory. Timings: kernel_sweep.py --only swiglu_funnel."""
    for r in compile_for_sm90(_COMPILE_FUNNEL, [["bfloat16", 21], ["float16", 1]]):
        assert r == {"v4_loads": 8, "b16_loads": 16, "local": 0}, r
