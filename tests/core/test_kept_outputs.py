"""Outputs kept while a pass runs (measurement/kept_outputs.py), without a GPU: the window's byte bound and order,
the per-sample call cap, and that a kept output's memory is not handed out again while it is held. The timed pair
under ring audits is tested on the GPU (tests/gpu/test_gpu_graph_replay.py)."""

from __future__ import annotations

import torch

from kernelproof_core.measurement.kept_outputs import OutputWindow, kept_bytes_cap, kept_calls, output_bytes


def test_output_bytes_counts_tensors_and_their_tuples() -> None:
    assert output_bytes(torch.empty(10, dtype=torch.bfloat16)) == 20
    assert output_bytes((torch.empty(3, dtype=torch.float32), [torch.empty(2, dtype=torch.int64)])) == 28
    assert output_bytes(None) == 0 and output_bytes(3.0) == 0


def test_kept_calls_caps_by_bytes_and_keeps_at_least_two() -> None:
    assert kept_calls(100, 1 << 20, 4 << 30) == 100  # 100 MB of 1 MB outputs: all of them
    assert kept_calls(100, 512 << 20, 4 << 30) == 8  # 512 MB outputs: 8 calls
    assert kept_calls(100, 8 << 30, 4 << 30) == 2  # one output over the cap: still two, never the same memory
    assert kept_calls(1, 1 << 20, 4 << 30) == 1
    assert kept_calls(7, 0, 4 << 30) == 7  # no tensor output: nothing to keep, no cap


def test_the_window_keeps_the_newest_outputs_within_its_bytes() -> None:
    window = OutputWindow(max_bytes=3 * 400)
    outs = [torch.full((100,), i, dtype=torch.float32) for i in range(5)]  # 400 bytes each
    for out in outs:
        window.add(out)
    assert len(window) == 3 and window.bytes == 1200
    assert [int(t[0]) for t in window.outputs()] == [2, 3, 4]  # the oldest dropped first
    window.add(torch.empty(10_000, dtype=torch.float32))  # alone over the bound: kept, the rest dropped
    assert len(window) == 1 and window.bytes == 40_000
    window.clear()
    assert len(window) == 0 and window.bytes == 0


def test_a_window_of_no_bytes_keeps_nothing() -> None:
    window = OutputWindow(0)
    window.add(torch.empty(100))
    assert len(window) == 0 and window.bytes == 0


def test_held_outputs_are_not_handed_out_again() -> None:
    """What the window is for: a call whose predecessor's output is still held gets memory of its own (the
    allocator cannot hand out a live block), so it does not write over lines that output left in a cache."""
    window = OutputWindow(1 << 30)
    x = torch.randn(1 << 16)
    for _ in range(6):
        window.add(x * 2)
    assert len({t.untyped_storage().data_ptr() for t in window.outputs()}) == 6


def test_kept_bytes_stay_within_an_eighth_of_the_gpu() -> None:
    """Both sides' kept outputs live at once (each captured graph holds its own): a small card must not run out."""
    assert kept_bytes_cap(4 << 30, 141 * 10**9) == 4 << 30  # H200: the setting
    assert kept_bytes_cap(4 << 30, 80 * 10**9) == 4 << 30  # H100: the setting
    assert kept_bytes_cap(4 << 30, 16 << 30) == 2 << 30  # a 16 GiB card: an eighth
    assert kept_bytes_cap(4 << 30, 8 << 30) == 1 << 30
    assert kept_calls(100, 512 << 20, kept_bytes_cap(4 << 30, 8 << 30)) == 2  # still two calls, never one
