"""GPU-only behaviour of the cheat checks: audited CUDA-event timing with the calibrated synchronize gap, the physical
floor, the CUPTI share of foreign kernels, persisting-L2 control. Skipped without CUDA; run by scripts/gpu-check."""

from __future__ import annotations

import ctypes

import pytest
import torch
import triton
import triton.language as tl

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.errors import CandidateFailure
from kernelproof_core.integrity import run as integrity_run
from kernelproof_core.integrity.plausibility import CU_LIMIT_PERSISTING_L2_CACHE_SIZE, PersistingL2
from kernelproof_core.integrity.profiled import CANARIES, ProfiledCall, ProfilerGap, is_canary, require_canary
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.tasks import TASKS, CaseSet
from kernelproof_core.verdicts import Verdict

pytestmark = pytest.mark.gpu


def _run(task: str = "rms_norm", case: str = "llama_4096", **kw: object) -> list:
    values: dict[str, object] = dict(device="cuda", dtypes=["bfloat16"], case_set=CaseSet.FULL, case_ids=[case],
                                     warmups=3, samples=20, invocations_per_sample=10)
    values.update(kw)
    path = TASKS[task].builtin_candidate
    job = CandidateJob(task=task, source=path.read_bytes(), filename=str(path), origin="builtin")
    return verify_candidate(job, Campaign(**values)).cases  # type: ignore[arg-type]


def test_honest_kernel_is_audited_and_within_the_floor() -> None:
    (r,) = _run()
    assert r.verdict is Verdict.PASS, r.failure
    t = r.timing
    assert t is not None and t.kind == "cuda_events" and t.audited_samples >= 1
    assert t.sync_gap_us is not None and 0 <= t.sync_gap_us < 100
    assert t.time_floor_us is not None and 0 < t.time_floor_us < t.candidate.median
    assert r.integrity is not None and r.integrity.own_launches >= 1
    assert r.integrity.foreign_gpu_share == 0.0  # CUPTI saw only the candidate's kernels


def test_the_profiled_record_holds_both_canaries_and_leaves_them_out() -> None:
    """The canaries launched at the start and end of a profiled window are in CUPTI's record under their own name,
    and are taken out of the kernel times the foreign-share check reads; a session stopped without the closing one
    holds one."""
    x = torch.ones(1 << 20, device="cuda")
    profiled = ProfiledCall(torch.device("cuda"))
    profiled.start()
    torch.mul(x, 2)
    record = profiled.stop(canary=True)
    assert record.canaries == CANARIES and record.kernel_us, record
    assert not any(is_canary(name) for name in record.kernel_us), record.kernel_us
    require_canary(record)
    profiled.start()
    torch.mul(x, 2)
    bare = profiled.stop(canary=False)
    assert bare.canaries == 1 and bare.kernel_us, bare
    with pytest.raises(ProfilerGap):
        require_canary(bare)


def test_a_session_ended_inside_the_call_is_a_gap_not_an_error() -> None:
    """Code inside the profiled window that ends the session (torch.autograd._disable_profiler, as the
    profiler_stopped exploit does) leaves a record the harness cannot close or read: stop() returns it without
    canaries instead of raising (the caller's own checks still run), require_canary makes it a ProfilerGap, and the
    next session records normally. The measurement's kernel-only pass reads its record through the same bracket."""
    from kernelproof_core.measurement.device_time import kernel_times

    x = torch.ones(1 << 20, device="cuda")
    profiled = ProfiledCall(torch.device("cuda"))
    profiled.start()
    torch.autograd._disable_profiler()
    torch.mul(x, 2)
    record = profiled.stop(canary=True)
    assert record.canaries < CANARIES, record
    with pytest.raises(ProfilerGap):
        require_canary(record)
    times = kernel_times(lambda: torch.mul(x, 2), [()], 3).per_kernel
    assert times and not any(is_canary(name) for name in times), times
    def end_it() -> None:  # ends the session on the first call; later calls find it ended, as the exploit checks
        torch.mul(x, 2)
        if torch.autograd._profiler_enabled():
            torch.autograd._disable_profiler()

    with pytest.raises(ProfilerGap):
        kernel_times(end_it, [()], 3)


@triton.jit
def _kernelproof_profile_canary(flag_ptr):  # type: ignore[no-untyped-def]
    # the harness canary's public name, launched by "candidate" code into a session of its own
    tl.store(flag_ptr, tl.load(flag_ptr) + 1)


