"""Named campaign presets: the one table that says what `quick`, `standard` and `full` mean.

A preset fixes how many dtypes, which kinds of cases and how hard to measure. Explicit overrides (warm-ups,
samples, invocations, case ids) are applied on top, and the service checks them against the operator's limits.
The device and case set come from where the job runs: the reduced interpreter set under the Triton
interpreter, all documented cases on CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelproof_core.campaign import Campaign, Device
from kernelproof_core.dtypes import dtype_name, parse_dtype
from kernelproof_core.measurement.stopping import StoppingRule
from kernelproof_core.tasks import CaseKind, CaseSet, Task


@dataclass(frozen=True, slots=True)
class Preset:
    """How a named campaign differs from another.

    max_default_dtypes: how many of the task's dtypes to use when the caller names none (its first ones).
    case_kinds: only cases of these kinds (None: every case of the case set).
    target_rse, max_measure_s: on CUDA, sample until this noise target (capped at that many seconds per case)
    instead of `samples` (measurement/stopping.py); None: the fixed count.
    """

    name: str
    description: str
    max_default_dtypes: int
    case_kinds: frozenset[CaseKind] | None
    warmups: int
    samples: int
    invocations_per_sample: int
    target_rse: float | None = None
    max_measure_s: float = 30.0


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "quick",
            "one dtype, edge cases only, few samples: fast feedback for RL inner loops",
            1,
            frozenset({CaseKind.EDGE}),
            warmups=3,
            samples=10,
            invocations_per_sample=10,
        ),
        Preset(
            "standard",
            "every dtype of the task, every documented case, the seed campaign's measurement",
            3,
            None,
            warmups=10,
            samples=100,
            invocations_per_sample=100,
        ),
        Preset(
            "full",
            "every dtype and case, more samples: leaderboard-grade timings",
            3,
            None,
            warmups=25,
            samples=200,
            invocations_per_sample=100,
        ),
        Preset(
            "adaptive",
            "every dtype and case, sampled until both medians are within 0.5% (RSE), at most 10 s per case",
            3,
            None,
            warmups=10,
            samples=100,
            invocations_per_sample=100,
            target_rse=0.005,
            max_measure_s=10.0,
        ),
    )
}
DEFAULT_PRESET = "standard"

# Campaign fields a caller may set explicitly on top of a preset.
OVERRIDABLE_FIELDS = ("warmups", "samples", "invocations_per_sample", "case_ids", "seed", "measure", "stopping")


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown campaign preset {name!r}; known presets: {', '.join(PRESETS)}") from None


def default_case_set(device: Device) -> CaseSet:
    return CaseSet.FULL if device == "cuda" else CaseSet.INTERPRETER


def build_campaign(
    task: Task,
    device: Device,
    preset_name: str = DEFAULT_PRESET,
    dtypes: list[str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Campaign:
    """A Campaign for `task` from a preset, the caller's dtypes (canonicalized) and explicit overrides.

    Raises ValueError for an unknown preset, dtype, case id, or an override that is not a campaign field.
    """
    preset = get_preset(preset_name)
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(OVERRIDABLE_FIELDS)
    if unknown:
        raise ValueError(f"not overridable: {', '.join(sorted(unknown))}")
    if dtypes:
        names = list(dict.fromkeys(dtype_name(parse_dtype(d)) for d in dtypes))
    else:
        names = list(task.info.dtypes[: preset.max_default_dtypes])
    bad = [d for d in names if d not in task.info.dtypes]
    if bad:
        raise ValueError(
            f"task {task.name} does not support {', '.join(bad)}; it supports {', '.join(task.info.dtypes)}"
        )
    case_set = default_case_set(device)
    seed = int(overrides.get("seed", 0))
    available = task.cases(case_set, seed)
    case_ids = overrides.pop("case_ids", None)
    if case_ids is not None:
        known = {c.case_id for c in available}
        missing = [c for c in case_ids if c not in known]
        if missing or not case_ids:
            named = ", ".join(missing) or "(none given)"
            raise ValueError(f"unknown case ids for {task.name} ({case_set.value} set): {named}")
        case_ids = list(dict.fromkeys(case_ids))
    elif preset.case_kinds is not None:
        case_ids = [c.case_id for c in available if c.kind in preset.case_kinds]
    fields: dict[str, Any] = {
        "warmups": preset.warmups,
        "samples": preset.samples,
        "invocations_per_sample": preset.invocations_per_sample,
    }
    if preset.target_rse is not None and device == "cuda":
        fields["stopping"] = StoppingRule(target_rse=preset.target_rse, max_measure_s=preset.max_measure_s)
    fields.update(overrides)
    if fields.get("stopping") is not None and device != "cuda":
        fields["stopping"] = None  # adaptive stopping is for GPU timings; interpreter runs keep the fixed count
    return Campaign(device=device, dtypes=names, case_set=case_set, case_ids=case_ids, **fields)
