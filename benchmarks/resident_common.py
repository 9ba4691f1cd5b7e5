"""What the resident softmax experiments share (experimental_resident_ws.py, experimental_resident_ring.py,
sweep_resident_ab.py): the shipped kernel's earlier slot layout, kept for the experiments measured with it (a row's
chunk slots in two power-of-two shared-memory buffers; the shipped kernel holds them in one [NRES, T, K] buffer of
any count, as the two buffers left 3 of a 60000-wide row's 15 chunks streamed), and the stats pass's running update."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from kernelproof_core.kernels.softmax import _LOG2E


@gluon.jit
def _slot(buf_a: gl.shared_memory_descriptor, buf_b: gl.shared_memory_descriptor, c: gl.constexpr,
          RES_A: gl.constexpr, T: gl.constexpr) -> gl.shared_memory_descriptor:
    # Chunk c's slot: the first RES_A chunks live in buf_a, the next ones in buf_b.
    if c < RES_A:
        return buf_a.slice(c * T, T)
    else:
        return buf_b.slice((c - RES_A) * T, T)


def _resident_chunks(n_chunks: int, chunk_bytes: int, budget: int) -> tuple[int, int]:
    """(RES_A, RES_B): chunk slots held in shared memory, as two power-of-two buffers within `budget` bytes."""
    fit = min(n_chunks, budget // chunk_bytes)
    if fit < 1:
        raise ValueError(f"a {chunk_bytes}-byte chunk does not fit {budget} bytes of shared memory")
    a = 1 << (fit.bit_length() - 1)
    rest = fit - a
    return a, (1 << (rest.bit_length() - 1) if rest else 0)


@gluon.jit
def _running_stats(m_t: gl.tensor, s_t: gl.tensor, x: gl.tensor) -> tuple[gl.tensor, gl.tensor]:
    # One chunk into each thread's running (max, sum of exp) as the shipped kernel's stats pass does it.
    m_new = gl.maximum(m_t, gl.max(x, axis=1))
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new) * _LOG2E  # all -inf so far: (max=-inf, sum=0)
    return m_new, s_t * gl.exp2(m_t * _LOG2E - m_safe) + gl.sum(gl.exp2(x * _LOG2E - m_safe[:, None]), axis=1)


@gluon.jit
def _row_shift(m_t: gl.tensor, s_t: gl.tensor) -> gl.tensor:
    # The row's max log2 e + log2 of its sum of exp: y = 2^(x log2 e - shift).
    m2 = gl.max(m_t, axis=0) * _LOG2E
    return m2 + gl.log2(gl.sum(s_t * gl.exp2(m_t * _LOG2E - m2), axis=0))


@gluon.jit
def _chunk_offsets(T: gl.constexpr, K: gl.constexpr, layout: gl.constexpr) -> gl.tensor:
    # A chunk's element offsets, [T, K]: K contiguous elements per thread.
    return (gl.arange(0, T, layout=gl.SliceLayout(1, layout)) * K)[:, None] + gl.arange(
        0, K, layout=gl.SliceLayout(0, layout))[None, :]
