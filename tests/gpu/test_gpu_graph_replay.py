"""CUDA-graph replay of timing samples on a real GPU (measurement/replay.py): an honest candidate is replayed and its
event time meets its CUPTI kernel time; a candidate that captures something else than it runs eagerly is caught
before any sample; one that cannot be captured is timed with stream launches, and the report says so; with ring
audits, a skip keyed on input addresses is caught in both modes. Skipped without CUDA; run on the H200 by
scripts/gpu-check."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.measurement.replay import capture, capture_pair
from kernelproof_core.measurement.timing import measure_cuda
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.tasks import CaseSet
from kernelproof_core.verdicts import Verdict
from tests.candidates.rms_norm_variants import source

pytestmark = pytest.mark.gpu
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _campaign(**kw: object) -> Campaign:
    base: dict[str, object] = dict(device="cuda", dtypes=["bfloat16"], case_set=CaseSet.FULL,
                                   case_ids=["llama_4096"], warmups=3, samples=20, invocations_per_sample=20)
    base.update(kw)
    return Campaign(**base)


@requires_cuda
def test_a_captured_sample_reuses_freed_outputs_and_replays_the_calls() -> None:
    sets = [[torch.randn(1 << 20, device="cuda")] for _ in range(3)]
    audit = [torch.randn(1 << 20, device="cuda")]
    graph = capture(lambda a: a * 2, sets, 7, audit)
    assert graph.calls == 7 and graph.last_inputs is audit
    audit[0].copy_(torch.randn(1 << 20, device="cuda"))  # new contents, same memory
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(graph.out, audit[0] * 2)


@requires_cuda
def test_a_failed_capture_leaves_the_process_usable() -> None:
    def synchronizing(a: torch.Tensor) -> torch.Tensor:
        out = a * 2
        torch.cuda.synchronize()
        return out

    x = torch.randn(1 << 10, device="cuda")
    cand, base, why = capture_pair(synchronizing, lambda a: a * 2, [[x]], (3, 3))
    assert cand is None and base is None and why is not None and "candidate" in why
    assert torch.randn(4, device="cuda").isfinite().all()  # the CUDA generator left capture mode
    assert capture(lambda a: a * 3, [[x]], 2).calls == 2  # and capturing works again


@requires_cuda
def test_honest_candidate_is_replayed_and_its_event_time_meets_cupti() -> None:
    (r,) = verify_candidate(CandidateJob(task="rms_norm", source=source("honest")), _campaign()).cases
    assert r.verdict is Verdict.PASS, r.failure
    t = r.timing
    assert t is not None
    assert t.sample_launch == "cuda_graph", t.note
    assert t.candidate_device_us is not None
    # A ~34 us kernel: launched one by one its events ran 5.5% over CUPTI; replayed, within about 1.5%.
    assert abs(t.candidate.median / t.candidate_device_us - 1.0) < 0.05, (t.candidate.median, t.candidate_device_us)


@requires_cuda
def test_a_candidate_that_captures_a_shortcut_is_caught_before_any_sample() -> None:
    (r,) = verify_candidate(CandidateJob(task="rms_norm", source=source("capture_cheat")), _campaign()).cases
    assert r.verdict is Verdict.CACHED_OUTPUT, r.failure
    assert r.timing is None or r.timing.samples == 0


@requires_cuda
def test_a_captured_shortcut_that_rewrites_its_inputs_is_input_mutated() -> None:
    (r,) = verify_candidate(CandidateJob(task="rms_norm", source=source("capture_zeroing")), _campaign()).cases
    assert r.verdict is Verdict.INPUT_MUTATED, r.failure


@requires_cuda
def test_a_candidate_that_cannot_be_captured_is_timed_with_stream_launches() -> None:
    (r,) = verify_candidate(CandidateJob(task="rms_norm", source=source("synchronizing")),
                            _campaign(samples=6, invocations_per_sample=4)).cases
    assert r.verdict is Verdict.PASS, r.failure
    t = r.timing
    assert t is not None and t.sample_launch == "stream"
    assert t.note is not None and "could not be captured" in t.note


@requires_cuda
def test_a_capture_keeping_every_output_gives_each_call_its_own_buffer() -> None:
    """Ring audits capture with every output kept: each call's output in memory of its own, each verifiable after
    a replay, and the ring set each call reads recorded (-1: the audit set)."""
    sets = [[torch.randn(1 << 20, device="cuda")] for _ in range(3)]
    audit = [torch.randn(1 << 20, device="cuda")]
    graph = capture(lambda a: a * 2, sets, 7, audit, keep_outputs=True)
    assert graph.sets == (0, 1, 2, 0, 1, 2, -1) and len(graph.outs) == 7 and graph.outs[-1] is graph.out
    assert len({out.untyped_storage().data_ptr() for out in graph.outs}) == 7
    sets[1][0].copy_(torch.randn(1 << 20, device="cuda"))  # new contents, same memory
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(graph.outs[4], sets[1][0] * 2) and torch.equal(graph.outs[6], audit[0] * 2)


@requires_cuda
def test_a_pair_captured_for_ring_audits_keeps_the_baselines_outputs_too() -> None:
    """Ring audits keep every candidate output; the baseline's are kept alike, so neither writes into a block the
    previous call just left in L2 (measurement/kept_outputs.py)."""
    sets = [[torch.randn(1 << 20, device="cuda")] for _ in range(3)]
    cand, base, why = capture_pair(lambda a: a * 2, lambda a: a * 3, sets, (5, 4), keep_outputs=True)
    assert why is None and cand is not None and base is not None
    assert len(base.outs) == 4 and len({out.untyped_storage().data_ptr() for out in base.outs}) == 4
    _, reused, _ = capture_pair(lambda a: a * 2, lambda a: a * 3, sets, (5, 4))
    assert reused is not None and reused.outs == ()


@requires_cuda
@pytest.mark.parametrize("graphs", [True, False], ids=["cuda_graph", "stream"])
def test_ring_audits_time_the_pair_alike(graphs: bool) -> None:
    """The same kernel as candidate and as baseline, at 8 MB outputs (where a reused output block is written into L2:
    on an H100 the candidate read 23% slower than that baseline when only its outputs were kept): with ring audits
    both keep their outputs, so the pair's event medians and kernel-only times agree, and events meet CUPTI."""
    sets = [[torch.randn(1 << 22, device="cuda", dtype=torch.float16)] for _ in range(4)]

    def candidate(a: torch.Tensor) -> torch.Tensor:
        return a * 2

    def baseline(a: torch.Tensor) -> torch.Tensor:
        return a * 2

    pair = measure_cuda(candidate, baseline, sets, warmups=3, samples=20, invocations=20, l2_flush_bytes=128 << 20,
                        profiler_invocations=20, max_sample_ms=20.0, cuda_graphs=graphs, ring_audits=True)
    assert pair.sample_launch == ("cuda_graph" if graphs else "stream")
    assert 0.95 < pair.candidate.median / pair.baseline.median < 1.05, (pair.candidate.median, pair.baseline.median)
    assert pair.candidate_device_us is not None and pair.baseline_device_us is not None
    assert 0.95 < pair.candidate_device_us / pair.baseline_device_us < 1.05
    if graphs:  # launch gaps hidden: the event time per call meets the kernel time
        assert 0.9 < pair.candidate.median / pair.candidate_device_us < 1.1, (pair.candidate, pair.candidate_device_us)


