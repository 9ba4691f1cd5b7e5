"""Unit tests of each runtime defence: tamper snapshot, launch observation, torch-op tracing, proof of work,
precision, plausibility, the timing auditor, input refresh."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kernelproof_core import tolerances
from kernelproof_core.errors import CandidateFailure, InfraError
from kernelproof_core.integrity import tamper
from kernelproof_core.integrity.audit import SampleAuditor
from kernelproof_core.integrity.dispatch import ComputeTracer, DispatchTrace, TensorMeta
from kernelproof_core.integrity.launches import Launch, LaunchLog
from kernelproof_core.integrity.plausibility import PersistingL2, check_plausible, time_floor_us
from kernelproof_core.integrity.precision import check_precision, fraction_beyond_1ulp
from kernelproof_core.integrity.profiled import (
    CANARIES,
    CANARY_KERNEL,
    ProfilerGap,
    Record,
    is_canary,
    require_canary,
)
from kernelproof_core.integrity.proof import check_gpu_share, check_proof_of_work, element_bytes, foreign_share
from kernelproof_core.integrity.run import launch_observer
from kernelproof_core.interpreter import compiled_mode_fixed
from kernelproof_core.tasks import TASKS, Case, CaseSet, Task
from kernelproof_core.tolerances import policy_for
from kernelproof_core.verdicts import Verdict
from tests.conftest import HAS_CUDA


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


# --- tamper -------------------------------------------------------------------------------------------------------


def _changed(action: Any, undo: Any) -> list[str]:
    snap = tamper.HarnessSnapshot.take()
    action()
    try:
        return snap.changes()
    finally:
        undo()


def test_snapshot_is_quiet_when_nothing_changed() -> None:
    snap = tamper.HarnessSnapshot.take()
    torch.empty(3).add_(1)
    assert snap.changes() == [] and snap.new_threads() == []


def test_replaced_timer_and_code_swap_are_seen() -> None:
    import time

    original = time.perf_counter
    found = _changed(lambda: setattr(time, "perf_counter", lambda: 0.0),
                     lambda: setattr(time, "perf_counter", original))
    assert found == ["time.perf_counter was replaced"]
    code = policy_for.__code__
    found = _changed(lambda: setattr(policy_for, "__code__", (lambda task, dtype: None).__code__),
                     lambda: setattr(policy_for, "__code__", code))
    assert any("policy_for had its code" in f for f in found)


def test_method_added_to_tensor_class_is_seen() -> None:
    found = _changed(lambda: setattr(torch.Tensor, "double", lambda self: self),
                     lambda: delattr(torch.Tensor, "double"))
    assert found == ["torch.Tensor.double was changed"]


def test_profiler_swapped_or_patched_is_seen() -> None:
    """The CUPTI record the GPU checks read comes through torch.profiler: a profile class replaced, or its events
    (or the event list's, or an interval's elapsed time) patched to drop kernels, is tampering like a patched timer."""
    import torch.autograd.profiler_util as util
    import torch.profiler
    import torch.profiler.profiler as prof_module

    real = torch.profiler.profile
    found = _changed(lambda: setattr(torch.profiler, "profile", type("profile", (real,), {})),
                     lambda: setattr(torch.profiler, "profile", real))
    assert found == ["torch.profiler.profile was replaced"]
    events = prof_module.profile.events if "events" in vars(prof_module.profile) else None
    found = _changed(lambda: setattr(prof_module.profile, "events", lambda self: []),
                     lambda: setattr(prof_module.profile, "events", events) if events is not None
                     else delattr(prof_module.profile, "events"))
    assert found == ["torch.profiler.profiler.profile.events was changed"]
    elapsed = util.Interval.elapsed_us
    found = _changed(lambda: setattr(util.Interval, "elapsed_us", lambda self: 0),
                     lambda: setattr(util.Interval, "elapsed_us", elapsed))
    assert found == ["torch.autograd.profiler_util.Interval.elapsed_us was changed"]


def test_restore_undoes_tables_functions_and_hooks() -> None:
    snap = tamper.HarnessSnapshot.take()
    tolerances.TOLERANCES["rms_norm"][torch.bfloat16] = tolerances.TolerancePolicy(1.0, 1.0, 1.0)
    saved_sync = torch.cuda.synchronize
    torch.cuda.synchronize = lambda *a: None  # type: ignore[assignment]
    assert len(snap.changes()) == 2
    snap.restore()
    assert snap.changes() == []
    assert torch.cuda.synchronize is saved_sync and policy_for("rms_norm", torch.bfloat16).atol == 1e-2


def test_thread_outliving_the_call_is_tampering() -> None:
    snap = tamper.HarnessSnapshot.take()
    done = threading.Event()
    worker = threading.Thread(target=done.wait, name="deferred")
    worker.start()
    try:
        with pytest.raises(CandidateFailure) as failure:
            snap.verify()
        assert failure.value.verdict is Verdict.TAMPERING and "deferred" in failure.value.message
    finally:
        done.set()
        worker.join()
    snap.verify()


def test_function_mode_left_active_is_tampering() -> None:
    from torch.overrides import TorchFunctionMode

    snap = tamper.HarnessSnapshot.take()
    mode = TorchFunctionMode()
    mode.__enter__()
    try:
        assert "torch function mode stack changed" in snap.changes()
    finally:
        mode.__exit__(None, None, None)


# --- launches and torch ops ---------------------------------------------------------------------------------------


def test_observer_records_owned_launches_stores_and_loads(device: str) -> None:
    dev = "cuda" if device == "cuda" else "cpu"
    x, y = torch.arange(8.0, device=dev), torch.zeros(8, device=dev)
    observer = launch_observer()
    with observer.observe(globals(), interpreter=device != "cuda") as log:
        _double[(1,)](x, y, 8, BLOCK=8)
    with observer.observe({}, interpreter=device != "cuda") as foreign:
        _double[(1,)](x, y, 8, BLOCK=8)
    assert log.own_launches == 1 and "_double" in log.owned_names
    assert foreign.own_launches == 0
    assert observer.intact() == []
    if device != "cuda":
        written = np.unique(np.concatenate(log.written))
        assert np.isin(element_bytes(TensorMeta.of(y)), written).all()
        assert np.isin(element_bytes(TensorMeta.of(x)), np.concatenate(log.read)).all()


def test_tracer_separates_compute_from_allocation_and_copies() -> None:
    x = torch.randn(4, 4)
    with ComputeTracer() as tracer:
        y = torch.empty_like(x)
        z = x.t().contiguous().to(torch.float64)
        torch.softmax(x, -1)
        z.to("meta")
    trace = tracer.trace
    assert trace.compute_ops == ["aten._softmax.default"]
    assert trace.transfer_bytes == z.numel() * 8  # leaving the device (here: to meta) is a transfer
    assert len(trace.copies) == 2 and y.untyped_storage().data_ptr() in {lo for lo, _ in trace.allocated}


# --- proof of work ------------------------------------------------------------------------------------------------


def _log(out: torch.Tensor, written: torch.Tensor | None, read: torch.Tensor | None = None) -> LaunchLog:
    log = LaunchLog(owner_names=frozenset({"k"}), tracks_stores=True)
    log.launches.append(Launch("k", True, (TensorMeta.of(out),)))
    if written is not None:
        log.written.append(element_bytes(TensorMeta.of(written)))
    if read is not None:
        log.read.append(element_bytes(TensorMeta.of(read)))
    return log


def test_output_must_be_stored_by_own_kernels() -> None:
    out, x = torch.zeros(4, 4), torch.ones(4, 4)
    check_proof_of_work(_log(out, out, read=x), DispatchTrace(), out, [x])
    with pytest.raises(CandidateFailure, match="no Triton kernel of the candidate stored"):
        check_proof_of_work(_log(out, out[:2]), DispatchTrace(), out, [x])


def test_plain_copy_of_own_output_counts_and_unknown_reads_do_not() -> None:
    x, buf = torch.ones(4, 4), torch.zeros(4, 4, dtype=torch.float32)
    out = buf.to(torch.bfloat16)
    trace = DispatchTrace(copies=[(TensorMeta.of(out), TensorMeta.of(buf))])
    check_proof_of_work(_log(buf, buf, read=x), trace, out, [x])
    foreign = torch.randn(4, 4)  # memory from outside the call (a cache, NumPy)
    with pytest.raises(CandidateFailure, match="neither an input nor produced"):
        check_proof_of_work(_log(out, out, read=foreign), DispatchTrace(), out, [x])


def test_compute_ops_and_transfers_fail_the_proof() -> None:
    out = torch.zeros(4)
    with pytest.raises(CandidateFailure, match="torch computed"):
        check_proof_of_work(_log(out, out), DispatchTrace(compute_ops=["aten.mul.Tensor"]), out, [])
    with pytest.raises(CandidateFailure, match="between host and device"):
        check_proof_of_work(_log(out, out), DispatchTrace(transfer_bytes=1 << 20), out, [])


def _canary_device() -> tuple[torch.device, list[Any]]:
    """Where the harness's canary kernel can run in this process, and the activities that record it: the CPU and its
    activity under the interpreter; the GPU with CUPTI where Triton is compiled here (a GPU test process: a compiled
    kernel cannot take CPU tensors, and the process cannot switch to the interpreter)."""
    from torch.profiler import ProfilerActivity

    if HAS_CUDA and compiled_mode_fixed():
        return torch.device("cuda"), [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    return torch.device("cpu"), [ProfilerActivity.CPU]


def test_a_profiler_session_begun_again_inside_the_call_is_a_gap() -> None:
    """The restart forgery: code inside the profiled window ends the harness's session and begins one of its own (the
    work in between leaves no record, and a kernel named like the canary could be launched into the new one). The
    record the harness then reads is the other session's, begun after the harness's opened: a gap whatever it holds.
    An undisturbed session is not. Real torch profiler, CPU activity (CUPTI in a GPU test process)."""
    from torch.profiler import ProfilerActivity, profile

    from kernelproof_core.integrity.profiled import ProfiledCall

    device, activities = _canary_device()
    honest = ProfiledCall(device, activities)
    honest.start()
    torch.ones(3, device=device).add_(1)
    record = honest.stop(canary=True)
    assert record.gap == "", record
    forged = ProfiledCall(device, activities)
    forged.start()
    torch.autograd._disable_profiler()
    torch.ones(3, device=device).add_(1)  # unrecorded work
    profile(activities=[ProfilerActivity.CPU]).__enter__()
    record = forged.stop(canary=True)
    assert record.canaries == 0 and "begun again" in record.gap, record
    with pytest.raises(ProfilerGap, match="begun again"):
        require_canary(record)


def test_a_profiler_that_records_no_gpu_kernels_fails_the_start_up_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """profiled.profiler_self_test, run once per process before any candidate (guard.warm_up on CUDA): a session
    whose record holds no GPU kernels (here the real profiler tracing CPU activity only, as a host whose CUPTI records
    nothing would; the canaries on the GPU in a GPU test process) is a ProfilerGap, an infrastructure fault, after
    the retries: not left for every case to find."""
    from torch.profiler import ProfilerActivity

    from kernelproof_core.integrity import profiled

    monkeypatch.setattr(profiled, "PROFILE_RETRY_PAUSES_S", (0.0, 0.0))
    with pytest.raises(ProfilerGap, match="0 of the harness's 2 canary launches") as gap:
        profiled.profiler_self_test(_canary_device()[0], [ProfilerActivity.CPU])
    assert isinstance(gap.value, InfraError)


def test_a_profiler_gap_is_retried_then_left_to_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    """with_profile_retries (the gate's replay and the measurement's kernel-only pass): a ProfilerGap is tried again
    once per pause, a later whole record is used, and a gap on every try propagates (infra_error upstream); other
    errors are not retried."""
    from kernelproof_core.integrity import profiled

    monkeypatch.setattr(profiled, "PROFILE_RETRY_PAUSES_S", (0.0, 0.0))
    tries: list[int] = []

    def gap_then(ok_after: int) -> int:
        tries.append(1)
        if len(tries) <= ok_after:
            raise ProfilerGap("lost a canary")
        return len(tries)

    assert profiled.with_profile_retries(lambda: gap_then(2), "test") == 3
    tries.clear()
    with pytest.raises(ProfilerGap):
        profiled.with_profile_retries(lambda: gap_then(5), "test")
    assert len(tries) == 3
    tries.clear()

    def broken() -> int:
        tries.append(1)
        raise ValueError("not the profiler's")

    with pytest.raises(ValueError):
        profiled.with_profile_retries(broken, "test")
    assert len(tries) == 1


def test_gpu_share_counts_foreign_kernels_but_not_data_movement() -> None:
    times = {"_k": 10.0, "_k_0d1d": 1.0, "void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>": 50.0,
             "Memcpy DtoD (Device -> Device)": 40.0}
    assert foreign_share(times, {"_k"}) == 0.0
    times["void at::native::(anonymous namespace)::softmax_warp_forward<float>"] = 30.0
    assert foreign_share(times, {"_k"}) == pytest.approx(30 / 131)
    with pytest.raises(CandidateFailure) as failure:
        check_gpu_share(times, {"_k"})
    assert failure.value.verdict is Verdict.NO_KERNEL_LAUNCH
    assert foreign_share(times, {"void"}) > 0.1  # a kernel named like a prefix of torch's claims nothing


def test_a_profile_without_both_harness_canaries_is_an_infrastructure_fault() -> None:
    """CUPTI's record of the profiled gate call vouches for its kernels only if it holds both canaries the harness
    launched, first and last: an empty record, one cut short, or one of a session stopped and started again during
    the call would pass any share of foreign kernels. Without them the call is the infrastructure's fault
    (ProfilerGap, an InfraError: retried, then infra_error), never the candidate's verdict and never a pass."""
    for record in (Record({}, canaries=0), Record({"_k": 10.0}, canaries=0), Record({"_k": 10.0}, canaries=1),
                   Record({"_k": 10.0}, canaries=3)):
        with pytest.raises(ProfilerGap) as gap:
            require_canary(record)
        assert isinstance(gap.value, InfraError) and not isinstance(gap.value, CandidateFailure)
        assert f"holds {record.canaries} of the harness's {CANARIES}" in str(gap.value), str(gap.value)
    require_canary(Record({"_k": 10.0}, canaries=CANARIES))
    require_canary(Record({}, canaries=CANARIES))  # a call with no kernel of its own is the proof check's to fail
    assert is_canary(CANARY_KERNEL) and is_canary(CANARY_KERNEL + "_0d1d")
    assert not is_canary(CANARY_KERNEL + "x") and not is_canary("_k") and not is_canary("_kernelproof_profile")


