"""Outputs kept alive while a pass runs, so that no call writes into memory an earlier call of the pass just wrote.

Why it matters for timing: a call whose output lands where the previous call's output was (the caching allocator,
or a CUDA graph's private pool, hands a freed block straight out again) overwrites lines still dirty in L2, so at
outputs of a few MB the write never reaches DRAM while the sample runs. Ring audits (integrity.audit) keep every
candidate output of a sample to verify any of them, which takes that away from the candidate; on an H100 the
candidate then read 3-26% slower at cases of 1-64 MB and within 1% at 64 MB and more, while a baseline that still
reused its output did not move (evidence/h100/2026-12-05_funnel_ring_ab/2_* against 3_*). So with ring audits the
baseline's outputs and both kernel-only passes are kept the same way (measurement.timing), and the pair is timed
alike, each call writing fresh memory as an operator in a network does. Ring audits are on by default since
harness 0.7.0 (docs/SECURITY.md): the built-ins' mid-size cases read 10-31% slower than with outputs reused, eager's
0-5% (benchmarks/ring_audit_ab.py).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch


def output_bytes(out: Any) -> int:
    """Bytes of one call's output: a tensor's storage span, or the sum over a tuple or list of them (0 otherwise)."""
    if isinstance(out, torch.Tensor):
        return out.numel() * out.element_size()
    if isinstance(out, (tuple, list)):
        return sum(output_bytes(o) for o in out)
    return 0


# Each implementation's kept outputs stay within this share of the GPU's memory, whatever the setting says: a graph
# holds its sample's outputs for the whole case, candidate's and baseline's at once, next to the input ring.
KEPT_OUTPUTS_MEMORY_SHARE = 1 / 8


def kept_bytes_cap(max_bytes: int, device_memory_bytes: int) -> int:
    """The kept-outputs budget on a device of `device_memory_bytes`: the setting, or an eighth of the memory where
    that is less (an H100's or H200's 80-141 GB leave the 4 GiB default as it is; a 16 GB card gets 2 GB)."""
    return min(max_bytes, int(device_memory_bytes * KEPT_OUTPUTS_MEMORY_SHARE))


def kept_calls(calls: int, out_bytes: int, max_bytes: int) -> int:
    """Calls a sample can make with every output kept, within `max_bytes` of outputs (at least 2: one call's
    output alone would be the same memory every sample)."""
    return min(calls, max(2, max_bytes // max(1, out_bytes)))


class OutputWindow:
    """The latest outputs of a pass, kept until they pass `max_bytes` together (the oldest dropped first, the
    newest always kept): with max_bytes far over the L2 (4 GiB against 50-60 MiB), a call never writes into a block
    whose lines an earlier call left in L2. max_bytes 0 keeps nothing (outputs freed as the caller drops them)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._outs: deque[tuple[Any, int]] = deque()
        self.bytes = 0

    def add(self, out: Any) -> None:
        if self.max_bytes <= 0:
            return
        size = output_bytes(out)
        self._outs.append((out, size))
        self.bytes += size
        while len(self._outs) > 1 and self.bytes > self.max_bytes:
            self.bytes -= self._outs.popleft()[1]

    def outputs(self) -> list[Any]:
        """The kept outputs, oldest first."""
        return [out for out, _ in self._outs]

    def __len__(self) -> int:
        return len(self._outs)

    def clear(self) -> None:
        self._outs.clear()
        self.bytes = 0


__all__ = ["KEPT_OUTPUTS_MEMORY_SHARE", "OutputWindow", "kept_bytes_cap", "kept_calls", "output_bytes"]
