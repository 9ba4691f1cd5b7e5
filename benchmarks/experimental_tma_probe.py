"""Experiment, not shipped: which TMA boxes the GPU takes. The resident softmax kernel cannot copy padded rows whose
x and y start at different places inside their 16-byte vectors with cp.async (benchmarks/NOTES.md); a TMA copy from
any element would have done it. This loads one 8 x 256 bf16 box through a tensor descriptor at inner coordinates 0,
8, 3, 1 and 255, over rows of 256 elements and over rows of 512 starting 256 apart (overlapping: the stride is half
the extent), each case in its own process (a faulting copy poisons the CUDA context), and writes what each did.

    python benchmarks/experimental_tma_probe.py --output tma_probe.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

LAYOUT = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)


@gluon.jit
def probe(desc, out_ptr, c0, c1, BM: gl.constexpr, BN: gl.constexpr):  # type: ignore[no-untyped-def]
    smem = gl.allocate_shared_memory(gl.bfloat16, [BM, BN], desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    mbarrier.expect(bar, BM * BN * 2)
    tma.async_copy_global_to_shared(desc, [c0, c1], bar, smem)
    mbarrier.wait(bar, 0)
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [4, 1], [1, 0])
    v = smem.load(layout)
    r = gl.arange(0, BM, layout=gl.SliceLayout(1, layout))[:, None]
    c = gl.arange(0, BN, layout=gl.SliceLayout(0, layout))[None, :]
    gl.store(out_ptr + r * BN + c, v)


def case(name: str) -> None:
    """One box at row 1, column `name`'s number; element i of x holds the bit pattern i, so any offset shows."""
    L = 1 << 16
    x = torch.arange(L, device="cuda", dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    out = torch.zeros(8, 256, device="cuda", dtype=torch.bfloat16)
    overlap = name.startswith("overlap")
    c1 = int(name.split("_")[1])
    if overlap:
        desc = TensorDescriptor(x, [L // 256 - 1, 512], [256, 1], [8, 256], LAYOUT)
    else:
        desc = TensorDescriptor(x, [L // 256, 256], [256, 1], [8, 256], LAYOUT)
    probe[(1,)](desc, out, 1, c1, BM=8, BN=256, num_warps=4)
    torch.cuda.synchronize()
    rows = torch.arange(8, device="cuda")[:, None]
    cols = torch.arange(256, device="cuda")[None, :] + c1
    want = (rows + 1) * 256 + cols  # overlapping rows: the run of 8 x 256 elements from 256 + c1
    if overlap:
        want = 256 + c1 + rows * 256 + torch.arange(256, device="cuda")[None, :]
    else:  # rows of 256: columns past 255 read as 0
        want = torch.where(cols < 256, want, 0)
    got = out.view(torch.int16).to(torch.int64)
    want = want.to(torch.int32).to(torch.int16).to(torch.int64)
    sys.stdout.write("ok\n" if torch.equal(got, want) else f"wrong {got[0, :4].tolist()} {want[0, :4].tolist()}\n")


CASES = ("plain_0", "plain_8", "plain_3", "plain_1", "overlap_0", "overlap_8", "overlap_3", "overlap_255")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", help="JSON file for the results")
    parser.add_argument("--case", choices=CASES, help="run one case in this process")
    args = parser.parse_args()
    if args.case:
        case(args.case)
        return
    results = {}
    for name in CASES:
        run = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True, timeout=120)
        error = [line for line in run.stderr.splitlines() if "Error" in line][-1:]
        results[name] = {"returncode": run.returncode, "result": run.stdout.strip() or None,
                         "error": error[0].strip() if error else None}
        sys.stdout.write(f"{name}: {results[name]}\n")
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
