"""The resident softmax kernel's earlier slot layout, kept for the experiments measured with it
(experimental_resident_ws.py, sweep_resident_ab.py): a row's chunk slots in two power-of-two shared-memory
buffers. The shipped kernel holds its slots in one [NRES, T, K] buffer, any count (the two buffers left 3 of 15
chunks of a 60000-wide row streamed)."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


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
