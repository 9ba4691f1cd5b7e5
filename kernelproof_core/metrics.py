"""Error metrics of a candidate output against the oracle, and the tolerance decision.

All arithmetic is in float64 on the output's device, so the metrics themselves add no error worth mentioning.
"""

from __future__ import annotations

import math

import torch

from kernelproof_core.report.models import ErrorMetrics
from kernelproof_core.tolerances import TolerancePolicy


def error_metrics(output: torch.Tensor, reference: torch.Tensor, policy: TolerancePolicy) -> ErrorMetrics:
    """Compare `output` with `reference` (same shape). Non-finite entries count as mismatches."""
    c = output.double()
    r = reference.double()
    diff = (c - r).abs()
    allowed = policy.atol + policy.rtol * r.abs()
    bad = ~(diff <= allowed)  # NaN compares False, so NaN anywhere is a mismatch
    mismatches = int(bad.sum().item())
    first: list[int] | None = None
    if mismatches:
        flat = int(torch.nonzero(bad.reshape(-1))[0].item())
        first = [int(i) for i in _unravel(flat, tuple(output.shape))]
    finite = torch.isfinite(diff)
    d = torch.where(finite, diff, torch.zeros_like(diff))
    numel = output.numel()
    ref_norm = float(torch.linalg.vector_norm(r).item())
    diff_norm = float(torch.linalg.vector_norm(d).item()) if bool(finite.all()) else math.inf
    out_norm = float(torch.linalg.vector_norm(torch.where(finite, c, torch.zeros_like(c))).item())
    rel = d / r.abs().clamp_min(torch.finfo(torch.float64).tiny)
    return ErrorMetrics(
        numel=numel,
        max_abs=_finite_or_inf(d.max().item() if numel else 0.0, finite),
        max_rel=_finite_or_inf(rel.max().item() if numel else 0.0, finite),
        mean_abs=float(d.mean().item()) if numel else 0.0,
        rmse=math.sqrt(float(d.square().mean().item())) if numel else 0.0,
        rel_l2=_rel_l2(diff_norm, ref_norm),
        cosine=_cosine(c, r, out_norm, ref_norm),
        mismatch_count=mismatches,
        first_mismatch_index=first,
    )


def within_tolerance(metrics: ErrorMetrics, policy: TolerancePolicy) -> bool:
    """Both the elementwise and the magnitude-aware (relative L2) checks must hold."""
    return metrics.mismatch_count == 0 and metrics.rel_l2 <= policy.max_rel_l2


def describe_failure(metrics: ErrorMetrics, policy: TolerancePolicy) -> str:
    if metrics.mismatch_count:
        return (
            f"{metrics.mismatch_count}/{metrics.numel} elements outside atol={policy.atol:g} rtol={policy.rtol:g}; "
            f"first at {metrics.first_mismatch_index}; max_abs={metrics.max_abs:.3g} max_rel={metrics.max_rel:.3g}"
        )
    return f"relative L2 error {metrics.rel_l2:.3g} exceeds {policy.max_rel_l2:g} (cosine {metrics.cosine:.6f})"


def _unravel(index: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for dim in reversed(shape):
        out.append(index % dim)
        index //= dim
    return list(reversed(out))


def _finite_or_inf(value: float, finite: torch.Tensor) -> float:
    return float(value) if bool(finite.all()) else math.inf


def _rel_l2(diff_norm: float, ref_norm: float) -> float:
    if ref_norm == 0.0:
        return 0.0 if diff_norm == 0.0 else math.inf
    return diff_norm / ref_norm


def _cosine(c: torch.Tensor, r: torch.Tensor, c_norm: float, r_norm: float) -> float:
    if c_norm == 0.0 or r_norm == 0.0 or not math.isfinite(c_norm):
        return 1.0 if c_norm == r_norm == 0.0 else 0.0
    dot = float(torch.where(torch.isfinite(c), c, torch.zeros_like(c)).reshape(-1).dot(r.reshape(-1)).item())
    return dot / (c_norm * r_norm)