# --- precision ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_precision_accepts_one_rounding_and_the_eager_double_rounding(dtype: torch.dtype) -> None:
    policy = policy_for("rms_norm", dtype)
    x = torch.randn(64, 1024).to(dtype).double()
    w = (1 + 0.1 * torch.randn(1024)).to(dtype).double()
    inv = torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6)
    ref = x * inv * w
    assert fraction_beyond_1ulp(ref.float().to(dtype), ref, policy) == 0.0
    eager = (x.float() * inv.float()).to(dtype) * w.to(dtype)
    share = check_precision(eager, ref, policy)
    assert share is not None and 0 < share < 0.02


def test_precision_rejects_a_row_scale_error_inside_the_tolerance() -> None:
    policy = policy_for("softmax", torch.bfloat16)
    ref = torch.softmax(torch.randn(64, 1000).double(), -1)
    with pytest.raises(CandidateFailure, match="precision"):
        check_precision((ref * 1.003).to(torch.bfloat16), ref, policy)
    assert fraction_beyond_1ulp(ref.float(), ref, policy) is None  # FP32 outputs: not applicable


# --- plausibility, L2 ---------------------------------------------------------------------------------------------


def test_time_floor_and_verdict() -> None:
    floor = time_floor_us(min_bytes=6_000_000_000, flops=0, copy_gbps=4000.0)
    assert floor == pytest.approx(1000.0)  # 6 GB at 1.5 x 4 TB/s
    check_plausible(1001.0, floor, 6_000_000_000)
    with pytest.raises(CandidateFailure) as failure:
        check_plausible(10.0, floor, 6_000_000_000)
    assert failure.value.verdict is Verdict.IMPLAUSIBLE_TIMING


