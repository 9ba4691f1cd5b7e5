"""Proof of work: the decision that the output came from Triton kernels the candidate defined and launched.

Evidence per call (launches.py, dispatch.py) and, on a GPU, the kernels CUPTI saw. The call fails with
`no_kernel_launch` when:
  * none of the candidate's own kernels was launched;
  * a torch op computed on the data (a fallback, whatever decoy kernels run next to it);
  * more than MAX_TRANSFER_BYTES moved between host and device (the work left the device);
  * the output is not memory the candidate's kernels wrote. Interpreter: every output byte was stored by an owned
    kernel during the call, directly or through plain copies of such memory. Compiled: the output's storage was an
    argument of an owned launch, directly or through copies; where no owned launch went through `JITFunction.run`
    (a compiled kernel launched directly) the arguments are unknown and this test is skipped;
  * (interpreter) an owned kernel read memory of unknown origin: neither an input, nor allocated during the call,
    nor written by its kernels during the call, nor a copy of such memory. That is how a result computed elsewhere
    (NumPy, an earlier call's cache) gets laundered through a Triton copy kernel;
  * (interpreter) an owned kernel read memory that a Triton kernel the candidate did not define (a library's,
    another module's) stored during the call, or a copy of it: someone else's kernels did the work, laundered
    through an own copy kernel. (On a GPU those kernels are foreign in CUPTI's record, below.)
  * (GPU) kernels the candidate did not write took more than MAX_FOREIGN_GPU_SHARE of the call's GPU time; plain
    copies, fills and memsets do not count against it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from kernelproof_core.errors import CandidateFailure
from kernelproof_core.integrity.dispatch import MAX_TRANSFER_BYTES, DispatchTrace, TensorMeta
from kernelproof_core.integrity.launches import LaunchLog
from kernelproof_core.verdicts import Verdict

MAX_FOREIGN_GPU_SHARE = 0.10
# Kernel-name fragments of device work that moves or fills memory without computing on it.
DATA_MOVEMENT_KERNELS = ("Memcpy", "Memset", "FillFunctor", "direct_copy_kernel", "copy_kernel", "fill_kernel")


def _fail(message: str) -> CandidateFailure:
    return CandidateFailure(Verdict.NO_KERNEL_LAUNCH, message)


def check_launched(log: LaunchLog) -> None:
    """At least one launch of a kernel the candidate defined."""
    if log.own_launches == 0:
        others = sorted({launch.kernel for launch in log.launches} | {name for name, _ in log.hooked})
        seen = f" (launched only kernels it did not define: {', '.join(others[:5])})" if others else ""
        raise _fail("no Triton kernel defined in the candidate was launched during the call" + seen)


def check_proof_of_work(log: LaunchLog, trace: DispatchTrace, out: torch.Tensor, inputs: Sequence[Any]) -> None:
    """See the module docstring."""
    check_launched(log)
    if trace.compute_ops:
        ops = sorted(set(trace.compute_ops))
        raise _fail(f"torch computed on the data during the call ({', '.join(ops[:6])}): the work must be done by "
                    "the candidate's Triton kernels")
    if trace.transfer_bytes > MAX_TRANSFER_BYTES:
        raise _fail(f"{trace.transfer_bytes} bytes moved between host and device during the call (at most "
                    f"{MAX_TRANSFER_BYTES}): the work must stay on the device")
    meta = TensorMeta.of(out)
    if log.tracks_stores:
        _check_bytes(log, trace, meta, [TensorMeta.of(x) for x in inputs if isinstance(x, torch.Tensor)])
    elif any(launch.owned for launch in log.launches) and not _storage_written(log, trace, meta):
        raise _fail("the output is not memory that a Triton kernel of the candidate was given to write")


def element_bytes(meta: TensorMeta) -> np.ndarray:
    """Byte addresses of every element of a tensor (any strides)."""
    offsets = np.zeros((), dtype=np.int64)
    for size, stride in zip(meta.shape, meta.stride, strict=True):
        offsets = np.add.outer(offsets, np.arange(size, dtype=np.int64) * stride)
    starts = (meta.data_ptr + offsets.ravel() * meta.element_size).astype(np.uint64)
    return np.add.outer(starts, np.arange(meta.element_size, dtype=np.uint64)).ravel()


def _sorted_unique(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Sorted distinct addresses (a sort, not np.unique's hashing: much faster on these large uint64 arrays)."""
    if not arrays:
        return np.zeros(0, dtype=np.uint64)
    a = np.sort(np.concatenate(arrays))
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if a.size else a


