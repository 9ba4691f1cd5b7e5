"""kernel_sweep.py families `softmax_vs_baseline` and `rms_norm_vs_baseline`: the built-in's planned launch beside
the planned launch of an earlier revision of the same kernel file, in one process on one input, each checked against
fp32 first. A built-in kernel is one self-contained file (a candidate is one file), so the earlier revision loads as
a module of its own: `scripts/baseline-kernels REV` writes `git show REV:kernelproof_core/kernels/NAME.py` into
benchmarks/baseline_kernels/ (ignored by git; carry it in the device call), or KP_BASELINE_DIR names another folder.
This is how a change to a kernel is measured against the kernel it replaces without a switch in the product code."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from types import ModuleType

import torch
from sweep_common import Trial, rms_norm_close, rms_norm_inputs, rms_norm_planned, rms_norm_ref
from sweep_resident import _correct, inputs

from kernelproof_core.kernels import softmax

BASELINE_DIR = Path(__file__).resolve().parent / "baseline_kernels"

# The softmax campaign's wide cases (long_65536, long_131072, vocab_128256, the random0 / random2 / hidden_spike
# draws), the 264-1024-row windows of 49196 and the aligned rows beside them.
SOFTMAX_SHAPES = ((1024, 65536), (1024, 131072), (512, 128256), (1723, 25249), (1991, 33508), (1938, 13130),
                  (264, 49196), (400, 49196), (1024, 49196), (400, 49152), (2048, 32768))
# Resident rms_norm shapes (aligned, through windows, two an SM) and the hidden_wide draw of the last H200 campaign.
RMS_NORM_SHAPES = ((1024, 65536), (1024, 50001), (2000, 60001), (1024, 40000), (476, 63343), (372, 46501))


def baseline(name: str) -> tuple[ModuleType, str] | None:
    """The baseline copy of kernels/NAME.py as a module of its own and its label (the file's first line names the
    revision where scripts/baseline-kernels wrote it), or None where there is none."""
    path = Path(os.environ.get("KP_BASELINE_DIR", BASELINE_DIR)) / f"{name}.py"
    if not path.is_file():
        print(f"no baseline {path}: run scripts/baseline-kernels REV", flush=True)
        return None
    spec = importlib.util.spec_from_file_location(f"kp_baseline_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    first = path.read_text().splitlines()[0]
    return module, first.removeprefix("# baseline ").strip() if first.startswith("# baseline ") else path.name


def softmax_vs_baseline_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The built-in softmax's planned launch and the baseline's at SOFTMAX_SHAPES."""
    found = baseline("softmax")
    for m, n in SOFTMAX_SHAPES:
        x, _y, ref, moved = inputs(m, n, dtype, device)
        runs: list[tuple[str, str, Callable[[], object], bool]] = [
            ("softmax.planned", "planned", partial(softmax.candidate, x), True)]
        if found is not None:
            runs.append(("softmax.baseline", f"baseline {found[1]}", partial(found[0].candidate, x), False))
        for kind, label, launch, chosen in runs:
            if _correct(launch(), ref, f"{kind} {m}x{n}"):  # type: ignore[arg-type]
                yield (kind, (m, n), label, launch, moved, chosen)


def rms_norm_vs_baseline_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The built-in rms_norm's planned launch and the baseline's at RMS_NORM_SHAPES."""
    found = baseline("rms_norm")
    for m, n in RMS_NORM_SHAPES:
        x, w, _y, moved = rms_norm_inputs(m, n, dtype, device)
        ref = rms_norm_ref(x, w)
        planned = rms_norm_planned(x, w, moved)
        if rms_norm_close(planned[3](), ref, f"rms_norm.planned {m}x{n}"):  # type: ignore[arg-type]
            yield planned
        if found is not None:
            launch = partial(found[0].candidate, x, w, 1e-6)
            if rms_norm_close(launch(), ref, f"rms_norm.baseline {m}x{n}"):
                yield ("rms_norm.baseline", (m, n), f"baseline {found[1]}", launch, moved, False)
