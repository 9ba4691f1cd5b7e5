"""Instruction mix of the built-in softmax's planned kernels, built for the H200's target without a GPU.

Each shape's plan is made as on an H200 (132 SMs, 228 KB of shared memory an SM), compiled for sm_90 only, and its
SASS (`cuobjdump -sass`) counted by opcode. Counts are static: unrolled chunk loops count once per chunk, runtime
loops once, rare branches (the resident kernel's SAFE pass) in full. Per element means per element of one thread's
row (n / threads), which is what a row costs a thread when the code has no runtime loop over the row.

    python benchmarks/sass_counts.py [--json OUT] [M N ...]
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.kernels import softmax
from kernelproof_core.precompile import compile_only

H200_SMS = 132
H200_SMEM_PER_SM = 233472
DEFAULT_SHAPES = ((1024, 65536), (2048, 32768), (1024, 131072), (512, 128256), (1991, 33508), (1723, 25249))
_SASS_LINE = re.compile(r"\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")
log = logging.getLogger("sass_counts")


def _cuobjdump() -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


_INSTRUCTION = re.compile(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")  # an instruction's text, predicate included
_ADDRESSED = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")  # an instruction's address and text
_OPCODE = re.compile(r"(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")


def _sass(cubin: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        return subprocess.run([_cuobjdump(), "-sass", f.name], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)


def opcodes(cubin: bytes) -> collections.Counter[str]:
    """Opcode counts (without modifiers) of a cubin's SASS."""
    return collections.Counter(m.group(1) for line in _sass(cubin).splitlines() if (m := _SASS_LINE.match(line)))


def common_path_opcodes(cubin: bytes, guard: str) -> collections.Counter[str]:
    """opcodes() of what an ordinary program runs, where a kernel puts a rare second look after its loop: the
    instructions up to the exit taken when the flag set by a compare naming `guard` (a literal, e.g. "536870912" for
    _CARRY_MAX) is clear (`@!P EXIT`); the second look and any out-of-line code follow it."""
    code = [m.group(1) for line in _sass(cubin).splitlines() if (m := _INSTRUCTION.match(line))]
    at = next(i for i, text in enumerate(code) if guard in text and "SETP" in text)
    flag = code[at].split()[1].rstrip(",")
    end = code.index(f"@!{flag} EXIT", at)
    return collections.Counter(m.group(1) for text in code[:end + 1] if (m := _OPCODE.match(text)))


_BRANCH = re.compile(r"BRA (0x[0-9a-f]+)")


def row_loop_opcodes(cubin: bytes, rare_block: int = 200) -> collections.Counter[str]:
    """opcodes() of what a persistent kernel runs for an ordinary row, where its rare work sits inside the row loop
    behind branches: the instructions up to the branch that skips to (or just before) the row loop's back edge (the
    backward branch to the earliest place: inner loops and out-of-line code jump back to later ones), stepping over
    every block a forward branch skips of more than `rare_block` instructions (a redo for rare rows); the prologue is
    counted, the second look, the skipped blocks and any out-of-line code are not."""
    code = [(int(m.group(1), 16), m.group(2)) for line in _sass(cubin).splitlines() if (m := _ADDRESSED.match(line))]
    target = {a: int(b.group(1), 16) for a, text in code if (b := _BRANCH.search(text))}
    back = min((t, a) for a, t in target.items() if t < a)[1]
    skips = [a for a, t in target.items() if a < t and back - 0x40 <= t <= back]
    if not skips:  # no branch around rare work: the whole build
        return opcodes(cubin)
    skip = max(skips)
    at = {a: i for i, (a, _) in enumerate(code)}
    ops: collections.Counter[str] = collections.Counter()
    i = 0
    while code[i][0] <= skip:
        a, text = code[i]
        if m := _OPCODE.match(text):
            ops[m.group(1)] += 1
        t = target.get(a)
        i = at[t] if t is not None and a < t < skip and at[t] - i > rare_block else i + 1
    return ops


def count(m: int, n: int, dtype: torch.dtype = torch.bfloat16) -> dict[str, Any]:
    """The planned kernel of an m x n contiguous softmax on an H200, built for sm_90, and its opcode counts."""
    softmax._num_sms = lambda device: H200_SMS  # type: ignore[assignment]  # the H200's topology, no GPU here
    softmax._smem_per_sm = lambda index: H200_SMEM_PER_SM  # type: ignore[assignment]
    plan = softmax._plan(m, n, n, 2, torch.device("cuda", 0), dtype)
    assert isinstance(plan, tuple), f"{m}x{n}: plan {type(plan).__name__} is not one launch"
    launch, meta = plan
    x = torch.empty((m, n), dtype=dtype)
    with compile_only("cuda", 90, 32):
        kernel = launch(x, torch.empty_like(x), m, n, n, **meta)
    ops = opcodes(kernel.asm["cubin"])
    row = row_loop_opcodes(kernel.asm["cubin"])
    total = sum(ops.values())
    per_thread = n / (32 * meta["num_warps"])
    return {"shape": f"{m}x{n}", "kernel": kernel.name, "meta": dict(meta),
            "instructions": total, "elements_a_thread": per_thread, "per_element": round(total / per_thread, 2),
            "mufu_per_element": round(ops["MUFU"] / per_thread, 2), "barriers": ops["BAR"],
            "opcodes": dict(ops.most_common()), "row_instructions": sum(row.values()),
            "row_per_element": round(sum(row.values()) / per_thread, 2),
            "row_mufu_per_element": round(row["MUFU"] / per_thread, 2), "row_barriers": row["BAR"]}


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shape", nargs="*", type=int, help="M N pairs (default: the campaign's wide softmax cases)")
    parser.add_argument("--json", type=Path, help="write every count here")
    args = parser.parse_args()
    if len(args.shape) % 2:
        parser.error("shapes are M N pairs")
    os.environ.pop("TRITON_INTERPRET", None)
    shapes = list(zip(args.shape[::2], args.shape[1::2], strict=True)) or list(DEFAULT_SHAPES)
    results = [count(m, n) for m, n in shapes]
    for r in results:
        top = ", ".join(f"{k} {v}" for k, v in list(r["opcodes"].items())[:8])
        log.info("%-12s %-22s %5d instructions, %6.1f elements a thread: %5.2f an element, MUFU %4.2f an element, "
                 "%d CTA barriers (%s); an ordinary row: %d, %5.2f an element, MUFU %4.2f, %d barriers", r["shape"],
                 r["kernel"], r["instructions"], r["elements_a_thread"], r["per_element"], r["mufu_per_element"],
                 r["barriers"], top, r["row_instructions"], r["row_per_element"], r["row_mufu_per_element"],
                 r["row_barriers"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
