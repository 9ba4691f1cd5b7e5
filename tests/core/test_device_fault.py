"""A device fault the candidate's kernels cause (an illegal address: a sticky CUDA error that loses the context) is the
candidate's verdict, wherever it surfaces, and ends its run; hardware faults stay infrastructure faults.

The sandboxed version with a real illegal address runs on the GPU (tests/sandbox/test_gpu.py). Here, a candidate
raises the CUDA runtime's own error text from its call, as a synchronize inside it would, so the run-ending logic is
exercised on any host."""

from __future__ import annotations

import pytest
import torch

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.integrity.device_fault import is_device_fault
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.tasks import CaseSet
from kernelproof_core.verdicts import Verdict


@pytest.mark.parametrize(("exc", "fault"), [
    (torch.AcceleratorError("CUDA error: an illegal memory access was encountered"), True),
    (torch.AcceleratorError("CUDA error: misaligned address"), True),
    (RuntimeError("CUDA error: device-side assert triggered"), True),
    (torch.AcceleratorError("CUDA error: uncorrectable ECC error encountered"), False),  # the hardware's fault
    (RuntimeError("CUDA error: out of memory"), False),
    (RuntimeError("illegal memory access"), False),  # not a CUDA error
    (ValueError("CUDA error: an illegal memory access was encountered"), False),
])
def test_only_faults_a_kernel_causes_count_as_device_faults(exc: BaseException, fault: bool) -> None:
    assert is_device_fault(exc) is fault


FAULTING = b'''
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def candidate(x, weight, eps):
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _copy[(triton.cdiv(x.numel(), 1024),)](x.contiguous(), y, x.numel(), BLOCK=1024)
    raise RuntimeError("CUDA error: an illegal memory access was encountered")
'''


def test_a_device_fault_ends_the_run_as_the_candidates_runtime_error(device: str) -> None:
    campaign = Campaign(device=device, dtypes=["bfloat16"], case_set=CaseSet.INTERPRETER,  # type: ignore[arg-type]
                        case_ids=["tail127", "n1024", "strided"], measure=False)
    cases = verify_candidate(CandidateJob(task="rms_norm", source=FAULTING), campaign).cases
    assert [c.verdict for c in cases] == [Verdict.RUNTIME_ERROR] * 3, [(c.case_id, c.failure) for c in cases]
    first, *rest = cases
    assert first.failure is not None and "illegal memory access" in first.failure.message
    for case in rest:
        assert case.failure is not None and case.failure.message.startswith("not run: the candidate's kernels "
                                                                            "faulted the device"), case.failure
        assert "case tail127" in case.failure.message
        assert case.reward is not None and case.reward.value == -1.0
