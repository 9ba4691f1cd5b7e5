"""Which torch ops a candidate ran: a TorchDispatchMode over one call, attributing each op to the code that issued it.

Allocation, views, fills and copies on the device are what a Triton launcher needs and are allowed; an op that
computes (softmax, mul, sum, ...) means torch did some of the work, which is a fallback however many Triton kernels
are launched next to it. Copies between host and device beyond a few KiB mean the work left the device. Ops issued
from inside Triton (the interpreter's argument copies, the autotuner's benchmarking) are not the candidate's and are
ignored, but a Triton kernel body is candidate code and is attributed to the candidate. The allow-list is data.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten overload packets that allocate, view, fill or copy: no arithmetic on the task's data.
NON_COMPUTE_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "scalar_tensor", "arange", "lift_fresh",
    "lift_fresh_copy", "fill_", "zero_", "fill", "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided",
    "expand", "t", "transpose", "permute", "squeeze", "unsqueeze", "slice", "select", "alias", "detach", "unbind",
    "split", "split_with_sizes", "chunk", "narrow", "flatten", "unflatten", "view_as", "clone", "copy_",
    "_copy_from", "_copy_from_and_resize", "_to_copy", "contiguous", "resize_", "set_", "_local_scalar_dense",
    "is_same_size", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "record_stream", "is_pinned",
    "_pin_memory", "_has_compatible_shallow_copy_type", "_unsafe_view_copy", "view_copy", "as_strided_copy",
})
COPY_OPS = frozenset({"clone", "copy_", "_copy_from", "_to_copy", "contiguous", "_copy_from_and_resize"})
# Ops whose result holds no data from outside the call (garbage or constants): memory a kernel may read.
ALLOCATION_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "scalar_tensor", "arange",
})
MAX_TRANSFER_BYTES = 64 * 1024  # host<->device bytes a call may move (scalars, small tables)

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_TRITON_DIR = os.path.dirname(str(getattr(importlib.util.find_spec("triton"), "origin", ""))) + os.sep
_THIS_FILE = __file__


def preload_dynamo() -> None:
    """A dispatch mode imports torch._dynamo, and with it Triton, on first use. Import it as early as that is safe,
    in the trusted process (a sandboxed child may be unable to import afterwards), but never before the interpreter
    flag is decided: importing Triton first would fix its own @jit helpers (tl.max, ...) in compiled mode. It is safe
    once the flag is set or Triton is imported anyway (the fork server's order); otherwise guard.warm_up calls this
    after enable_interpreter."""
    if os.environ.get("TRITON_INTERPRET") or "triton" in sys.modules:
        import torch._dynamo  # noqa: F401


preload_dynamo()


@dataclass(frozen=True, slots=True)
class TensorMeta:
    """Where a tensor's elements live: enough to test which bytes a kernel wrote."""

    data_ptr: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    element_size: int
    storage_ptr: int
    device: str

    @classmethod
    def of(cls, t: torch.Tensor) -> TensorMeta:
        return cls(t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.element_size(),
                   t.untyped_storage().data_ptr(), t.device.type)


@dataclass
class DispatchTrace:
    """Ops the candidate's own code issued during one call."""

    compute_ops: list[str] = field(default_factory=list)
    transfer_bytes: int = 0
    copies: list[tuple[TensorMeta, TensorMeta]] = field(default_factory=list)  # (destination, source)
    allocated: list[tuple[int, int]] = field(default_factory=list)  # storage spans made by allocation ops


def _origin_is_triton() -> bool:
    """Whether the innermost frame outside torch (and this module) belongs to Triton's own code."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(_TORCH_DIR) or name == _THIS_FILE):
            return name.startswith(_TRITON_DIR)
        frame = frame.f_back  # type: ignore[assignment]
    return False


class ComputeTracer(TorchDispatchMode):
    """Records compute ops, host-device transfers and copies issued by candidate code while active."""

    def __init__(self) -> None:
        super().__init__()
        self.trace = DispatchTrace()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if name in ALLOCATION_OPS and isinstance(out, torch.Tensor) and out.device.type != "meta":
            storage = out.untyped_storage()
            self.trace.allocated.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
        if name in NON_COMPUTE_OPS and name not in COPY_OPS:
            return out
        if _origin_is_triton():
            return out
        if name not in NON_COMPUTE_OPS:
            self.trace.compute_ops.append(str(func))
            return out
        self._record_copy(name, args, out)
        return out

    def _record_copy(self, name: str, args: Any, out: Any) -> None:
        if name == "copy_":
            dst, src = args[0], args[1]
        elif name in ("_copy_from", "_copy_from_and_resize"):
            src, dst = args[0], args[1]
        else:
            src, dst = args[0], out
        if not (isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor)):
            return
        if src.device.type != dst.device.type:
            self.trace.transfer_bytes += src.numel() * src.element_size()
        if "meta" not in (src.device.type, dst.device.type):
            self.trace.copies.append((TensorMeta.of(dst), TensorMeta.of(src)))
