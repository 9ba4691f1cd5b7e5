"""Launch plans of the resident softmax (rows wider than 32768 held in shared memory, one or two programs an SM):
programs, warps, chunks and slots by row size and topology, its REALIGN, KEEP and HOLD options, and sm_90 builds
that must fit shared memory and keep the copies 16 bytes wide (compiled in a fresh process, no GPU needed).
"""

from __future__ import annotations

from typing import Any

import pytest

from kernelproof_core.kernels import softmax
from tests.core.h200_topology import H200_SMEM_PER_SM, H200_SMS
from tests.sm90_build import compile_for_sm90


@pytest.mark.parametrize(("m", "n", "align", "expected"), [
    # (programs per SM, warps, K, NCHUNK, NRES): two rows per SM on 8 warps where they fit the 200 KB budget, two on
    # 16 (PAIR: 104 KB of slots each, the rest held in registers) for aligned rows of up to 128 KB, one on 16 where
    # one row fits, one on 32 streaming the chunks past the budget otherwise.
    (1024, 40000, 8, (2, 8, 8, 20, 20)), (1991, 33508, 4, (2, 8, 8, 17, 17)), (1024, 65536, 8, (2, 16, 8, 16, 13)),
    (800, 60000, 8, (2, 16, 8, 15, 13)), (800, 104000, 8, (1, 16, 8, 26, 26)), (600, 110000, 8, (1, 16, 8, 27, 27)),
    (1024, 131072, 8, (1, 32, 8, 16, 14)), (512, 128256, 8, (1, 32, 8, 16, 14)), (3, 65536, 2, (1, 16, 8, 16, 16))])
def test_resident_softmax_plan_by_row_size(m: int, n: int, align: int, expected: tuple[int, ...]) -> None:
    _launch, meta = softmax._resident_plan(m, n, align, 2, H200_SMS, H200_SMEM_PER_SM)  # type: ignore[misc]
    per_sm, warps, k, n_chunks, n_res = expected
    assert (meta["num_warps"], meta["K"], meta["NCHUNK"], meta["NRES"]) == (warps, k, n_chunks, n_res)
    assert meta["ALIGN"] == align and 32 * warps * k * n_chunks >= n > 32 * warps * k * (n_chunks - 1)
    # two programs per SM share the 200 KB budget (208 KB under PAIR); one alone may take 224 KB (a block may have
    # 227 KB)
    pair = per_sm == 2 and warps == 16
    assert n_res * 32 * warps * k * 2 * per_sm <= (softmax._RESIDENT_PAIR_BUDGET_BYTES if pair else
        softmax._RESIDENT_CAP_BYTES if per_sm == 2 else softmax._RESIDENT_SOLO_CAP_BYTES)
    # PAIR holds the chunks past its slots in registers, capped so that both programs fit the SM's 65536; so do
    # streamed 16-bit rows (HOLD, uncapped)
    assert meta["HOLD"] == (n_res < n_chunks) and meta.get("maxnreg") == (64 if pair else None)
    # one program per SM holding whole rows: half of them start late (their stats passes would line up)
    assert meta["STAGGER"] == (softmax._RESIDENT_STAGGER if per_sm == 1 and n_res == n_chunks else 0)


