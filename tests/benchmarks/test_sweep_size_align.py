"""benchmarks/sweep_size_align.py: each contiguous softmax case off the 16-byte grid is swept beside the same rows on
the grid (the same bytes within 0.2%) and beside four times its rows, each with torch's copy of the same tensor; the
planned softmax is checked against fp32 before it may be timed. The timing is kernel_sweep.py's (family
`softmax_size_align`); here the trials run small under the interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import sweep_size_align

from kernelproof_core.kernels import softmax

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def test_every_off_grid_case_has_an_on_grid_twin_and_four_times_its_rows() -> None:
    shapes = set(sweep_size_align.SHAPES)
    off = [(m, n) for m, n in shapes if n % 8]
    assert off
    for m, n in off:
        twins = [(m2, n2) for m2, n2 in shapes if m2 == m and n2 % 8 == 0 and abs(n2 - n) / n < 2e-3]
        assert twins, (m, n)
        if (m // 4, n) not in shapes:  # the campaign's draw: four times its rows on and off the grid
            assert (4 * m, n) in shapes and any((4 * m, n2) in shapes for _, n2 in twins), (m, n)


def test_trials_copy_and_check_the_planned_softmax(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep_size_align, "SHAPES", ((3, 100), (3, 104)))
    trials = list(sweep_size_align.softmax_size_align_trials(DEVICE, torch.bfloat16))
    assert [(t[0], t[1], t[2], t[5]) for t in trials] == [
        ("copy.torch", (3, 100), "y.copy_(x) rows off the grid", False),
        ("softmax.planned", (3, 100), "planned rows off the grid", True),
        ("copy.torch", (3, 104), "y.copy_(x) rows on the grid", False),
        ("softmax.planned", (3, 104), "planned rows on the grid", True)]
    assert [t[4] for t in trials] == [2 * 3 * 100 * 2] * 2 + [2 * 3 * 104 * 2] * 2
    y = trials[1][3]()  # the planned launch returns softmax(x)
    assert isinstance(y, torch.Tensor) and y.shape == (3, 100)
    assert torch.allclose(y.float().sum(-1), torch.ones(3, device=DEVICE), atol=2e-2)


def test_a_wrong_softmax_is_not_timed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The gate itself: a planned launch returning zeros (or nothing) is reported and left out."""
    monkeypatch.setattr(sweep_size_align, "SHAPES", ((3, 100),))
    monkeypatch.setattr(softmax, "candidate", lambda x: torch.zeros_like(x))
    kinds = [t[0] for t in sweep_size_align.softmax_size_align_trials(DEVICE, torch.bfloat16)]
    assert kinds == ["copy.torch"] and "3x100: WRONG" in capsys.readouterr().out
    ref = torch.softmax(torch.randn(2, 8), -1)
    assert not sweep_size_align.output_close(None, ref, "none")
    assert sweep_size_align.output_close(ref.clone(), ref, "same")
