"""Turning command-line options into a Campaign, with the device resolved and checked."""

from __future__ import annotations

import argparse

import torch

from kernelproof_core.campaign import Campaign
from kernelproof_core.dtypes import dtype_name, parse_dtype
from kernelproof_core.environment import resolve_device
from kernelproof_core.errors import DeviceUnavailable, UsageError
from kernelproof_core.measurement.stopping import StoppingRule
from kernelproof_core.settings import get_settings
from kernelproof_core.tasks import CaseSet


def campaign_from_args(args: argparse.Namespace) -> Campaign:
    """The seed campaign's defaults (settings), overridden by whatever the user passed."""
    settings = get_settings()
    device = resolve_device(args.device)
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("CUDA was requested but no CUDA device is available (try --device interpreter)")
    dtypes = [dtype_name(parse_dtype(d)) for d in (args.dtypes or ["bfloat16"])]
    case_set = CaseSet(args.case_set) if args.case_set else (CaseSet.FULL if device == "cuda" else CaseSet.INTERPRETER)
    # Under the interpreter a "sample" is one wall-clock call: the seed campaign's 100x100 would take hours.
    gpu = device == "cuda"
    defaults = (
        (settings.default_warmups, settings.default_samples, settings.default_invocations_per_sample)
        if gpu else (0, settings.interpreter_samples, 1)
    )
    return Campaign(
        device=device,
        dtypes=dtypes,
        case_set=case_set,
        case_ids=args.case_ids,
        seed=args.seed,
        warmups=defaults[0] if args.warmups is None else args.warmups,
        samples=defaults[1] if args.repeats is None else args.repeats,
        invocations_per_sample=defaults[2] if args.iterations_per_sample is None else args.iterations_per_sample,
        measure=not args.no_measure,
        stopping=stopping_from_args(args),
    )


STOPPING_OPTIONS = {"min_samples": "--min-samples", "max_samples": "--max-samples",
                    "min_measured_s": "--min-measured-s", "max_measure_s": "--max-measure-s"}


def stopping_from_args(args: argparse.Namespace) -> StoppingRule | None:
    """A StoppingRule when --target-rse is given (its other options need it); None keeps the fixed count."""
    given = {field: getattr(args, field, None) for field in STOPPING_OPTIONS}
    given = {k: v for k, v in given.items() if v is not None}
    target = getattr(args, "target_rse", None)
    if target is None:
        if given:
            raise UsageError(f"{', '.join(STOPPING_OPTIONS[k] for k in given)} need --target-rse")
        return None
    return StoppingRule(target_rse=target, **given)


def check_case_ids(campaign: Campaign, task_names: list[str]) -> None:
    """Every --case must name a case of at least one of the tasks run (in the campaign's case set): a typo would
    otherwise verify nothing and look like an empty run."""
    if campaign.case_ids is None:
        return
    from kernelproof_core.tasks import get_task

    known: dict[str, None] = {}
    for name in dict.fromkeys(task_names):
        known.update(dict.fromkeys(c.case_id for c in get_task(name).cases(campaign.case_set, campaign.seed)))
    unknown = [c for c in campaign.case_ids if c not in known]
    if unknown:
        raise UsageError(f"no case {', '.join(unknown)} in {', '.join(dict.fromkeys(task_names))} "
                         f"({campaign.case_set.value} set); known: {', '.join(known)}")