@requires_cuda
@pytest.mark.parametrize("graphs", [True, False], ids=["cuda_graph", "stream"])
def test_ring_audits_catch_a_skip_keyed_on_input_addresses(graphs: bool,
                                                            kp_settings: Callable[..., None]) -> None:
    """The candidate skips every third call on a ring address it has seen, in every mode alike, so the kernel-only
    pass agrees with the events and the audit set's calls are all computed (docs/SECURITY.md): without ring audits
    it passes (the hole; if this fails, the exploit is caught elsewhere and no longer shows it). With ring audits on
    and every sample audited, a skipped call is verified (or shares its kept buffer with another): `cached_output`.
    The honest kernel passes under the same settings, timed as asked."""
    skip = CandidateJob(task="rms_norm", source=source("skip_by_address"))
    if graphs:  # the hole: every gate and audit passes. Stream sampling reuses the audit set in every audited
        # sample, so this naive skip also hits it there and is caught without ring audits (H200, 2026-12-05).
        kp_settings(timing_ring_audits=False, timing_cuda_graphs=graphs, integrity_audit_samples=20)
        (r,) = verify_candidate(skip, _campaign()).cases
        assert r.verdict is Verdict.PASS, (r.verdict, r.failure)
    kp_settings(timing_ring_audits=True, timing_cuda_graphs=graphs, integrity_audit_samples=20)
    (r,) = verify_candidate(skip, _campaign()).cases
    assert r.verdict is Verdict.CACHED_OUTPUT and r.failure is not None, (r.verdict, r.failure)
    assert "same buffer" in r.failure.message or "timed call" in r.failure.message, r.failure
    (h,) = verify_candidate(CandidateJob(task="rms_norm", source=source("honest")), _campaign()).cases
    assert h.verdict is Verdict.PASS, h.failure
    assert h.timing is not None and h.timing.sample_launch == ("cuda_graph" if graphs else "stream"), h.timing.note
    assert h.timing.audited_samples == 20
