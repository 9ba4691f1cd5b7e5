"""GPU-only behaviour of the pipeline: compiled Triton errors, allocator poisoning, CUDA-event timing, CUPTI time,
and the reward. Skipped without CUDA; run on the H200 by scripts/gpu-check."""

from __future__ import annotations

import pytest

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.tasks import CaseSet
from kernelproof_core.verdicts import Verdict
from tests.candidates.rms_norm_variants import source

pytestmark = pytest.mark.gpu


def _campaign(**kw: object) -> Campaign:
    base: dict[str, object] = dict(device="cuda", dtypes=["bfloat16"], case_set=CaseSet.FULL, case_ids=["llama_4096"],
                                   warmups=3, samples=20, invocations_per_sample=10)
    base.update(kw)
    return Campaign(**base)  # type: ignore[arg-type]


def test_triton_compile_error_is_typed() -> None:
    broken = source("honest").replace(b"inv = tl.rsqrt(", b"inv = tl.no_such_builtin(", 1)
    (r,) = verify_candidate(CandidateJob(task="rms_norm", source=broken), _campaign(measure=False)).cases
    assert r.verdict is Verdict.COMPILE_ERROR, r.failure


def test_unwritten_output_reads_poison_not_a_previous_result() -> None:
    (r,) = verify_candidate(CandidateJob(task="rms_norm", source=source("stale_memory")),
                            _campaign(measure=False)).cases
    assert r.verdict in (Verdict.NON_FINITE, Verdict.TOLERANCE), r.failure


def test_honest_candidate_is_timed_with_events_and_cupti() -> None:
    (r,) = verify_candidate(CandidateJob(task="rms_norm", source=source("honest")), _campaign()).cases
    assert r.verdict is Verdict.PASS, r.failure
    t = r.timing
    assert t is not None and t.kind == "cuda_events"
    kept = 20 - (t.throttled_samples or 0)  # pairs taken while the GPU throttled are discarded
    assert t.samples == 20 and t.candidate.count == kept and t.baseline.count == kept
    assert len(t.candidate.samples) == kept
    assert 0 < t.candidate.min <= t.candidate.median <= t.candidate.p95 <= t.candidate.max
    assert t.candidate_device_us is not None and 0 < t.candidate_device_us <= t.candidate.median * 1.5
    assert t.baseline_device_us is not None and t.baseline_device_us > 0
    assert t.achieved_bandwidth_gbps is not None and t.achieved_bandwidth_gbps > 100
    assert r.reward is not None and r.reward.speed_score is not None
    assert r.reward.value == pytest.approx(r.reward.speed_score - (r.reward.instability or 0.0))


def test_a_deliberately_slow_candidate_scores_below_zero() -> None:
    """25 launches of a kernel ~12x faster than eager: about 2x slower than eager in all."""
    slow = source("honest").replace(
        b"    _rms_norm_kernel[(m,)]",
        b"    for _ in range(24):\n"
        b"        _rms_norm_kernel[(m,)](x, weight, y, x.stride(0), y.stride(0), n, eps, 0.0, BLOCK_N=block)\n"
        b"    _rms_norm_kernel[(m,)]", 1)
    (r,) = verify_candidate(CandidateJob(task="rms_norm", source=slow), _campaign()).cases
    assert r.verdict is Verdict.PASS, r.failure
    assert r.reward is not None and r.reward.speed_score is not None and r.reward.speed_score < 0
