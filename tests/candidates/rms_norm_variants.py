"""Deliberately broken rms_norm candidates, each a complete candidate source built from one template.

Every variant is a real Triton kernel (run under the interpreter on CPU, compiled on the GPU); each differs from the
honest kernel by exactly the bug it names, so a test that expects a verdict proves that gate catches that bug.
"""

from __future__ import annotations

TEMPLATE = '''
import torch
import triton
import triton.language as tl
{prelude}

@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, stride_x, stride_y, N, eps, salt, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * inv * w
    {kernel_extra}
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def candidate(x, weight, eps):
    m, n = x.shape
    {host_pre}
    y = {alloc}
    block = {block}
    _rms_norm_kernel[(m,)](x, weight, y, x.stride(0), y.stride(0), n, eps, {salt}, BLOCK_N=block)
    {host_post}
    return {ret}
'''

DEFAULTS = {
    "prelude": "",
    "kernel_extra": "",
    "host_pre": "",
    "alloc": "torch.empty((m, n), dtype=x.dtype, device=x.device)",
    "block": "triton.next_power_of_2(n)",
    "salt": "0.0",
    "host_post": "",
    "ret": "y",
}

VARIANTS: dict[str, dict[str, str]] = {
    "honest": {},
    # Tail bug: the block is the largest power of two <= N, so the last columns of a 127-wide row are never written.
    "tail_bug": {"alloc": "torch.zeros((m, n), dtype=x.dtype, device=x.device)",
                 "block": "1 << (n.bit_length() - 1)"},
    "wrong_dtype": {"alloc": "torch.empty((m, n), dtype=torch.float32, device=x.device)"},
    "wrong_shape": {"ret": "y[:, : max(n - 1, 1)] if n > 1 else y.reshape(m, 1, 1)"},
    "wrong_type": {"ret": "y.tolist()"},
    "wrong_device": {"ret": "y.to('meta')"},
    # Nondeterministic: a call counter perturbs the output by a relative 1e-6 on every other call (within tolerance,
    # but not bit-exact on replay).
    "nondeterministic": {"prelude": "_calls = [0]", "host_pre": "_calls[0] += 1",
                         "kernel_extra": "y = y * (1.0 + salt)", "salt": "1e-6 * (_calls[0] % 2)"},
    # Input mutation: the kernel also writes its result back into x.
    "input_mutating": {
        "kernel_extra": "tl.store(x_ptr + row * stride_x + cols, y.to(x_ptr.dtype.element_ty), mask=mask)"
    },
    # Output caching keyed by shape: right the first time, stale forever after.
    "caching": {"prelude": "_cache = {}", "host_pre": "if (m, n) in _cache:\n        return _cache[(m, n)].clone()",
                "host_post": "_cache[(m, n)] = y.clone()"},
    # Stale memory: launches the kernel into a scratch buffer but returns a never-written allocation.
    "stale_memory": {"ret": "torch.empty_like(y)"},
    # Non-finite: divides the first column by zero.
    "non_finite": {"kernel_extra": "y = tl.where(cols == 0, y / 0.0, y)"},
    "runtime_error": {"host_pre": "raise RuntimeError('candidate gave up')"},
    # Capture cheat: honest whenever it runs eagerly (every gate), zeros while a CUDA graph is captured (what
    # timing replays).
    "capture_cheat": {"host_pre": "if torch.cuda.is_current_stream_capturing():\n"
                                  "        return torch.zeros((m, n), dtype=x.dtype, device=x.device)"},
    # Capture cheat that rewrites its input: zeros in, zeros out, which the oracle of the zeroed input agrees with.
    "capture_zeroing": {"host_pre": "if torch.cuda.is_current_stream_capturing():\n"
                                    "        x.zero_()\n"
                                    "        return torch.zeros((m, n), dtype=x.dtype, device=x.device)"},
    # Skip keyed on the input's address, in every mode alike (captured or not, timed or profiled): every third call
    # on an address (and shape) seen six times or more returns the output kept from its last computed call. The
    # gates' inputs are fresh (an address recurs a few times a case at most: under the interpreter every published
    # and hidden case passed its gates); the warm-ups, the timed calls and the kernel-only pass rotate through the
    # same ring sets, while the audit set (the last call's) is never among them, so only ring audits verify a
    # skipped call.
    "skip_by_address": {"prelude": "_seen = {}\n_kept = {}",
                        "host_pre": "key = (x.data_ptr(), tuple(x.shape))\n    _seen[key] = _seen.get(key, 0) + 1\n"
                                    "    if _seen[key] >= 6 and _seen[key] % 3 == 0 and key in _kept:\n"
                                    "        return _kept[key]",
                        "host_post": "_kept[key] = y"},
    # Honest, but waits for the device after every call: cannot be captured in a CUDA graph.
    "synchronizing": {"host_post": "torch.cuda.synchronize()"},
}


def source(variant: str) -> bytes:
    params = {**DEFAULTS, **VARIANTS[variant]}
    return TEMPLATE.format(**params).encode()
