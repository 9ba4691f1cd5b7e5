"""PADDED, the resident softmax on rows padded off cp.async's grid (an experiment, off): its plan rules and its sm_90
builds on the H200's topology, no GPU needed. Its numbers are checked on a GPU in tests/gpu/test_gpu_softmax_padded.py;
its speed is kernel_sweep.py's family `softmax_resident_padded`."""

from __future__ import annotations

import pytest

from kernelproof_core.kernels import softmax
from tests.sm90_build import compile_for_sm90

_PADDED_BUILDS = """
import json, re, subprocess, sys, tempfile, torch
sys.path.insert(0, sys.argv[2])
from sass_counts import _cuobjdump, row_loop_opcodes
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
softmax._num_sms = lambda device: 132
softmax._smem_per_sm = lambda index: 233472
out = []
for m, n, pad in json.loads(sys.argv[1]):
    stride = n + pad
    found = {}
    for flag in (False, True):  # the planner with _RESIDENT_PADDED off and on
        softmax._RESIDENT_PADDED = flag
        plan = softmax._plan(m, n, stride, 2, torch.device("cuda", 0), torch.bfloat16)
        found[f"plan_{flag}"] = (type(plan).__name__ if hasattr(plan, "_fields") else
                                 "resident" if "NCHUNK" in plan[1] else "other")
        found[f"padded_{flag}"] = bool(not hasattr(plan, "_fields") and plan[1].get("PADDED"))
    for padded in (False, True):  # the same rows contiguous (REALIGN) and padded (PADDED)
        launch, meta = softmax._resident_plan(m, n, 1, 2, 132, 233472, realign=True, padded=padded)
        x = torch.empty((m, stride if padded else n), dtype=torch.bfloat16)[:, :n]
        with compile_only("cuda", 90, 32):
            kernel = launch(x, torch.empty((m, n), dtype=torch.bfloat16), m, n, x.stride(0), **meta)
        row = row_loop_opcodes(kernel.asm["cubin"])  # an ordinary row: not the shuffles' divergent fallback
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(kernel.asm["cubin"])
            f.flush()
            usage = subprocess.run([_cuobjdump(), "-res-usage", f.name], capture_output=True, text=True).stdout
        found[str(padded)] = {"meta": meta, "copies": row["LDGSTS"], "stores": row["STG"],
                              "instructions": sum(row.values()), "shuffles": row["SHFL"], "loads": row["LDG"],
                              "regs": int(re.search(r"REG:(\\d+)", usage).group(1)),
                              "local": int(re.search(r"LOCAL:(\\d+)", usage).group(1))}
    out.append(found)
print(json.dumps(out))
"""


def test_padded_is_asked_for_with_windows_and_refused_without() -> None:
    """padded=True puts PADDED on a plan through windows (the same chunks, warps and programs as the contiguous rows'
    REALIGN plan: a padded row's window spans what a contiguous one's does); asked for on aligned rows, without
    windows, it is refused, not ignored; by default no plan takes it."""
    args = (630, 40361, 1, 2, 132, 233472)
    padded = softmax._resident_plan(*args, realign=True, padded=True)
    plain = softmax._resident_plan(*args, realign=True)
    assert padded is not None and plain is not None
    assert padded[1].pop("PADDED") is True and padded[1] == plain[1] and "PADDED" not in plain[1]
    with pytest.raises(ValueError, match="PADDED"):
        softmax._resident_plan(630, 40368, 8, 2, 132, 233472, padded=True)
    with pytest.raises(ValueError, match="PADDED_TAILS and PADDED_LDS"):  # two forms of one tail: not both
        softmax._resident_plan(*args, realign=True, padded=True, padded_tails=True, padded_lds=True)
    assert softmax._RESIDENT_PADDED is False  # an experiment until a GPU sweep says otherwise


