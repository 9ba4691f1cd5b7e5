"""Hidden cases: shapes and inputs a candidate cannot know in advance, so code tuned to the published cases fails.

The secret (`Campaign.hidden_seed`) is drawn from os.urandom by the trusted side when it builds the campaign, and it
travels only inside the campaign (the sandbox's request channel), never through the environment, argv or files.
Parent and child derive the same hidden cases from it, so a supervisor that must account for every planned case
(a crash mid-run) plans them too. The shapes come from the task's hidden profiles (`Task.hidden_cases`), the inputs
from a seed derived from the secret, never from the public campaign seed. The secret is per run: revealing it after
the run (e.g. in a stored campaign) tells nothing about the next run's cases.
"""

from __future__ import annotations

import hashlib

import torch

from kernelproof_core.campaign import Campaign
from kernelproof_core.tasks.base import Case, CaseKind, Task


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from its parts (SHA-256): stable across hosts and Python versions."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def hidden_cases(task: Task, campaign: Campaign) -> list[Case]:
    """The campaign's hidden cases for `task` (none when hidden cases are off or no secret was drawn)."""
    if not campaign.uses_hidden_cases or campaign.hidden_seed is None:
        return []
    return task.hidden_cases(campaign.hidden_seed, campaign.case_set)


def input_seed(campaign: Campaign, task: Task, dtype: torch.dtype, case: Case) -> int:
    """Hidden cases draw their inputs from the secret; every other case from the public campaign seed."""
    if case.kind is CaseKind.HIDDEN and campaign.hidden_seed is not None:
        return derive_seed("hidden", campaign.hidden_seed, task.name, dtype, case.case_id)
    return derive_seed(campaign.seed, task.name, dtype, case.case_id)