def test_persisting_l2_control_is_a_no_op_without_a_driver() -> None:
    l2 = PersistingL2()
    if l2.available:
        pytest.skip("a CUDA driver is present (covered by the GPU tests)")
    assert l2.disable() is False and l2.limit() is None and l2.max_bytes() is None and l2.context() is None
    assert l2.arm() is False  # nothing to check: the auditor runs without the persisting-L2 check
    l2.reset()
    l2.verify_disabled()


# --- timing auditor and input refresh -----------------------------------------------------------------------------


@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_refresh_keeps_storage_and_changes_contents(task_name: str) -> None:
    """New contents at the same addresses; with several rows only two trade places, so a cache keyed on a few
    elements usually still hits and returns a result that is now wrong for those rows."""
    task = TASKS[task_name]
    for case in task.hidden_cases(7, CaseSet.INTERPRETER) + task.cases(CaseSet.INTERPRETER, 0)[:4]:
        inputs = task.make_inputs(case, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(1))
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        before = [(t.data_ptr(), t.stride(), t.clone()) for t in tensors]
        task.perturb_inputs(case, torch.float32, inputs, torch.Generator().manual_seed(2))
        assert [(t.data_ptr(), t.stride()) for t in tensors] == [(p, s) for p, s, _ in before]
        assert any(not torch.equal(t, old) for t, (_, _, old) in zip(tensors, before, strict=True)), case
        for t, (_, _, old) in zip(tensors, before, strict=True):
            if t.dim() == 2 and t.shape[0] >= 2:
                assert int((t != old).any(dim=1).sum()) <= 2, case
        assert torch.isfinite(task.oracle(inputs)).all(), case