@pytest.mark.parametrize("realign", [False, True])
def test_resident_rows_within_the_budget_are_held_whole(realign: bool) -> None:
    """Every 16-bit row the budget can hold keeps all its chunks in shared memory (slots are one buffer of any
    count: as two power-of-two buffers, 60000-wide rows streamed 3 of their 15 chunks, 58.6% of copy bandwidth on
    the H200), up to 224 KB where one program has the SM; wider ones stream only what does not fit, aligned rows of
    100-128 KB (PAIR) keep 104 KB in slots and the rest in registers, and a chunk larger than the budget is
    refused."""
    budget, solo = softmax._resident_budget(H200_SMEM_PER_SM), softmax._solo_budget(H200_SMEM_PER_SM)
    assert (budget, solo) == (200 * 1024, 224 * 1024)
    for n in range(32776, 140000, 1000):
        _launch, meta = softmax._resident_plan(64, n, 8, 2, H200_SMS, H200_SMEM_PER_SM,  # type: ignore[misc]
                                               realign=realign)
        chunk_bytes = 32 * meta["num_warps"] * meta["K"] * 2
        pair = not realign and budget < 4 * n <= 2 * softmax._RESIDENT_PAIR_MAX_BYTES
        assert meta["HOLD"] == (not realign and meta["NRES"] < meta["NCHUNK"]), n  # aligned rows hold what streams
        assert meta.get("maxnreg") == (64 if pair else None), n
        room = softmax._RESIDENT_PAIR_BUDGET_BYTES // 2 if pair else budget // 2 if meta["num_warps"] == 8 else solo
        assert meta["NRES"] == min(meta["NCHUNK"], room // chunk_bytes), n
        assert meta["NRES"] * chunk_bytes <= room
        assert (meta["num_warps"] == 32) == ((n + (7 if realign else 0)) * 2 > solo), n
    with pytest.raises(ValueError, match="does not fit"):
        softmax._resident_plan(64, 65536, 8, 2, H200_SMS, H200_SMEM_PER_SM, warps=32, k=256)


@pytest.mark.parametrize(("smem_per_sm", "block_max"), [
    (233472, 232448), (167936, 166912), (102400, 101376)])  # H100/H200, A100, sm_86/sm_89 (bytes)
def test_resident_plans_fit_a_block_on_every_topology(smem_per_sm: int, block_max: int) -> None:
    """Whatever a GPU's shared memory, a plan's slots (two programs per SM or one alone) leave room for the kernel's
    reduction scratch within the most a block may take."""
    for n in range(32776, 260000, 997):
        plan = softmax._resident_plan(64, n, 8, 2, 100, smem_per_sm)
        assert plan is not None
        meta = plan[1]
        per_sm = 2 if meta["num_warps"] == 8 else 1
        slots = meta["NRES"] * 32 * meta["num_warps"] * meta["K"] * 2
        assert per_sm * (slots + 1024) <= smem_per_sm and slots + 1024 <= block_max, (n, meta)


@pytest.mark.parametrize(("align", "smem"), [(1, H200_SMEM_PER_SM), (8, 0), (8, 48 * 1024)])
def test_resident_softmax_needs_4_byte_rows_and_shared_memory(align: int, smem: int) -> None:
    """Odd 16-bit widths or strides (cp.async copies at least 4 bytes), GPUs before sm_80 (reported as 0 bytes) and
    GPUs with little shared memory keep the register paths."""
    assert softmax._resident_plan(64, 65536, align, 2, H200_SMS, smem) is None


@pytest.mark.parametrize(("m", "n", "expected"), [
    # (programs per SM, warps, NCHUNK): the window starts on a 128-byte line (LINE: 64 positions), so it spans n + 63
    # positions and NCHUNK counts them, not n (32761: 16 chunks of windows on vectors, 17 on lines)
    (1991, 33508, (2, 8, 17)), (1024, 40001, (2, 8, 20)), (1024, 65535, (1, 16, 17)), (1024, 131071, (1, 32, 17)),
    (5, 32761, (2, 8, 17))])
def test_realigned_resident_softmax_plan(m: int, n: int, expected: tuple[int, int, int]) -> None:
    """Contiguous rows off the 16-byte grid (odd widths included: 16-byte copies of the row's window, not copies of
    the row's own alignment) take the resident kernel with REALIGN; chunks cover every window position a row can
    span and the slots stay within the budget."""
    _launch, meta = softmax._resident_plan(m, n, softmax._align(2, n), 2, H200_SMS,  # type: ignore[misc]
                                           H200_SMEM_PER_SM, realign=True)
    per_sm, warps, n_chunks = expected
    chunk = 32 * warps * 8
    assert (meta["num_warps"], meta["NCHUNK"], meta["K"], meta["ALIGN"], meta["REALIGN"]) == (warps, n_chunks, 8, 1,
                                                                                              True)
    assert meta["LINE"] == 64 and chunk * n_chunks >= n + 63 > chunk * (n_chunks - 1)
    assert meta["NRES"] * chunk * 2 * per_sm <= (
        softmax._RESIDENT_CAP_BYTES if per_sm == 2 else softmax._RESIDENT_SOLO_CAP_BYTES)
    assert meta["STAGGER"] == (softmax._RESIDENT_STAGGER if warps == 16 else 0)


def test_resident_keep_and_hold_options() -> None:
    """KEEP and HOLD are plan options with module defaults (KEEP off; HOLD on for aligned 16-bit rows since the H200
    sweep with FREE): KEEP only for 16-bit rows under CARRY (its kept exponentials are fp16, its scales CARRY's
    rounded maxima), asked for elsewhere it is refused and by default it is left out there; HOLD only where chunks
    are streamed, by default not through windows (REALIGN) or on fp32 rows."""
    def meta(n: int, **kw: object) -> dict[str, object]:
        plan = softmax._resident_plan(64, n, softmax._align(2, n), 2, H200_SMS, H200_SMEM_PER_SM, **kw)  # type: ignore[arg-type]
        assert plan is not None
        return plan[1]

    assert meta(104000)["KEEP"] is softmax._RESIDENT_KEEP and meta(104000)["HOLD"] is False
    assert meta(65536)["HOLD"] and not meta(65536, hold=False)["HOLD"]  # PAIR holds by default
    assert meta(65536, keep=True)["KEEP"] and not meta(65536, keep=False)["KEEP"]
    assert not meta(65536, carry=False)["KEEP"]
    with pytest.raises(ValueError, match="CARRY"):
        meta(65536, carry=False, keep=True)
    with pytest.raises(ValueError, match="16-bit"):
        softmax._resident_plan(64, 65536, 1, 4, H200_SMS, H200_SMEM_PER_SM, keep=True)
    assert not meta(104000, hold=True)["HOLD"]  # every chunk resident: nothing to hold
    streamed = meta(131072, hold=True)
    assert streamed["NRES"] < streamed["NCHUNK"] and streamed["HOLD"]
    assert meta(131072)["HOLD"] is softmax._RESIDENT_HOLD and not meta(131072, hold=False)["HOLD"]
    windows = softmax._resident_plan(64, 131071, 1, 2, H200_SMS, H200_SMEM_PER_SM, realign=True)
    wide_fp32 = softmax._resident_plan(64, 65536, 4, 4, H200_SMS, H200_SMEM_PER_SM)
    assert windows is not None and windows[1]["NRES"] < windows[1]["NCHUNK"] and not windows[1]["HOLD"]
    assert wide_fp32 is not None and wide_fp32[1]["NRES"] < wide_fp32[1]["NCHUNK"] and not wide_fp32[1]["HOLD"]
    assert meta(131072)["num_warps"] == softmax._RESIDENT_STREAM_WARPS


def test_realigned_resident_chunks_leave_partial_vectors_to_the_masked_ones() -> None:
    """The REALIGN kernel masks only its first chunk and its last two (`_masked_chunk`): for every width from 32769
    up and every place a row can start inside its vector, the row's window positions fit the chunks, and every
    other chunk lies wholly inside the row (no partial vector, nothing past the row's end)."""
    for n in [*range(32769, 33000), *range(65400, 65600, 7), 98301, 131071, 250007]:
        if n % 8 == 0:
            continue
        _launch, meta = softmax._resident_plan(64, n, softmax._align(2, n), 2, H200_SMS,  # type: ignore[misc]
                                               H200_SMEM_PER_SM, realign=True)
        chunk, n_chunks = 32 * meta["num_warps"] * meta["K"], meta["NCHUNK"]
        for sh in range(8):
            assert sh + n <= n_chunks * chunk, (n, sh)
            for c in range(n_chunks):
                if not softmax._masked_chunk(c, n_chunks, True):
                    assert sh <= c * chunk and (c + 1) * chunk <= sh + n, (n, sh, c)


_COMPILE_RESIDENT = """
import json, re, sys, torch
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, stride in json.loads(sys.argv[1]):
    x = torch.empty((m, stride), dtype=torch.bfloat16)[:, :n]
    launch, meta = softmax._resident_plan(m, n, softmax._align(2, n, stride), 2, 132, 233472)
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty((m, n), dtype=torch.bfloat16), m, n, stride, **meta)
    out.append({"shared": kernel.metadata.shared, "copies": sorted({int(v, 0) for v in re.findall(
        r"cp\\.async\\.c[ag]\\.shared\\.global[^;]*\\], (0x[0-9a-f]+|\\d+)", kernel.asm["ptx"])})})
print(json.dumps(out))
"""


def test_resident_softmax_compiles_for_sm90_within_shared_memory() -> None:
    """The Gluon kernel built for the H200's target (no GPU needed; a fresh process, in case this one interprets):
    every plan's shared memory fits a block's 227 KB, and copies are as wide as the rows' alignment allows (FREE's
    inline copies as Gluon's)."""
    shapes = [(1024, 65536, 65536), (512, 131072, 131072), (1991, 33508, 33508), (7, 40000, 40002)]
    results = compile_for_sm90(_COMPILE_RESIDENT, shapes)
    assert all(r["shared"] <= 227 * 1024 for r in results), results
    assert [r["copies"] for r in results] == [[16], [16], [8], [4]], results


_COMPILE_KEEP_HOLD = """
import json, re, sys, torch
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, warps, keep, hold in json.loads(sys.argv[1]):
    x = torch.empty((m, n), dtype=torch.bfloat16)
    launch, meta = softmax._resident_plan(m, n, softmax._align(2, n), 2, 132, 233472, warps=warps, keep=keep,
                                          hold=hold, anchor=False)
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty_like(x), m, n, n, **meta)
    ptx = kernel.asm["ptx"]
    out.append({"nchunk": meta["NCHUNK"], "nres": meta["NRES"], "ex2": ptx.count("ex2.approx"),
                "f16_stores": len(re.findall(r"st\\.shared[^;]*\\.v4\\.b32", ptx)),
                "loads": len(re.findall(r"ld\\.global[^;]*\\.v4", ptx)), "local": ptx.count(".local"),
                "maxnreg": [int(v) for v in re.findall(r"\\.maxnreg (\\d+)", ptx)]})
print(json.dumps(out))
"""


def test_resident_softmax_keep_and_hold_compile_for_sm90() -> None:
    """KEEP and HOLD built for the H200's target (no GPU needed): KEEP stores each resident chunk's exponentials
    (one 16-byte shared store a thread a chunk) and takes about half the exponentials of the plain kernel (one an
    element in the stats pass, one a thread a chunk in the output pass); HOLD reads each streamed chunk from global
    memory once instead of twice; none of them uses local memory (no spills) at 65536 on one 16-warp program, under
    PAIR (the plan there: two programs an SM, three chunks held, 64 registers) or on 16 warps at
    131072. Their speed is the sweep's (kernel_sweep.py --only softmax_resident_keep)."""
    configs = [(1024, 65536, 16, False, False), (1024, 65536, 16, True, False), (1024, 131072, 16, False, False),
               (1024, 131072, 16, False, True), (1024, 131072, 16, True, True), (1024, 65536, 0, False, None)]
    results = compile_for_sm90(_COMPILE_KEEP_HOLD, configs)
    plain, keep, streamed, hold, both, pair = results
    assert (pair["nchunk"], pair["nres"], pair["maxnreg"]) == (16, 13, [64]), pair
    assert pair["loads"] == plain["loads"] + 3, (plain, pair)  # three chunks held, loaded once each
    assert plain["nres"] == plain["nchunk"] == 16 and plain["f16_stores"] == 0
    assert keep["f16_stores"] == keep["nres"], keep
    assert keep["ex2"] < 0.7 * plain["ex2"], (plain, keep)
    assert streamed["nres"] < streamed["nchunk"], streamed
    assert streamed["loads"] - hold["loads"] == streamed["nchunk"] - streamed["nres"], (streamed, hold)
    assert both["ex2"] < 0.7 * hold["ex2"], (hold, both)
    assert all(r["local"] == 0 for r in results), results


_PLAN_ON_H200 = """
import json, re, sys, torch
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
softmax._num_sms = lambda device: 132  # the H200's topology, with no GPU in this process
softmax._smem_per_sm = lambda index: 233472
softmax._cuda_index = lambda device: 0
out = []
for m, n, stride, realign in json.loads(sys.argv[1]):
    plan = softmax._plan(m, n, stride, 2, torch.device("cuda"), torch.bfloat16, resident_realign=realign)
    if type(plan) is not tuple:
        out.append({"path": type(plan).__name__.strip("_")})
        continue
    launch, meta = plan
    x = torch.empty((m, stride), dtype=torch.bfloat16)[:, :n]
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty((m, n), dtype=torch.bfloat16), m, n, stride, **meta)
    ptx = kernel.asm["ptx"]
    assert ("%clock64" in ptx) == bool(meta["STAGGER"]), meta  # the stagger's spin is compiled in where planned
    out.append({"path": "resident", "realign": meta["REALIGN"], "stagger": meta["STAGGER"], "copies": sorted({
        int(v, 0) for v in re.findall(r"cp\\.async\\.c[ag]\\.shared\\.global[^;]*\\], (0x[0-9a-f]+|\\d+)", ptx)})})
print(json.dumps(out))
"""


def test_softmax_plan_on_an_h200_takes_the_resident_path_through_windows_for_rows_off_the_grid() -> None:
    """On the H200's topology (compiled kernels, a fresh process, no GPU needed): contiguous 16-bit rows wider than
    32768 whose width is not a multiple of 8 take the resident kernel with REALIGN (16-byte copies, odd widths
    included); aligned rows keep it without; padded odd rows keep the split path. resident_realign=False gives the
    plan as it was before (8-byte copies at 33508, split at 40001, staged at 131071). One program per SM holding
    whole rows (104000) compiles the stagger's spin in; the others do not."""
    cases = [(1991, 33508, 33508, True), (1991, 33508, 33508, False), (1024, 40001, 40001, True),
             (1024, 40001, 40001, False), (1024, 40001, 40003, True), (800, 104000, 104000, True),
             (64, 131071, 131071, True), (64, 131071, 131071, False)]
    results = compile_for_sm90(_PLAN_ON_H200, cases)
    assert results == [
        {"path": "resident", "realign": True, "stagger": 0, "copies": [16]},
        {"path": "resident", "realign": False, "stagger": 0, "copies": [8]},
        {"path": "resident", "realign": True, "stagger": 0, "copies": [16]},
        {"path": "Split"}, {"path": "Split"},
        {"path": "resident", "realign": False, "stagger": softmax._RESIDENT_STAGGER, "copies": [16]},
        {"path": "resident", "realign": True, "stagger": 0, "copies": [16]},
        {"path": "Staged"}]


def test_resident_parts_plan() -> None:
    """PARTS (an experiment, not planned): a part is sized as a row of its own (131072 in halves: PAIR's 16 warps,
    13 of 16 chunks in slots, 3 held, 64 registers), and only aligned rows that cut
    into equal parts of whole vectors under CARRY are taken."""
    _launch, meta = softmax._resident_plan(1024, 131072, 8, 2, H200_SMS, H200_SMEM_PER_SM, parts=2)  # type: ignore[misc]
    assert (meta["PARTS"], meta["NCHUNK"], meta["NRES"], meta["HOLD"], meta["maxnreg"]) == (2, 16, 13, True, 64)
    quarters = softmax._resident_plan(1024, 131072, 8, 2, H200_SMS, H200_SMEM_PER_SM, parts=4)
    assert quarters is not None and (quarters[1]["num_warps"], quarters[1]["NRES"]) == (8, 16)
    assert "PARTS" not in softmax._resident_plan(1024, 131072, 8, 2, H200_SMS, H200_SMEM_PER_SM)[1]  # type: ignore[index]
    for kw in ({"realign": True}, {"carry": False}):
        with pytest.raises(ValueError, match="PARTS"):
            softmax._resident_plan(64, 131072, 8, 2, H200_SMS, H200_SMEM_PER_SM, parts=2, **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="PARTS"):
        softmax._resident_plan(64, 131064, 8, 2, H200_SMS, H200_SMEM_PER_SM, parts=2)  # halves of 65532: not whole


_COMPILE_PARTS = """
import json, re, sys, torch
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, parts in json.loads(sys.argv[1]):
    x = torch.empty((m, n), dtype=torch.bfloat16)
    launch, meta = softmax._resident_plan(m, n, 8, 2, 132, 233472, parts=parts)
    kw = {"w_ptr": torch.zeros(m * parts, dtype=torch.int64)} if parts > 1 else {}
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty_like(x), m, n, n, **kw, **meta)
    ptx = kernel.asm["ptx"]
    out.append({"volatile": len(re.findall(r"ld\\.volatile\\.global", ptx)), "local": ptx.count(".local"),
                "shared": kernel.metadata.shared})
print(json.dumps(out))
"""


def test_resident_parts_compile_for_sm90() -> None:
    """PARTS built for the H200's target (no GPU needed): the siblings' words polled with volatile loads (none
    without PARTS), no local memory, and two programs' slots fit an SM. Its speed is the sweep's (kernel_sweep.py
    --only softmax_resident_parts); its results are the GPU test's."""
    plain, halves, quarters = compile_for_sm90(_COMPILE_PARTS, [(1024, 65536, 1), (1024, 131072, 2),
                                                                (1024, 131072, 4)])
    assert plain["volatile"] == 0 and halves["volatile"] > 0 and quarters["volatile"] > 0, (plain, halves, quarters)
    assert all(r["local"] == 0 and 2 * (r["shared"] + 1024) <= H200_SMEM_PER_SM for r in (plain, halves, quarters))


def _assert_option_planned(monkeypatch: pytest.MonkeyPatch, option: str, constant: str,
                           refused: tuple[dict[str, Any], ...], beyond: tuple[int, int, int, int]) -> None:
    """A _resident_plan option (`option`, meta key option.upper(), planned by module constant `constant`): the plan's
    layout unchanged where it is asked for (PAIR at 65536, streamed chunks at 131072, windows at 33508) and the
    option passed on; a ValueError beside each of `refused` and on the rows `beyond` (m, n, align, elsize) it does
    not take; the constant plans it where it applies and nowhere else (not beside KEEP or PARTS, not on `beyond`)."""
    key = option.upper()
    for m, n, align, realign in ((1024, 65536, 8, False), (1024, 131072, 8, False), (1991, 33508, 1, True)):
        base = softmax._resident_plan(m, n, align, 2, H200_SMS, H200_SMEM_PER_SM, realign=realign,
                                      **{"free": False, "anchor": False, option: False})  # FREE: planned
        on = softmax._resident_plan(m, n, align, 2, H200_SMS, H200_SMEM_PER_SM, realign=realign,
                                    **{"anchor": False, option: True})
        assert base is not None and on is not None and key not in base[1]
        assert on[1] == {**base[1], key: True}
    for kw in refused:
        with pytest.raises(ValueError, match=key):
            softmax._resident_plan(64, 131072, 8, 2, H200_SMS, H200_SMEM_PER_SM, **{option: True}, **kw)
    m, n, align, elsize = beyond
    with pytest.raises(ValueError, match=key):
        softmax._resident_plan(m, n, align, elsize, H200_SMS, H200_SMEM_PER_SM, **{option: True})
    monkeypatch.setattr(softmax, constant, False)
    off = softmax._resident_plan(1024, 65536, 8, 2, H200_SMS, H200_SMEM_PER_SM)
    assert off is not None and key not in off[1]
    monkeypatch.setattr(softmax, constant, True)
    planned = softmax._resident_plan(1024, 65536, 8, 2, H200_SMS, H200_SMEM_PER_SM)
    assert planned is not None and planned[1][key] is True
    for kw in ({"keep": True}, {"parts": 2}):
        other = softmax._resident_plan(1024, 131072, 8, 2, H200_SMS, H200_SMEM_PER_SM, **kw)
        assert other is not None and key not in other[1]
    other_rows = softmax._resident_plan(m, n, align, elsize, H200_SMS, H200_SMEM_PER_SM)
    assert other_rows is not None and key not in other_rows[1]


def test_resident_maxfirst_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """MAXFIRST (an experiment, not planned): 16-bit rows only, and not beside KEEP or PARTS."""
    _assert_option_planned(monkeypatch, "maxfirst", "_RESIDENT_MAXFIRST", ({"keep": True}, {"parts": 2}),
                           (64, 65536, 4, 4))  # fp32 rows


_COMPILE_MAXFIRST = """
import json, re, sys, torch
sys.path.insert(0, sys.argv[2])
from sass_counts import opcodes
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, align, realign, hold, maxfirst in json.loads(sys.argv[1]):
    x = torch.empty((m, n), dtype=torch.bfloat16)
    launch, meta = softmax._resident_plan(m, n, align, 2, 132, 233472, realign=realign, hold=hold, maxfirst=maxfirst,
                                          anchor=False)
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty_like(x), m, n, n, **meta)
    ptx = kernel.asm["ptx"]
    out.append({"mufu": opcodes(kernel.asm["cubin"])["MUFU"], "local": ptx.count(".local"),
                "f16_stores": len(re.findall(r"st\\.shared[^;]*\\.v4\\.b32", ptx)), "nres": meta["NRES"],
                "maxnreg": [int(v) for v in re.findall(r"\\.maxnreg (\\d+)", ptx)]})
print(json.dumps(out))
"""


def test_resident_maxfirst_compiles_for_sm90_with_one_exponential_an_element() -> None:
    """MAXFIRST built for the H200's target (no GPU needed): under PAIR (64 registers), at 131072 with chunks streamed
    or held, and through windows (REALIGN), it takes under half the exponentials of the same launch without it (one
    an element, not two), writes each resident chunk's p back once (a 16-byte shared store a thread a chunk), and
    uses no local memory. Its speed is the sweep's (kernel_sweep.py --only softmax_resident_maxfirst); its results
    are the GPU tests'."""
    shapes = [(1024, 65536, 8, False, None), (1024, 131072, 8, False, None), (1024, 131072, 8, False, True),
              (1991, 33508, 1, True, None)]
    results = compile_for_sm90(_COMPILE_MAXFIRST, [[*s, mf] for s in shapes for mf in (False, True)])
    for shape, (plain, first) in zip(shapes, zip(results[::2], results[1::2], strict=True), strict=True):
        assert first["mufu"] < 0.55 * plain["mufu"], (shape, plain, first)
        assert first["f16_stores"] == first["nres"] and plain["f16_stores"] == 0, (shape, plain, first)
        assert first["local"] == 0 and first["maxnreg"] == plain["maxnreg"], (shape, plain, first)
    assert results[1]["maxnreg"] == [64]  # PAIR's cap holds


def test_resident_free_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """FREE (planned since the twelfth session's H100 sweep): only where every copy is a whole 16-byte vector of x
    (not 4-byte aligned rows) and not beside KEEP, MAXFIRST or PARTS, which write the slots from Gluon."""
    _assert_option_planned(monkeypatch, "free", "_RESIDENT_FREE", ({"keep": True}, {"parts": 2}, {"maxfirst": True}),
                           (64, 65534, 2, 2))  # 4-byte copies


_COMPILE_FREE = """
import json, re, sys, torch
sys.path.insert(0, sys.argv[2])
from sass_counts import opcodes
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, align, realign, free in json.loads(sys.argv[1]):
    x = torch.empty((m, n), dtype=torch.bfloat16)
    launch, meta = softmax._resident_plan(m, n, align, 2, 132, 233472, realign=realign, free=free, anchor=False)
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty_like(x), m, n, n, **meta)
    ptx, ops = kernel.asm["ptx"], opcodes(kernel.asm["cubin"])
    out.append({"bar": ops["BAR"], "copies": ops["LDGSTS"], "local": ptx.count(".local"),
                "slot_bytes": meta["NRES"] * 32 * meta["num_warps"] * meta["K"] * 2,
                "offsets": sorted({int(v) for v in re.findall(r"global_smem\\+(\\d+)", ptx)}),
                "free_base": len(re.findall(r"mov\\.u32 \\S+, global_smem;", ptx))})
print(json.dumps(out))
"""


def test_resident_free_compiles_for_sm90_without_barriers_in_a_row() -> None:
    """FREE built for the H200's target (no GPU needed): under PAIR, at 131072 (chunks streamed) and through windows
    (REALIGN), its CTA barriers drop to the row's reductions (58-74 to at most 12), its copies are as many as
    without it (one 16-byte cp.async a thread a slot fill: the prologue's and the output pass's), and its copies'
    addresses, taken from global_smem + 0, are the slots': every other shared access (the reductions' scratch) sits
    past the slots, so the slots (live through the whole kernel, overlapping nothing) start at 0. Its results are
    the GPU tests'; its speed the sweep's (kernel_sweep.py --only softmax_resident_free)."""
    shapes = [(1024, 65536, 8, False), (1024, 131072, 8, False), (1991, 33508, 1, True)]
    results = compile_for_sm90(_COMPILE_FREE, [[*s, free] for s in shapes for free in (False, True)])
    for shape, (plain, free) in zip(shapes, zip(results[::2], results[1::2], strict=True), strict=True):
        assert plain["bar"] >= 50 and free["bar"] <= 12, (shape, plain, free)
        # the same copies; FREE's from its own base (inline PTX: mov.u32 of global_smem), the plain kernel's from Gluon
        assert free["copies"] == plain["copies"] and free["free_base"] > 0 and plain["free_base"] == 0, (shape, free)
        assert free["local"] == 0 and min(free["offsets"]) >= free["slot_bytes"], (shape, free)


_COMPILE_COUNTS = """
import json, re, subprocess, sys, tempfile, torch
sys.path.insert(0, sys.argv[2])
from sass_counts import _cuobjdump, opcodes
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, align, dtype, options in json.loads(sys.argv[1]):
    x = torch.empty((m, n), dtype=getattr(torch, dtype))
    launch, meta = softmax._resident_plan(m, n, align, 2, 132, 233472, **{"anchor": False, **options})
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty_like(x), m, n, n, **meta)
    ops = opcodes(kernel.asm["cubin"])
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        usage = subprocess.run([_cuobjdump(), "-res-usage", f.name], capture_output=True, text=True).stdout
    out.append({"ops": ops, "total": sum(ops.values()), "regs": int(re.search(r"REG:(\\d+)", usage).group(1)),
                "meta": meta})
print(json.dumps(out))
"""


def _counts(cases: list[tuple[int, int, int, str, dict[str, object]]]) -> list[dict[str, Any]]:
    """The sm_90 builds (H200 topology, no GPU) of resident plans (m, n, align, dtype, _resident_plan options): each
    one's opcode counts, instruction total, registers a thread and meta."""
    return compile_for_sm90(_COMPILE_COUNTS, [list(c) for c in cases])


def test_resident_bf16_rows_widen_as_cheaply_as_fp16_rows() -> None:
    """The resident kernel widens bf16 pairs to fp32 by a shift and a mask of their word (_widen): its bf16 build
    (sm_90, no GPU needed) is within 1% of the fp16 build's instruction count, where Triton's own widening (take the
    high element out, shift it back: a PRMT more a pair) made it 6% longer at 65536 wide (2096 against 1976)."""
    shapes = [(1024, 65536, 8, False), (1024, 131072, 8, False), (1991, 33508, 1, True)]
    results = _counts([(m, n, a, d, {"realign": r}) for m, n, a, r in shapes for d in ("bfloat16", "float16")])
    for shape, (bf16, fp16) in zip(shapes, zip(results[::2], results[1::2], strict=True), strict=True):
        assert bf16["total"] <= 1.01 * fp16["total"], (shape, bf16["total"], fp16["total"])
        prmt = (bf16["ops"].get("PRMT", 0), fp16["ops"].get("PRMT", 0))
        assert prmt[0] <= prmt[1] + 10, (shape, prmt)  # no PRMT a pair


def test_resident_copies_test_bounds_only_on_chunks_that_can_leave_the_row() -> None:
    """FREE's copies test each vector against the row's bounds only on the chunks that can hold one outside it (the
    first and last two through windows, the last aligned); every other chunk's vectors lie inside the row, so its
    copies test only that the row is live. Built for sm_90 (H200 topology, no GPU): the windows' build at 264 x 49196
    takes 80 registers and 107 ISETP (128 and 237 when every copy tested its bounds), 1991 x 33508 80 (113), the
    aligned 264 x 49152 40 and 14 ISETP (64 and 82); two copies a chunk a row (the prologue's and the refill's)."""
    cases = [(264, 49196, 1, True), (1991, 33508, 1, True), (264, 49152, 8, False)]
    regs_max, isetp_max = (96, 96, 48), (140, 140, 30)
    built = _counts([(m, n, a, "bfloat16", {"realign": r}) for m, n, a, r in cases])
    for case, got, regs, isetp in zip(cases, built, regs_max, isetp_max, strict=True):
        ops, meta = got["ops"], got["meta"]
        assert meta.get("FREE") and ops["LDGSTS"] == 2 * meta["NRES"], (case, meta, ops["LDGSTS"])
        assert got["regs"] <= regs and ops["ISETP"] <= isetp, (case, got["regs"], ops["ISETP"])


@pytest.mark.parametrize("line", [0, 64])
@pytest.mark.parametrize(("m", "n"), [(400, 49196), (1991, 33508), (1024, 65535), (700, 49999), (64, 40001),
                                      (1024, 131071), (9, 32777)])
def test_resident_windows_cover_each_row_once(m: int, n: int, line: int) -> None:
    """REALIGN's window arithmetic as the kernel does it (row r's window starts at r n rounded down to a vector, or
    with LINE to a 64-element line; sh = where the row starts in it; chunk c's vectors copied where wholly inside the
    row; the row's part of its first and last vectors read apart): the planned chunks cover every element of every
    row start offset exactly once, only the chunks _masked_chunk names hold a vector outside the row, and the window
    fits the planned chunks."""
    launch = softmax._resident_plan(m, n, 1, 2, 132, 233472, realign=True, line=line)
    assert launch is not None
    meta = launch[1]
    k, nchunk = meta["K"], meta["NCHUNK"]
    chunk, wbase = 32 * meta["num_warps"] * k, meta.get("LINE", k)
    assert wbase == (line or k)
    for row in range(min(m, 200)):  # every offset inside a line is reached within 64 rows of an odd width
        sh = row * n - row * n // wbase * wbase
        assert sh + n <= nchunk * chunk
        seen: list[int] = []
        for c in range(nchunk):
            whole = [v for v in range(c * chunk, (c + 1) * chunk, k) if sh <= v and v + k <= sh + n]
            assert len(whole) == chunk // k or softmax._masked_chunk(c, nchunk, True), (row, c)
            seen += [p for v in whole for p in range(v, v + k)]
        for edge in {sh // k * k, (sh + n - 1) // k * k}:
            if not (sh <= edge and edge + k <= sh + n):
                seen += [p for p in range(edge, edge + k) if sh <= p < sh + n]
        assert sorted(seen) == list(range(sh, sh + n)), row


def test_resident_one_shift_pass_takes_one_multiply_add_an_element() -> None:
    """ONE_SHIFT (experiment, off) adds a second output pass for rows with |max| under _FOLD_MAX whose exponent is one
    multiply-add (CARRY's pass takes a multiply-add and an add an element). Built for sm_90 (H200 topology, no GPU) at
    1024 x 65536 (PAIR: 128 elements a thread): the build has 128 more exponentials and multiply-adds (the new pass)
    but no more adds, and is at most 584 + 8 instructions longer (its pass is 128 shorter than CARRY's 712)."""
    base, one = _counts([(1024, 65536, 8, "bfloat16", {"one_shift": False}),
                         (1024, 65536, 8, "bfloat16", {"one_shift": True})])
    assert one["meta"].get("ONE_SHIFT") and not base["meta"].get("ONE_SHIFT")
    b, o = base["ops"], one["ops"]
    assert o["MUFU"] == b["MUFU"] + 128 and o["FFMA"] == b["FFMA"] + 128, (b, o)
    assert o["FADD"] <= b["FADD"] + 4, (b, o)
    assert one["total"] - base["total"] <= 592, (base["total"], one["total"])


@pytest.mark.parametrize(("n", "lines"), [(51137, True), (51138, False), (51193, False), (51195, True),
                                          (114625, True), (114626, False), (114681, False), (33508, True)])
def test_resident_windows_start_on_lines_where_that_keeps_the_config(n: int, lines: bool) -> None:
    """LINE is planned where the up to 63 positions more it spans keep the programs an SM, the warps and a whole row
    in shared memory (H200 topology); at 51138-51193 (two rows an SM on vectors, one on lines) and 114626-114681 (a
    whole row on vectors, streamed on lines) the windows stay on vectors, the very plan line=0 gives."""
    plan = softmax._resident_plan(1024, n, 1, 2, H200_SMS, H200_SMEM_PER_SM, realign=True)
    vectors = softmax._resident_plan(1024, n, 1, 2, H200_SMS, H200_SMEM_PER_SM, realign=True, line=0)
    assert plan is not None and vectors is not None
    assert plan[1].get("LINE") == (64 if lines else None), plan[1]
    if not lines:
        assert plan[1] == vectors[1]
    else:
        def rest(meta: dict[str, object]) -> dict[str, object]:
            return {k: v for k, v in meta.items() if k not in ("LINE", "NCHUNK", "NRES")}
        assert rest(plan[1]) == rest(vectors[1]) and plan[1]["NCHUNK"] - vectors[1]["NCHUNK"] in (0, 1), plan[1]