def test_padded_builds_for_sm90_with_16_byte_copies_and_16_byte_stores() -> None:
    """Built for sm_90 (H200 topology): with _RESIDENT_PADDED on, padded rows past 32768 off cp.async's 4-byte grid
    (align 1: the split path without it) plan the resident kernel with PADDED; rows padded on that grid (align 2, 4:
    the resident kernel's narrower copies) and contiguous rows keep their plans. An ordinary row of PADDED's build
    (sass_counts.row_loop_opcodes) copies x in as many 16-byte cp.async as the contiguous rows' REALIGN build (its
    windows are laid by x's stride, not narrower) and stores y in one instruction a chunk, as REALIGN does: its
    vectors on y's own grid (four shuffles a chunk bring each thread the next lane's vector, a 16-byte load lane
    31's), the row's ends by 2-byte stores (at most eight instructions) in place of REALIGN's edge vectors. It spills
    nothing and holds no more registers than the plan's programs an SM allow."""
    cases = [(630, 40361, 9), (876, 41392, 3), (1024, 50000, 2), (1991, 33508, 64)]
    for (m, n, pad), found in zip(cases, compile_for_sm90(_PADDED_BUILDS, [list(c) for c in cases]), strict=True):
        off_grid = (n + pad) % 2 == 1 or n % 2 == 1  # align 1: rows or stride odd
        assert found["plan_False"] == ("_Split" if off_grid else "resident"), (m, n, pad, found)
        assert found["plan_True"] == "resident" and found["padded_True"] is off_grid, (m, n, pad, found)
        assert found["padded_False"] is False, found
        plain, padded = found["False"], found["True"]
        assert padded["meta"]["PADDED"] is True and "PADDED" not in plain["meta"]
        nchunk = padded["meta"]["NCHUNK"]
        assert padded["copies"] == plain["copies"] >= 2 * nchunk, (plain, padded)
        assert nchunk <= plain["stores"] <= padded["stores"] <= plain["stores"] + 8, (plain, padded)  # + the ends
        assert padded["shuffles"] - plain["shuffles"] == 4 * nchunk, (plain, padded)
        assert padded["loads"] - plain["loads"] >= nchunk, (plain, padded)  # lane 31's, and the ends'
        assert padded["local"] == plain["local"] == 0, (plain, padded)
        warps = padded["meta"]["num_warps"]
        per_sm = 2 if warps == 8 else 1  # _resident_plan: 8 warps where two rows fit an SM, else one program
        assert padded["regs"] * 32 * warps * per_sm <= 65536, padded


_LANE31_BUILDS = """
import json, re, subprocess, sys, tempfile, torch
sys.path.insert(0, sys.argv[2])
from sass_counts import _cuobjdump, row_loop_opcodes
from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only
out = []
for m, n, pad in json.loads(sys.argv[1]):
    found = {}
    for name, kw in (("reg", {}), ("tails", {"padded_tails": True}), ("lds", {"padded_lds": True})):
        launch, meta = softmax._resident_plan(m, n, 1, 2, 132, 233472, realign=True, padded=True, **kw)
        x = torch.empty((m, n + pad), dtype=torch.bfloat16)[:, :n]
        with compile_only("cuda", 90, 32):
            kernel = launch(x, torch.empty((m, n), dtype=torch.bfloat16), m, n, x.stride(0), **meta)
        row = row_loop_opcodes(kernel.asm["cubin"])
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(kernel.asm["cubin"])
            f.flush()
            usage = subprocess.run([_cuobjdump(), "-res-usage", f.name], capture_output=True, text=True).stdout
        found[name] = {"meta": meta, "instructions": sum(row.values()), "copies": row["LDGSTS"],
                       "shuffles": row["SHFL"], "loads": row["LDG"], "shared_loads": row["LDS"],
                       "regs": int(re.search(r"REG:(\\d+)", usage).group(1)),
                       "local": int(re.search(r"LOCAL:(\\d+)", usage).group(1))}
    out.append(found)
print(json.dumps(out))
"""


def test_lane31_variants_build_for_sm90_without_spills() -> None:
    """PADDED's two experiments on lane 31's next vector, built for sm_90 (H200 topology): TAILS copies it into its
    warp's tail with each chunk (one 16-byte cp.async a chunk more, no L2 load in the output pass) and LDS lays each
    warp's vectors with its tail after them, so every thread reads its shifted vector at a shifted address (no
    shuffles or word selects: fewer instructions an ordinary row than the register form). Both take one chunk of
    shared memory more and spill nothing; the register form and LDS keep the plan's programs an SM."""
    cases = [(630, 40361, 9), (1965, 43657, 9)]
    for (m, n, _pad), found in zip(cases, compile_for_sm90(_LANE31_BUILDS, [list(c) for c in cases]), strict=True):
        reg, tails, lds = found["reg"], found["tails"], found["lds"]
        nchunk = reg["meta"]["NCHUNK"]
        assert tails["meta"]["PADDED_TAILS"] is True and lds["meta"]["PADDED_LDS"] is True, (tails, lds)
        assert tails["copies"] == lds["copies"] == reg["copies"] + 2 * nchunk, (m, n, reg, tails, lds)
        assert tails["loads"] < reg["loads"] and lds["loads"] < reg["loads"], (reg, tails, lds)
        assert lds["shuffles"] == reg["shuffles"] - 4 * nchunk, (reg, lds)
        assert lds["instructions"] < reg["instructions"], (reg, lds)
        for build in (reg, tails, lds):
            assert build["local"] == 0, build
        for build in (reg, lds):  # TAILS can hold more (155 at 1965 x 43657): the sweep times what that costs
            warps = build["meta"]["num_warps"]
            per_sm = 2 if warps == 8 else 1
            assert build["regs"] * 32 * warps * per_sm <= 65536, build