def _tail127_auditor() -> tuple[Task, Case, SampleAuditor]:
    """An auditor of rms_norm's tail127 case (fp32), with a guard that finds the harness intact."""
    task = TASKS["rms_norm"]
    case = next(c for c in task.cases(CaseSet.INTERPRETER, 0) if c.case_id == "tail127")
    spec = task.output_spec(case, torch.float32)

    class Guard:
        def check(self) -> None:
            return None

    auditor = SampleAuditor(task, case, torch.float32, spec, Guard(), samples=10, audits=4,  # type: ignore[arg-type]
                            min_call_fraction=0.75)
    return task, case, auditor


def test_auditor_rejects_stale_output() -> None:
    task, case, auditor = _tail127_auditor()
    assert len(auditor.audited) == 4 and all(8 <= auditor.calls(0, 10) <= 10 for _ in range(50))
    inputs = task.make_inputs(case, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(1))
    stale = task.oracle(inputs).float()
    auditor.verify(stale, inputs)
    auditor.refresh(inputs)
    with pytest.raises(CandidateFailure) as failure:
        auditor.verify(stale, inputs)
    assert failure.value.verdict is Verdict.CACHED_OUTPUT


def test_auditor_rejects_inputs_rewritten_to_agree_with_the_output() -> None:
    """Zeroing the input and the output alike makes the oracle of the rewritten input agree with a memset: the
    audit compares the inputs with what it refreshed them to first."""
    task, case, auditor = _tail127_auditor()
    inputs = task.make_inputs(case, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(1))
    auditor.refresh(inputs)
    auditor.verify(task.oracle(inputs).float(), inputs)  # honest: unchanged inputs, right output
    auditor.refresh(inputs)
    inputs[0].zero_()
    zeros = torch.zeros(auditor.spec.shape, dtype=auditor.spec.dtype)
    assert torch.equal(task.oracle(inputs).float(), zeros)  # the shortcut the oracle alone would accept
    with pytest.raises(CandidateFailure) as failure:
        auditor.verify(zeros, inputs)
    assert failure.value.verdict is Verdict.INPUT_MUTATED


