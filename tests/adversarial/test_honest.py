"""Honest candidates in many styles pass every case with every defence on: hidden cases, the static policy, proof of
work, tamper checks and (for the measured ones) audited timing. A false rejection is as much a bug as a missed cheat.
"""

from __future__ import annotations

import pytest

from kernelproof_core.verdicts import Verdict
from tests.adversarial.corpus import HONEST_CANDIDATES, Honest, run_honest
from tests.conftest import HAS_CUDA

DEVICE = "cuda" if HAS_CUDA else "interpreter"


@pytest.mark.parametrize("entry", [pytest.param(h, id=f"{h.task}-{h.path.stem}") for h in HONEST_CANDIDATES])
def test_honest_candidate_passes_every_case(entry: Honest) -> None:
    cases = run_honest(entry, DEVICE)
    failures = [(c.case_id, c.verdict.value, c.failure.message if c.failure else "") for c in cases
                if c.verdict is not Verdict.PASS]
    assert not failures
    assert any(c.case_kind == "hidden" for c in cases)
    for case in cases:
        assert case.integrity is not None and case.integrity.own_launches >= 1 and case.integrity.kernels
        assert case.integrity.policy is not None
        if entry.measure:
            assert case.timing is not None and case.timing.audited_samples >= 1
