"""What a report says about isolation, and when an untrusted submission must be refused.

The Isolation block of every report is assembled from three witnesses: the launch plan (namespaces, mode), the
server's "ready" message (the uid it actually runs as) and the child's "armed" message plus the cgroup the
supervisor created (what was applied to this very candidate). Missing layers are listed by name.
"""

from __future__ import annotations

import os

from kernelproof_core.campaign import CandidateJob
from kernelproof_core.report.models import Isolation
from kernelproof_core.sandbox.launch import LaunchPlan
from kernelproof_core.sandbox.layers import LAYERS, REQUIRED_FOR_UNTRUSTED, missing_required, ordered
from kernelproof_core.sandbox.server import ServerProcess
from kernelproof_core.sandbox.supervisor import RunOutcome
from kernelproof_core.settings import Settings

CHILD_LAYERS = ("scratch-dir", "own-triton-cache", "rlimits", "seccomp", "landlock-fs", "no-new-privs")


def predicted_layers(plan: LaunchPlan) -> list[str]:
    """The layers a candidate will get here, known before running it."""
    layers = [*plan.layers, "scratch-dir", "own-triton-cache", "rlimits", "no-new-privs"]
    if plan.host.seccomp:
        layers.append("seccomp")
    if plan.host.landlock_abi > 0:
        layers.append("landlock-fs")
    return ordered(layers)


def refusal(job: CandidateJob, plan: LaunchPlan, settings: Settings) -> str | None:
    """Why this candidate must not run here (None: go ahead). Only untrusted submissions are ever refused, and only
    while a required layer is unavailable and the operator has not set allow_unsandboxed."""
    if job.origin != "submission" or settings.allow_unsandboxed:
        return None
    missing = missing_required(predicted_layers(plan))
    if not missing:
        return None
    return ("refusing an untrusted submission: isolation layers unavailable on this host: "
            f"{', '.join(missing)} (operators may opt out with KERNELPROOF_ALLOW_UNSANDBOXED=true)")


def required_child_layers(job: CandidateJob, settings: Settings) -> list[str]:
    """Layers the child must refuse to run without (it can still fail to apply one the probe promised)."""
    if job.origin != "submission" or settings.allow_unsandboxed:
        return []
    return [name for name in CHILD_LAYERS if name in REQUIRED_FOR_UNTRUSTED]


def build_isolation(plan: LaunchPlan, server: ServerProcess | None, run: RunOutcome | None) -> Isolation:
    layers = set(plan.layers)
    notes = list(plan.notes)
    if run is not None:
        layers |= set(run.cgroup_layers)
        if run.armed is not None:
            layers |= set(run.armed.layers)
            notes += run.armed.notes
    sandbox_uid = server.ready.get("uid") if server is not None else None
    if plan.as_root and sandbox_uid is not None and sandbox_uid != os.getuid():
        layers.add("separate-user")
    # A root worker needs no user namespace (it drops to a real uid); a non-root one cannot get a distinct uid,
    # so "separate-user" stays listed as missing there.
    not_applicable = {"forkserver", "cold-start"} | ({"user-namespace"} if plan.as_root else set())
    if plan.device != "cuda":
        not_applicable.add("gpu-device-node")
    missing = [name for name in LAYERS if name not in not_applicable and name not in layers]
    mode = "warm fork server" if plan.mode == "forkserver" else "cold start"
    where = f"bwrap {plan.host.bwrap_path}" if plan.use_bwrap else "DEGRADED: no bwrap"
    note = "; ".join([f"{mode}; sandbox uid {sandbox_uid}; {where}", *notes])
    return Isolation(sandboxed=True, layers=ordered(layers), missing_layers=missing, note=note[:2000])
