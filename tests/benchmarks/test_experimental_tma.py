"""The TMA experiments (experimental_tma_rows, experimental_tma_flat): their sm_90 builds issue bulk tensor copies
from one thread and advance every slot's phase, and their hosts refuse what a TMA box cannot carry."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from tests.sm90_build import compile_for_sm90

_COMPILE_TMA_ROWS = """
import json, re, sys, torch
sys.path.insert(0, sys.argv[2])
import experimental_tma_rows as t
from kernelproof_core.precompile import compile_only
out = []
for n, g, warps, boxes in json.loads(sys.argv[1]):
    x = torch.empty((64, n), dtype=torch.bfloat16)
    words = t.PartWords.for_rows(64, g, x.device) if g > 1 else None
    with compile_only("cuda", 90, 32):
        kernel = t.tma_parts(x, torch.empty_like(x), words, g, warps, 4 * g, boxes)
    ptx = kernel.asm["ptx"]
    out.append({"copies": ptx.count("cp.async.bulk.tensor.3d"), "waits": ptx.count("mbarrier.try_wait.parity"),
                "arrivals": ptx.count("mbarrier.arrive.shared"), "expects": ptx.count("mbarrier.arrive.expect_tx"),
                "per_thread_copies": ptx.count("cp.async.cg"), "local": ptx.count(".local"),
                "polls": ptx.count("ld.volatile.global"), "fences": ptx.count("membar") + ptx.count("fence.acq_rel")
                + ptx.count("fence.sc"), "epoch_moves": len(re.findall(r"atom\\.global[^;]*\\.add", ptx)),
                "tags": len(re.findall(r"and\\.b32[^;]*, -256;", ptx)), "shared": kernel.metadata.shared})
print(json.dumps(out))
"""


def test_tma_rows_copy_a_part_with_one_thread_and_advance_every_phase() -> None:
    """experimental_tma_rows built for sm_90: each part's copy is `boxes` TMA boxes issued once (two rows before the
    loop, one for each of the three rows an iteration), with no per-thread cp.async; each issue either expects the
    part's bytes or, past the last row, arrives plainly, so every slot's phase advances; three 64 KB slots. Rows cut
    over G CTAs poll their words (three steps an iteration and the first row) with no fence anywhere; each word is
    tagged with the launch's epoch (the sum's low byte, at each of the four publishes), which one atomic count of the
    CTAs done moves on on the device (so a CUDA graph's replays stay apart). Numbers on the GPU: kernel_sweep.py
    --only softmax_pipeline_local, softmax_tma_parts."""
    cases = [(32768, 1, 16, 1), (32768, 1, 32, 4), (65536, 2, 16, 1), (128256, 4, 32, 2)]
    results = compile_for_sm90(_COMPILE_TMA_ROWS, cases)
    for (_n, g, _warps, boxes), r in zip(cases, results, strict=True):
        assert r["copies"] == 5 * boxes and r["expects"] == r["arrivals"] == 5, r
        assert r["waits"] == 5 and r["per_thread_copies"] == 0 and r["local"] == 0, r  # prologue, A, B, C, the last
        assert 3 * 65536 <= r["shared"] <= 3 * 65536 + 1024, r
        assert r["polls"] == (6 if g > 1 else 0) and r["fences"] == 0, r
        assert r["epoch_moves"] == (g > 1) and r["tags"] == (4 if g > 1 else 0), r


def test_tma_rows_refuse_rows_a_box_cannot_carry() -> None:
    """TMA does not realign: rows that are not whole 256-element box rows are refused on the host before anything is
    built, as are parts whose three slots exceed shared memory and parts of a row without words to meet by."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import experimental_tma_rows as t

    x = torch.empty((4, 33508), dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="multiple of 256"):
        t.tma_rows(x, torch.empty_like(x), 16, 4)
    x = torch.empty((4, 65536), dtype=torch.bfloat16)  # three whole rows are 384 KB; two parts of 64 KB fit
    with pytest.raises(ValueError, match="do not fit"):
        t.tma_rows(x, torch.empty_like(x), 16, 4)
    with pytest.raises(ValueError, match="words"):
        t.tma_parts(x, torch.empty_like(x), None, 2, 16, 4)
    x = torch.empty((4, 32768), dtype=torch.float32)
    with pytest.raises(ValueError, match="16-bit"):
        t.tma_rows(x, torch.empty_like(x), 16, 4)


_COMPILE_TMA_FLAT = """
import json, sys, torch
sys.path.insert(0, sys.argv[2])
import experimental_tma_flat as f
from kernelproof_core.precompile import compile_only
out = []
for m, n, warps in json.loads(sys.argv[1]):
    x = torch.empty((m, n), dtype=torch.bfloat16)
    with compile_only("cuda", 90, 32):
        kernel = f.tma_flat_rows(x, torch.empty_like(x), warps, 4)
    ptx = kernel.asm["ptx"]
    out.append({"copies": ptx.count("cp.async.bulk.tensor.3d"), "vec_stores": ptx.count("st.global.v4"),
                "per_thread_copies": ptx.count("cp.async.cg"), "shared": kernel.metadata.shared})
print(json.dumps(out))
"""


def test_tma_flat_rows_copy_any_width_in_boxes_and_store_whole_vectors() -> None:
    """experimental_tma_flat built for sm_90 at random2's and random0's widths (rows off the 16-byte grid): a row's
    copy is NB boxes of W box rows of the flat view (two rows before the loop, one a row in it, emitted for each of
    the three slots), three slots of NB boxes in shared memory, no per-thread copies, and the output written in
    16-byte vectors (the vectors wholly inside the row; its two edge vectors element by element)."""
    cases = [(1991, 33508, 16), (1723, 25249, 8)]
    results = compile_for_sm90(_COMPILE_TMA_FLAT, cases)
    for (_m, n, warps), r in zip(cases, results, strict=True):
        nb = -(-((n + 510) // 256) // warps)  # box rows a row can touch, ceil((n + 255) / 256), in boxes of W
        assert r["copies"] == 5 * nb and r["per_thread_copies"] == 0, r
        assert r["vec_stores"] >= 3 * nb, r  # each slot's output loop stores its NB boxes a vector at a time
        assert 3 * nb * warps * 512 <= r["shared"] <= 3 * nb * warps * 512 + 1024, r
