"""Hidden cases: drawn per run from a secret the trusted side chooses; never derivable from the public seed, never in
the candidate's environment; the same for parent and sandboxed child; never a published width."""

from __future__ import annotations

import builtins

import pytest
import torch

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.integrity.hidden_cases import input_seed
from kernelproof_core.pipeline import planned_cases, verify_candidate
from kernelproof_core.tasks import TASKS, CaseKind, CaseSet
from tests.conftest import HAS_CUDA


def _campaign(**kw: object) -> Campaign:
    values: dict[str, object] = dict(device="interpreter", dtypes=["float32"], case_set=CaseSet.INTERPRETER)
    values.update(kw)
    return Campaign(**values)  # type: ignore[arg-type]


def test_secret_is_drawn_per_campaign_and_travels_inside_it() -> None:
    a, b = _campaign(seed=1), _campaign(seed=1)
    assert a.hidden_seed is not None and b.hidden_seed is not None and a.hidden_seed != b.hidden_seed
    child = Campaign.model_validate_json(a.model_dump_json())  # what the sandboxed child receives
    task = TASKS["softmax"]
    assert [c.dims for c in planned_cases(task, child)] == [c.dims for c in planned_cases(task, a)]


def test_hidden_cases_are_on_for_full_runs_and_explicit_otherwise() -> None:
    task = TASKS["rms_norm"]
    assert any(c.kind is CaseKind.HIDDEN for c in planned_cases(task, _campaign()))
    chosen = _campaign(case_ids=["n1"])
    assert chosen.hidden_seed is None and [c.case_id for c in planned_cases(task, chosen)] == ["n1"]
    forced = _campaign(case_ids=["n1"], hidden_cases=True)
    assert [c.case_id for c in planned_cases(task, forced)][1:] == [f"hidden_{p.name}" for p in task.hidden_profiles]


@pytest.mark.parametrize("task_name", sorted(TASKS))
@pytest.mark.parametrize("case_set", list(CaseSet))
def test_hidden_widths_are_never_published_ones(task_name: str, case_set: CaseSet) -> None:
    task = TASKS[task_name]
    published = {c.dims["N"] for c in task.cases(case_set, 0) if c.kind is not CaseKind.RANDOM}
    for secret in range(40):
        for case in task.hidden_cases(secret, case_set):
            assert case.dims["N"] not in published, case
    assert [c.dims for c in task.hidden_cases(5, case_set)] == [c.dims for c in task.hidden_cases(5, case_set)]


def test_hidden_inputs_come_from_the_secret_not_the_public_seed() -> None:
    task = TASKS["swiglu"]
    one, two = _campaign(seed=3, hidden_seed=11), _campaign(seed=3, hidden_seed=12)
    case = planned_cases(task, one)[-1]
    assert case.kind is CaseKind.HIDDEN
    assert input_seed(one, task, torch.float32, case) != input_seed(two, task, torch.float32, case)
    public = planned_cases(task, one)[0]
    assert input_seed(one, task, torch.float32, public) == input_seed(two, task, torch.float32, public)


ENV_SPY = b'''
import builtins
import os
import torch
import triton
import triton.language as tl

builtins._kernelproof_test_env = dict(os.environ)


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def candidate(x):
    y = torch.empty_like(x)
    return y
'''


def test_secret_is_not_in_the_candidates_environment() -> None:
    # The session's device: an interpreter run would switch a GPU test process to the interpreter for good.
    device = "cuda" if HAS_CUDA else "interpreter"
    campaign = _campaign(device=device, case_set=CaseSet.FULL if HAS_CUDA else CaseSet.INTERPRETER, case_ids=["n1"],
                         hidden_cases=True, measure=False)
    secret = str(campaign.hidden_seed)
    verify_candidate(CandidateJob(task="softmax", source=ENV_SPY), campaign)
    seen = builtins.__dict__.pop("_kernelproof_test_env")
    assert seen and not any(secret in key or secret in value for key, value in seen.items())


def test_a_folded_exponent_passes_every_published_softmax_case_and_fails_the_hidden_offset_and_masks() -> None:
    """The hidden `offset` profile exists for kernels that fold the max into each exponent (a common speed trick):
    right on every published case (fp32, the interpreter's set, on the GPU in a GPU test process), wrong once the
    logits sit far from zero; and `lowest_mask` (masks written as the dtype's lowest value) makes its folded max of a
    wholly masked row -inf, and the row NaN. Correctness alone: interpreter timings would be 95% of the test's time
    and say nothing here."""
    from tests.adversarial.corpus import CANDIDATES

    path = CANDIDATES / "folded_exponent_softmax.py"
    job = CandidateJob(task="softmax", source=path.read_bytes(), filename=str(path))
    device = "cuda" if HAS_CUDA else "interpreter"  # an interpreter run needs a process Triton has not compiled in
    published = verify_candidate(job, _campaign(device=device, hidden_cases=False, measure=False)).cases
    assert published and all(c.verdict.value == "pass" for c in published), [
        (c.case_id, c.verdict.value) for c in published if c.verdict.value != "pass"]
    hidden = verify_candidate(job, _campaign(device=device, case_ids=["n1"], hidden_cases=True, hidden_seed=7,
                                             measure=False)).cases
    verdicts = {c.case_id: c.verdict.value for c in hidden}
    assert verdicts.pop("hidden_offset") == "tolerance", verdicts
    assert verdicts.pop("hidden_lowest_mask") == "non_finite", verdicts
    assert set(verdicts.values()) == {"pass"}, verdicts