def test_ring_audit_checks_the_chosen_call_on_its_refreshed_set_and_every_output_for_reuse() -> None:
    """Ring audits (KERNELPROOF_TIMING_RING_AUDITS): a sample's every output kept, one ring call's verified on its
    refreshed set beside the audit set's. A call that skipped its work (an output kept from before the refresh) or
    handed back an earlier call's buffer is `cached_output`; both refreshed sets stay checked until the sample ends."""
    task, case, auditor = _tail127_auditor()
    ring = task.make_inputs(case, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(1))
    audit = task.make_inputs(case, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(2))
    assert all(0 <= auditor.pick_call(3) < 3 for _ in range(50)) and {auditor.pick_call(3) for _ in range(200)} == {
        0, 1, 2}
    kept = task.oracle(ring).float()  # what a skip keyed on the ring set's address returns: right before the refresh
    auditor.refresh(ring)
    auditor.refresh(audit)
    fresh = task.oracle(ring).float()
    other = task.oracle(ring).float()
    auditor.verify_ring([other, fresh, task.oracle(audit).float()], 1, ring)  # honest: own buffers, right values
    with pytest.raises(CandidateFailure) as stale:
        auditor.verify_ring([other, kept, task.oracle(audit).float()], 1, ring)
    assert stale.value.verdict is Verdict.CACHED_OUTPUT and "fresh" in stale.value.message
    with pytest.raises(CandidateFailure) as reused:
        auditor.verify_ring([fresh, fresh, task.oracle(audit).float()], 0, ring)
    assert reused.value.verdict is Verdict.CACHED_OUTPUT and "same buffer" in reused.value.message
    ring[0].zero_()  # inputs rewritten during the sample: still told apart from the refresh
    with pytest.raises(CandidateFailure) as mutated:
        auditor.verify_ring([task.oracle(ring).float()], 0, ring)
    assert mutated.value.verdict is Verdict.INPUT_MUTATED
    auditor.after_sample(task.oracle(audit).float(), audit, audited=True)  # the audit set's check ends the sample
    auditor.verify_ring([task.oracle(ring).float()], 0, ring)  # nothing refreshed any more: values only
