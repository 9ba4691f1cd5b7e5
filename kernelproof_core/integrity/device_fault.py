"""Device faults a candidate's kernels cause: an illegal or misaligned address, an illegal instruction, a device-side
assert. CUDA reports them as sticky errors: the context is lost and every later CUDA call in the process fails.

They surface wherever the process next waits on the device, often in the harness's own code (a synchronize in the
timing loop, the next case's input generation), which would otherwise read as an infrastructure fault. The harness's
own device work (PyTorch ops, the trusted flush and copy kernels) does not fault, so a sticky fault in a process that
runs a candidate is the candidate's: its case gets runtime_error and the run's remaining cases are not run (the
context cannot run them). Hardware faults (an uncorrectable ECC error) are not in the list: they stay
infra_error.
"""

from __future__ import annotations

# Lower-cased fragments of the CUDA error strings of faults a kernel's own code causes.
CANDIDATE_DEVICE_FAULTS = (
    "illegal memory access",
    "misaligned address",
    "illegal instruction",
    "device-side assert",
    "unspecified launch failure",
    "invalid program counter",
    "hardware stack error",
)


def is_device_fault(exc: BaseException) -> bool:
    """True for a sticky CUDA error that a kernel's own code causes (see CANDIDATE_DEVICE_FAULTS). torch raises
    them as RuntimeError (torch.AcceleratorError, a subclass, from torch 2.8)."""
    return isinstance(exc, RuntimeError) and describes_device_fault(str(exc))


def describes_device_fault(message: str) -> bool:
    text = message.lower()
    return "cuda error" in text and any(fault in text for fault in CANDIDATE_DEVICE_FAULTS)


__all__ = ["CANDIDATE_DEVICE_FAULTS", "describes_device_fault", "is_device_fault"]
