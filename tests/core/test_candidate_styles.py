"""Honest candidates in the styles found in the wild must pass every case: autotune, runtime-bounded loops,
triton.cdiv, constexpr specialisation, online softmax, strided rows. A false rejection is as much a bug as a missed
cheat."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.tasks import CaseSet
from kernelproof_core.verdicts import Verdict

CANDIDATES = Path(__file__).resolve().parents[1] / "adversarial" / "candidates" / "honest"


@pytest.mark.parametrize(
    ("task", "filename", "dtype"),
    [
        ("rms_norm", "rms_norm_autotuned.py", "bfloat16"),
        ("rms_norm", "rms_norm_autotuned.py", "float32"),
        ("softmax", "softmax_online.py", "bfloat16"),
        ("softmax", "softmax_online.py", "float16"),
    ],
)
def test_honest_styles_pass_every_interpreter_case(task: str, filename: str, dtype: str, device: str) -> None:
    path = CANDIDATES / filename
    campaign = Campaign(device=device, dtypes=[dtype], case_set=CaseSet.INTERPRETER, measure=False)  # type: ignore[arg-type]
    outcome = verify_candidate(CandidateJob(task=task, source=path.read_bytes(), filename=str(path)), campaign)
    failures = [(c.case_id, c.verdict.value, c.failure.message if c.failure else "") for c in outcome.cases
                if c.verdict is not Verdict.PASS]
    assert not failures
    assert len(outcome.cases) >= 10