class _Bytes:
    """A set of byte addresses: whole spans plus loose bytes (kept sorted for binary search)."""

    def __init__(self, spans: list[tuple[int, int]], loose: Sequence[np.ndarray]) -> None:
        self.spans = spans
        self.loose = _sorted_unique(loose)

    def contains(self, addrs: np.ndarray) -> np.ndarray:
        inside = np.zeros(addrs.shape, dtype=bool)
        for lo, hi in self.spans:
            inside |= (addrs >= np.uint64(lo)) & (addrs < np.uint64(hi))
        rest = ~inside
        if self.loose.size and rest.any():
            probe = addrs[rest]
            idx = np.minimum(np.searchsorted(self.loose, probe), self.loose.size - 1)
            inside[rest] = self.loose[idx] == probe
        return inside

    def add(self, addrs: np.ndarray) -> None:
        self.loose = _sorted_unique([self.loose, addrs])


def _check_bytes(log: LaunchLog, trace: DispatchTrace, out: TensorMeta, inputs: list[TensorMeta]) -> None:
    written = _Bytes([], log.written)
    known = _Bytes([(m.storage_ptr, m.storage_ptr + _storage_bytes(m)) for m in inputs] + trace.allocated,
                   [written.loose])
    foreign = _Bytes([], log.foreign_written)
    for dst, src in trace.copies:  # a plain copy of written (known) memory is written (known) too, e.g. a cast
        src_bytes, dst_bytes = element_bytes(src), element_bytes(dst)
        if written.contains(src_bytes).all():
            written.add(dst_bytes)
        if known.contains(src_bytes).all():
            known.add(dst_bytes)
        if foreign.loose.size and foreign.contains(src_bytes).any():  # so is a copy of what others computed
            foreign.add(dst_bytes)
    if not written.contains(element_bytes(out)).all():
        raise _fail("the output holds bytes that no Triton kernel of the candidate stored during the call")
    if log.read and not known.contains(_sorted_unique(log.read)).all():
        raise _fail("a Triton kernel of the candidate read memory that is neither an input nor produced during "
                    "the call: a result computed elsewhere or cached from an earlier call, copied into place")
    if log.read and foreign.loose.size and foreign.contains(_sorted_unique(log.read)).any():
        others = sorted({launch.kernel for launch in log.launches if not launch.owned})
        raise _fail("a Triton kernel of the candidate read memory that kernels it did not define computed during "
                    f"the call ({', '.join(others[:3])}): their result, copied into place")


def _storage_bytes(meta: TensorMeta) -> int:
    """Extent of a tensor's elements from its storage start (a lower bound of the storage's size)."""
    if 0 in meta.shape:
        return 0
    last = sum((size - 1) * stride for size, stride in zip(meta.shape, meta.stride, strict=True))
    return meta.data_ptr - meta.storage_ptr + (last + 1) * meta.element_size


def _storage_written(log: LaunchLog, trace: DispatchTrace, out: TensorMeta) -> bool:
    owned = {meta.storage_ptr for launch in log.launches if launch.owned for meta in launch.args}
    for dst, src in trace.copies:
        if src.storage_ptr in owned:
            owned.add(dst.storage_ptr)
    return out.storage_ptr in owned


def _foreign(kernel_us: dict[str, float], owned_names: set[str]) -> list[str]:
    """Kernels (CUPTI names) that neither the candidate wrote nor only move data. A Triton kernel's CUPTI name is its
    function's name (a short specialisation suffix is tolerated); torch's are C++ signatures, which no Python
    identifier equals."""
    own = re.compile("|".join(f"{re.escape(n)}(_[0-9a-z]+)?" for n in sorted(owned_names)) or "(?!)")
    return [name for name in kernel_us
            if not own.fullmatch(name) and not any(f in name for f in DATA_MOVEMENT_KERNELS)]


def foreign_share(kernel_us: dict[str, float], owned_names: set[str]) -> float:
    """Share of GPU time in kernels the candidate did not write, data movement excepted."""
    total = sum(kernel_us.values())
    return sum(kernel_us[n] for n in _foreign(kernel_us, owned_names)) / total if total > 0 else 0.0


def check_gpu_share(kernel_us: dict[str, float], owned_names: set[str]) -> None:
    """(GPU) Kernels the candidate did not write may take at most MAX_FOREIGN_GPU_SHARE of the call's GPU time."""
    share = foreign_share(kernel_us, owned_names)
    if share > MAX_FOREIGN_GPU_SHARE:
        foreign = sorted(_foreign(kernel_us, owned_names), key=lambda n: -kernel_us[n])
        raise _fail(f"{share:.0%} of the call's GPU time was in kernels the candidate did not write "
                    f"({'; '.join(n[:80] for n in foreign[:3])}); at most {MAX_FOREIGN_GPU_SHARE:.0%} is allowed")
