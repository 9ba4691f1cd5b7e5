"""Arming the cheat checks of one candidate run, in the order that matters: everything is measured and snapshotted
before the candidate's code runs, the snapshot last."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelproof_core.campaign import Campaign
from kernelproof_core.candidate import decode_source
from kernelproof_core.errors import CandidateFailure
from kernelproof_core.integrity import dependent_launch
from kernelproof_core.integrity.guard import CallGuard, warm_up
from kernelproof_core.integrity.launches import LaunchObserver
from kernelproof_core.integrity.plausibility import PersistingL2, copy_bandwidth_ceiling_gbps
from kernelproof_core.integrity.policy import POLICY_VERSION, check_source
from kernelproof_core.integrity.tamper import HarnessSnapshot
from kernelproof_core.measurement.launch_gate import host_release
from kernelproof_core.settings import get_settings
from kernelproof_core.verdicts import Verdict


@functools.cache
def launch_observer() -> LaunchObserver:
    """One per process, created before any candidate code runs (it captures Triton's original launch path)."""
    return LaunchObserver()


@functools.cache
def warm_up_process(device: str) -> None:
    """Lazy imports and first uses of the checks, done before any snapshot (see guard.warm_up). Once per process and
    device: a sandboxed child does it at start-up, before its job, and verify_candidate's call is then free."""
    warm_up(device, launch_observer())
    if device == "cuda" and get_settings().launch_gate_host_release:
        host_release()  # compiled and self-tested here, before any snapshot or candidate code
    if device == "cuda" and get_settings().integrity_dependent_launch_probe:
        dependent_launch.warm_up()  # gate 7's writer, likewise


@dataclass
class RunIntegrity:
    """The cheat checks of one candidate run."""

    harness: HarnessSnapshot | None = None
    guard: CallGuard | None = None  # set once the module loaded
    copy_gbps: float | None = None
    l2: PersistingL2 | None = None
    policy: str | None = None
    tampered: str | None = None  # set once the harness was found altered: no later case can be trusted
    device_fault: str | None = None  # set once the candidate's kernels faulted the device: the context is lost
    campaign_dump: dict[str, Any] = field(default_factory=dict)

    def attach(self, owner: dict[str, Any], device: torch.device) -> None:
        """Observe the loaded module's calls; `tampering` if loading it already changed the harness."""
        assert self.harness is not None
        self.guard = CallGuard(self.harness, launch_observer(), owner, device)
        self.guard.check()

    def campaign_changed(self, campaign: Campaign) -> bool:
        return campaign.model_dump() != self.campaign_dump

    def restore(self) -> None:
        """Put back what the candidate changed, for a process that goes on verifying (see tamper.restore)."""
        if self.harness is not None:
            self.harness.restore()
        launch_observer().restore()


def arm(campaign: Campaign, device: torch.device) -> RunIntegrity:
    """Measure the device and snapshot the harness; the caller loads the candidate right after."""
    integrity = RunIntegrity(policy=POLICY_VERSION if campaign.static_policy else None,
                             campaign_dump=campaign.model_dump())
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the primary context exists and is current before any candidate code runs
        integrity.l2 = PersistingL2()
        integrity.l2.bind()
        if campaign.measure:
            integrity.copy_gbps = copy_bandwidth_ceiling_gbps(get_settings().integrity_bandwidth_probe_bytes)
    integrity.harness = HarnessSnapshot.take()  # last: nothing of ours may change the process after it
    return integrity


def enforce_policy(source: bytes) -> None:
    """`policy_violation` naming the first broken rule (all of them in the detail)."""
    violations = check_source(decode_source(source))
    if violations:
        raise CandidateFailure(Verdict.POLICY_VIOLATION, f"{violations[0]} [{POLICY_VERSION}]",
                               detail="\n".join(str(v) for v in violations[:100]))
