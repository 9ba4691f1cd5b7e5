"""The verdict taxonomy: one enum, one table of facts about each verdict.

Verdicts are data. Everything that needs to know whether a verdict is the candidate's fault, which exit code it maps
to, or how to describe it reads this table; nothing else hard-codes verdict semantics. New verdicts are appended
(never renamed: stored reports and SQL views refer to the string values).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    """Outcome of one verification case (and, aggregated, of a whole run)."""

    PASS = "pass"
    # Loading the candidate (gate 1).
    INVALID_SOURCE = "invalid_source"
    COMPILE_ERROR = "compile_error"
    IMPORT_ERROR = "import_error"
    MISSING_ENTRYPOINT = "missing_entrypoint"
    # Running it (gate 2).
    RUNTIME_ERROR = "runtime_error"
    WRONG_OUTPUT_TYPE = "wrong_output_type"
    DEVICE_MISMATCH = "device_mismatch"
    SHAPE_MISMATCH = "shape_mismatch"
    DTYPE_MISMATCH = "dtype_mismatch"
    INPUT_MUTATED = "input_mutated"
    # Numerics (gates 3-6).
    NON_FINITE = "non_finite"
    TOLERANCE = "tolerance"
    NONDETERMINISTIC = "nondeterministic"
    CACHED_OUTPUT = "cached_output"
    # Sandbox and watchdogs.
    COMPILE_TIMEOUT = "compile_timeout"
    EXECUTION_TIMEOUT = "execution_timeout"
    CRASHED = "crashed"
    RESOURCE_LIMIT = "resource_limit"
    # Cheat checks.
    NO_KERNEL_LAUNCH = "no_kernel_launch"
    TAMPERING = "tampering"
    IMPLAUSIBLE_TIMING = "implausible_timing"
    POLICY_VIOLATION = "policy_violation"
    STALE_INPUT = "stale_input"
    # Ours, never the candidate's.
    INFRA_ERROR = "infra_error"
    # Not run because an earlier, run-wide gate failed (e.g. the file did not load).
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class VerdictInfo:
    """Facts about one verdict.

    candidate_fault: the candidate is to blame (reward -1). False means the infrastructure failed and the run must be
    retried or reported to operators, never scored against the candidate.
    """

    candidate_fault: bool
    description: str


VERDICT_INFO: dict[Verdict, VerdictInfo] = {
    Verdict.PASS: VerdictInfo(False, "Passed every correctness gate."),
    Verdict.INVALID_SOURCE: VerdictInfo(True, "Source is not UTF-8 text, is empty, or exceeds the size cap."),
    Verdict.COMPILE_ERROR: VerdictInfo(True, "Python syntax error, or Triton failed to compile a kernel."),
    Verdict.IMPORT_ERROR: VerdictInfo(True, "Executing the module body raised (including failed imports)."),
    Verdict.MISSING_ENTRYPOINT: VerdictInfo(True, "The module defines no top-level callable named `candidate`."),
    Verdict.RUNTIME_ERROR: VerdictInfo(True, "Calling `candidate` raised an exception."),
    Verdict.WRONG_OUTPUT_TYPE: VerdictInfo(
        True, "The return value is not a plain torch.Tensor with its own storage (subclass, attributes, input view)."
    ),
    Verdict.DEVICE_MISMATCH: VerdictInfo(True, "The output is not on the inputs' device."),
    Verdict.SHAPE_MISMATCH: VerdictInfo(True, "The output shape differs from the documented shape."),
    Verdict.DTYPE_MISMATCH: VerdictInfo(True, "The output dtype differs from the documented dtype."),
    Verdict.INPUT_MUTATED: VerdictInfo(True, "The candidate modified one of its inputs."),
    Verdict.NON_FINITE: VerdictInfo(True, "NaN or Inf in the output where the oracle is finite."),
    Verdict.TOLERANCE: VerdictInfo(True, "The output differs from the oracle beyond the dtype's tolerance policy."),
    Verdict.NONDETERMINISTIC: VerdictInfo(True, "Identical inputs gave output that is not bit-identical."),
    Verdict.CACHED_OUTPUT: VerdictInfo(True, "Fresh inputs gave stale or incorrect output (output caching)."),
    Verdict.COMPILE_TIMEOUT: VerdictInfo(
        True, "Importing the module or a case's first call (JIT compile and first run) exceeded the compile deadline."),
    Verdict.EXECUTION_TIMEOUT: VerdictInfo(True, "A run exceeded the execution deadline; the process tree was killed."),
    Verdict.CRASHED: VerdictInfo(True, "The candidate process died from a signal or exited unexpectedly."),
    Verdict.RESOURCE_LIMIT: VerdictInfo(True, "A resource limit was hit (memory, processes, file size, output)."),
    Verdict.NO_KERNEL_LAUNCH: VerdictInfo(
        True, "The output was not produced by Triton kernels the candidate launched."
    ),
    Verdict.TAMPERING: VerdictInfo(True, "The candidate altered the harness, timers or deferred its work."),
    Verdict.IMPLAUSIBLE_TIMING: VerdictInfo(True, "Measured time is below what the GPU's bandwidth physically allows."),
    Verdict.POLICY_VIOLATION: VerdictInfo(True, "The source breaks a rule of the static policy."),
    Verdict.STALE_INPUT: VerdictInfo(
        True, "Wrong output when the kernel before it writes its inputs: it reads them without waiting for that "
        "kernel (programmatic dependent launch without griddepcontrol.wait)."),
    Verdict.INFRA_ERROR: VerdictInfo(False, "A fault of the verifier or its host; never blamed on the candidate."),
    Verdict.SKIPPED: VerdictInfo(False, "Not run because a run-wide gate failed first (see that verdict)."),
}


def is_candidate_fault(verdict: Verdict) -> bool:
    """True when the verdict scores the candidate -1 (it is to blame)."""
    return VERDICT_INFO[verdict].candidate_fault


def worst(verdicts: list[Verdict]) -> Verdict:
    """Overall verdict: pass only if all passed; infra errors dominate (the run says nothing about the candidate)."""
    failures = [v for v in verdicts if v not in (Verdict.PASS, Verdict.SKIPPED)]
    if not verdicts or (not failures and all(v is Verdict.SKIPPED for v in verdicts)):
        return Verdict.INFRA_ERROR
    if Verdict.INFRA_ERROR in failures:
        return Verdict.INFRA_ERROR
    return failures[0] if failures else Verdict.PASS
