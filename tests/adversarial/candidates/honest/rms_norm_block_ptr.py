"""Honest: block pointers (tl.make_block_ptr) with boundary checks, chunked over the row, behind a small launcher
class that caches its launch configuration per width."""

import functools

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm(x_ptr, w_ptr, y_ptr, M, N, stride_x, stride_y, eps, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((1, CHUNK), dtype=tl.float32)
    x_blk = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(stride_x, 1), offsets=(row, 0), block_shape=(1, CHUNK),
                              order=(1, 0))
    for _ in range(0, N, CHUNK):
        x = tl.load(x_blk, boundary_check=(0, 1), padding_option="zero").to(tl.float32)
        acc += x * x
        x_blk = tl.advance(x_blk, (0, CHUNK))
    inv = tl.rsqrt(tl.sum(acc, axis=1) / N + eps)
    x_blk = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(stride_x, 1), offsets=(row, 0), block_shape=(1, CHUNK),
                              order=(1, 0))
    y_blk = tl.make_block_ptr(y_ptr, shape=(M, N), strides=(stride_y, 1), offsets=(row, 0), block_shape=(1, CHUNK),
                              order=(1, 0))
    w_blk = tl.make_block_ptr(w_ptr, shape=(1, N), strides=(N, 1), offsets=(0, 0), block_shape=(1, CHUNK),
                              order=(1, 0))
    for _ in range(0, N, CHUNK):
        x = tl.load(x_blk, boundary_check=(0, 1), padding_option="zero").to(tl.float32)
        w = tl.load(w_blk, boundary_check=(0, 1), padding_option="zero").to(tl.float32)
        tl.store(y_blk, (x * inv[:, None] * w).to(y_ptr.dtype.element_ty), boundary_check=(0, 1))
        x_blk = tl.advance(x_blk, (0, CHUNK))
        y_blk = tl.advance(y_blk, (0, CHUNK))
        w_blk = tl.advance(w_blk, (0, CHUNK))


class _Launcher:
    @staticmethod
    @functools.cache
    def chunk(n: int) -> int:
        return min(2048, triton.next_power_of_2(n))

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        m, n = x.shape
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)
        _rms_norm[(m,)](x, weight, y, m, n, x.stride(0), y.stride(0), eps, CHUNK=self.chunk(n))
        return y


candidate = _Launcher()
