"""What kernel_sweep.py's families share: the trial record and the rms_norm reference and planned launch."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.kernels import rms_norm, softmax

Launcher = Callable[[], object]
# (family, shape, config label, launcher, bytes moved, is the built-in's own choice)
Trial = tuple[str, tuple[int, int], str, Launcher, int, bool]


def rms_norm_inputs(m: int, n: int, dtype: torch.dtype, device: torch.device,
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """x, weight, an output buffer and the bytes a pass moves (x read, y written) for an m x n rms_norm trial."""
    x = torch.randn(m, n, dtype=dtype, device=device)
    return x, torch.randn(n, dtype=dtype, device=device), torch.empty_like(x), 2 * x.numel() * x.element_size()


def rms_norm_ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()


def rms_norm_close(y: torch.Tensor, ref: torch.Tensor, label: str) -> bool:
    """y (just written) within 5% of the fp32 reference's largest magnitude everywhere; else says so, labelled."""
    err = float((y.float() - ref).abs().max())
    if not err < 5e-2 * float(ref.abs().max()):
        print(f"{label}: WRONG (max |error| {err:.3g})", flush=True)
        return False
    return True


def rms_norm_planned(x: torch.Tensor, w: torch.Tensor, moved: int) -> Trial:
    """The built-in rms_norm as a verification calls it (plan lookup, workspace and all), labelled with its plan."""
    m, n = x.shape
    plan = rms_norm._plan(m, n, n, x.element_size(), x.device)
    meta = plan.meta if isinstance(plan, rms_norm._Split | rms_norm._TwoPhase) else plan[1]
    kind = {rms_norm._Split: "split", rms_norm._TwoPhase: "two_phase"}.get(type(plan),
                                                                           "resident" if "NCHUNK" in meta else "rows")
    return ("rms_norm.planned", (m, n), f"{kind} " + " ".join(f"{k}={v}" for k, v in meta.items()),
            partial(rms_norm.candidate, x, w, 1e-6), moved, True)


def softmax_inputs(m: int, n: int, scale: float, dtype: torch.dtype, device: torch.device,
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, Trial]:
    """x ~ N(0, scale^2), an output buffer, the fp32 softmax, the bytes a pass moves and the built-in's planned launch
    (a trial) for an m x n softmax family."""
    x = torch.randn(m, n, dtype=dtype, device=device) * scale
    moved = 2 * x.numel() * x.element_size()
    planned: Trial = ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
    return x, torch.empty_like(x), torch.softmax(x.float(), dim=-1), moved, planned


def close_twice(launch: Callable[[], object], y: torch.Tensor, ref: torch.Tensor, label: str) -> bool:
    """close_to on two launches in a row (the second relies on whatever the first left behind, e.g. a workspace it
    must clear); a config that does not build or launch (shared memory, cluster shape) is reported, not fatal."""
    try:
        return close_to(launch, y, ref, label) and close_to(launch, y, ref, label + " (again)")
    except Exception as exc:
        print(f"{label}: ERROR {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        return False


def close_in_graph(launch: Callable[[], object], y: torch.Tensor, ref: torch.Tensor, label: str, calls: int = 3,
                   replays: int = 2) -> bool:
    """close_to as the harness times (measurement/replay.py): `calls` launches captured in one CUDA graph, replayed
    `replays` times, y checked after each. Host code runs only at capture, so a kernel whose rendezvous state is kept
    on the host (a buffer switched each call) replays that state frozen: an odd call count shows it. Reported, not
    fatal."""
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                launch()
        for replay in range(replays):
            if not close_to(graph.replay, y, ref, f"{label} (graph of {calls} calls, replay {replay + 1})"):
                return False
        return True
    except Exception as exc:
        print(f"{label} (graph): ERROR {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        return False


def output_close(out: object, ref: torch.Tensor, label: str) -> bool:
    """out within 1% of ref by relative L2 error over the whole output (softmax values of wide rows are ~1e-5: an
    absolute tolerance would pass an output of zeros); NaN (never written) or not a tensor: says WRONG."""
    err = float((out.float() - ref).norm() / ref.norm()) if isinstance(out, torch.Tensor) else float("nan")
    if not err < 1e-2:
        print(f"{label}: WRONG (relative L2 error {err:.3g})", flush=True)
        return False
    return True


def close_to(launch: Callable[[], object], y: torch.Tensor, ref: torch.Tensor, label: str) -> bool:
    """Run launch once (it writes y, first filled with NaN) and check y as output_close does."""
    y.fill_(float("nan"))
    launch()
    return output_close(y, ref, label)