def test_a_session_begun_again_with_a_forged_canary_is_a_gap() -> None:
    """The restart forgery on CUPTI: the harness's session ended inside the call, work done unrecorded, a new session
    begun and a kernel named like the canary launched into it, so the record read at stop() holds two canaries of
    the right name. It is another session's (begun after the harness's opened): a ProfilerGap all the same."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.ones(1 << 20, device="cuda")
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    profiled = ProfiledCall(torch.device("cuda"))
    profiled.start()
    torch.autograd._disable_profiler()
    torch.mul(x, 2)  # foreign work, unrecorded
    profile(activities=[ProfilerActivity.CUDA]).__enter__()
    _kernelproof_profile_canary[(1,)](flag)
    record = profiled.stop(canary=True)
    assert record.canaries == 0 and "begun again" in record.gap, record
    with pytest.raises(ProfilerGap, match="begun again"):
        require_canary(record)
    honest = ProfiledCall(torch.device("cuda"))  # the next session records normally
    honest.start()
    torch.mul(x, 2)
    require_canary(honest.stop(canary=True))


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_builtin_passes_with_hidden_cases_on_the_gpu(task: str) -> None:
    cases = _run(task, case=TASKS[task].cases(CaseSet.FULL, 0)[1].case_id, hidden_cases=True, samples=5)
    assert [c.verdict for c in cases] == [Verdict.PASS] * len(cases), [(c.case_id, c.failure) for c in cases]


def test_time_below_the_physical_floor_is_implausible(monkeypatch: pytest.MonkeyPatch) -> None:
    """The floor's wiring: a device that pretends to move 1 MB/s makes any real kernel impossibly fast."""
    monkeypatch.setattr(integrity_run, "copy_bandwidth_ceiling_gbps", lambda probe_bytes: 1e-3)
    (r,) = _run(samples=5)
    assert r.verdict is Verdict.IMPLAUSIBLE_TIMING, r.failure
    assert r.timing is None and r.reward is not None and r.reward.value == -1.0


def test_persisting_l2_limit_is_held_at_zero() -> None:
    l2 = PersistingL2()
    assert l2.available and l2.arm() and l2.limit() == 0
    most = l2.max_bytes()
    assert most is not None and most > 0, "this device offers no persisting L2 (MIG?): the exploit cannot apply"
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuCtxSetLimit(ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(4 << 20)) == 0
    try:
        with pytest.raises(CandidateFailure) as failure:
            l2.verify_disabled()
        assert failure.value.verdict is Verdict.TAMPERING
    finally:
        assert l2.disable()
    l2.reset()


@pytest.mark.parametrize("request_mib", [32, 1 << 20])
def test_a_large_persisting_l2_request_is_caught(request_mib: int) -> None:
    """What a candidate gets for asking more than the device allows (the driver clamps or refuses it): whatever
    limit it ends with, a nonzero one is `tampering`, and a refused one left zero is harmless."""
    l2 = PersistingL2()
    assert l2.arm()
    cuda = ctypes.CDLL("libcuda.so.1")
    status = cuda.cuCtxSetLimit(ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(request_mib << 20))
    try:
        limit = l2.limit()
        assert (status == 0) == bool(limit), (status, limit)
        if limit:
            with pytest.raises(CandidateFailure) as failure:
                l2.verify_disabled()
            assert failure.value.verdict is Verdict.TAMPERING
        else:
            l2.verify_disabled()
    finally:
        assert l2.disable()


def test_another_current_context_is_tampering() -> None:
    """A candidate that makes a context of its own current would have the limit checks read that one's limit."""
    torch.cuda.synchronize()
    l2 = PersistingL2()
    l2.bind()
    assert l2.arm()
    cuda = ctypes.CDLL("libcuda.so.1")
    device, other = ctypes.c_int(0), ctypes.c_void_p(0)
    assert cuda.cuCtxGetDevice(ctypes.byref(device)) == 0
    assert cuda.cuCtxCreate_v2(ctypes.byref(other), ctypes.c_uint(0), device) == 0  # made current on this thread
    try:
        with pytest.raises(CandidateFailure) as failure:
            l2.verify_disabled()
        assert failure.value.verdict is Verdict.TAMPERING and "context" in str(failure.value)
    finally:
        popped = ctypes.c_void_p(0)
        assert cuda.cuCtxPopCurrent_v2(ctypes.byref(popped)) == 0 and popped.value == other.value
        assert cuda.cuCtxDestroy_v2(other) == 0
    l2.verify_disabled()  # the harness's context is current again
