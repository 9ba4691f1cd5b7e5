"""What a verification task is: signature, oracle, baseline, cases, tolerances and a built-in candidate.

A task owns everything that is specific to one operator. The pipeline never special-cases a task by name; it only
calls the methods below. Adding an operator means adding one module to `kernelproof_core.tasks` and registering it.
"""

from __future__ import annotations

import abc
import enum
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernelproof_core.tolerances import TolerancePolicy

KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels"


class CaseKind(enum.StrEnum):
    """Why a case exists; reports and docs group cases by it."""

    EDGE = "edge"  # deterministic shapes chosen to break tail masking, tiny widths, odd strides
    PRODUCTION = "production"  # shapes real models run
    RANDOM = "random"  # shapes drawn from the campaign seed
    THROUGHPUT = "throughput"  # large working sets for bandwidth
    HIDDEN = "hidden"  # drawn per run from a secret seed, with adversarial value distributions


class CaseSet(enum.StrEnum):
    """Which cases a run uses.

    FULL is every documented case (GPU runs). INTERPRETER is the documented reduced set for the Triton interpreter on
    a CPU: the same edge cases with small row counts, because the interpreter is slow on large shapes and an honest
    kernel must not time out.
    """

    FULL = "full"
    INTERPRETER = "interpreter"


@dataclass(frozen=True, slots=True)
class Case:
    """One shape (and input distribution) a candidate is verified on.

    `dims` are the task's named dimensions (e.g. M, N). `row_stride_pad` > 0 makes 2-D inputs non-contiguous views
    (rows padded by that many elements) so candidates must honour strides. `distribution` names an input generator the
    task understands (normal by default).
    """

    case_id: str
    kind: CaseKind
    dims: dict[str, int]
    description: str
    distribution: str = "normal"
    row_stride_pad: int = 0
    in_interpreter_set: bool = True

    def shape_label(self) -> str:
        return "x".join(f"{k}={v}" for k, v in self.dims.items())


@dataclass(frozen=True, slots=True)
class HiddenProfile:
    """One family of per-run hidden cases: width and row ranges per case set and an input distribution.

    Hidden cases exist so that code specialised to the published shapes fails: widths are drawn from these ranges
    (never equal to a published width), rows too, and `strided` profiles get a random row padding.
    """

    name: str
    description: str
    n_full: tuple[int, int]
    n_interpreter: tuple[int, int]
    m_full: tuple[int, int]
    m_interpreter: tuple[int, int]
    distribution: str = "normal"
    strided: bool = False


@dataclass(frozen=True, slots=True)
class OutputSpec:
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """Documentation of a task, shown by `kernelproof list`, the API and the docs."""

    name: str
    signature: str
    math: str
    output: str
    dtypes: tuple[str, ...]
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Task(abc.ABC):
    """A verification task. Subclasses are stateless; all randomness comes from the generator passed in."""

    info: TaskInfo
    hidden_profiles: tuple[HiddenProfile, ...] = ()

    @property
    def name(self) -> str:
        return self.info.name

    @abc.abstractmethod
    def cases(self, case_set: CaseSet, seed: int) -> list[Case]:
        """Deterministic cases plus randomized cases drawn from `seed` (same seed, same cases)."""

    @abc.abstractmethod
    def make_inputs(
        self, case: Case, dtype: torch.dtype, device: torch.device, generator: torch.Generator
    ) -> tuple[Any, ...]:
        """Fresh positional inputs for `candidate(*inputs)`; tensors live on `device`."""

    @abc.abstractmethod
    def output_spec(self, case: Case, dtype: torch.dtype) -> OutputSpec:
        """The documented output shape and dtype."""

    @abc.abstractmethod
    def oracle(self, inputs: Sequence[Any]) -> torch.Tensor:
        """Higher-precision reference (FP32 at least, FP64 where cheap) on the inputs' device."""

    @abc.abstractmethod
    def baseline(self) -> Callable[..., torch.Tensor]:
        """Native-dtype PyTorch eager implementation: the speed reference of the reward."""

    @abc.abstractmethod
    def min_bytes(self, case: Case, dtype: torch.dtype) -> int:
        """Fewest bytes any correct implementation must move through device memory."""

    @abc.abstractmethod
    def flops(self, case: Case) -> int:
        """Approximate floating-point operations of one call."""

    @abc.abstractmethod
    def tolerance(self, dtype: torch.dtype) -> TolerancePolicy:
        """Tolerance policy for outputs of this dtype."""

    def hidden_cases(self, secret_seed: int, case_set: CaseSet) -> list[Case]:
        """One case per hidden profile, its shape drawn from `secret_seed` (chosen per run by the trusted parent).

        Widths never equal a published one, so a kernel that is right only on the documented shapes fails here.
        """
        rng = random.Random(f"{secret_seed}/{self.name}/{case_set.value}")
        published = {c.dims.get("N") for c in self.cases(case_set, 0) if c.kind is not CaseKind.RANDOM}
        out = []
        for p in self.hidden_profiles:
            lo, hi = p.n_full if case_set is CaseSet.FULL else p.n_interpreter
            n = rng.randint(lo, hi)
            while n in published and hi > lo:
                n = rng.randint(lo, hi)
            m = rng.randint(*(p.m_full if case_set is CaseSet.FULL else p.m_interpreter))
            pad = rng.choice((rng.randint(1, 40), rng.randint(1, 7))) if p.strided else 0
            out.append(Case(f"hidden_{p.name}", CaseKind.HIDDEN, {"M": m, "N": n}, p.description,
                            distribution=p.distribution, row_stride_pad=pad))
        return out

    def perturb_inputs(self, case: Case, dtype: torch.dtype, inputs: Sequence[Any], generator: torch.Generator) -> None:
        """Give the input tensors new contents in place: same storage, shape, strides and distribution.

        Used between timing samples, so output cached by pointer, or by a cheap hash of a few elements, goes stale
        while the candidate cannot tell which set changed. Two random rows of every 2-D input trade places: the
        result is still a sample of the same (row-i.i.d.) distribution, a hash that does not read those rows does
        not change, and the output for those rows does. Inputs with a single row are redrawn instead.
        """
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        if any(t.dim() == 2 and t.shape[0] < 2 for t in tensors):
            device = tensors[0].device
            fresh = self.make_inputs(case, dtype, device, generator)
            for now, new in zip(inputs, fresh, strict=True):
                if isinstance(now, torch.Tensor):
                    now.copy_(new)
            return
        for t in tensors:
            if t.dim() == 2:
                i, j = (int(v) for v in torch.randperm(t.shape[0], generator=generator)[:2])
                t[[i, j]] = t[[j, i]].clone()

    def ring_inputs(self, inputs: Sequence[Any], index: int) -> tuple[Any, ...]:
        """Input set `index` of the timing ring, made on the device from `inputs` (the case's own set).

        The ring exists so that timed calls read memory the previous call did not leave in L2, and so that outputs
        cannot be replayed by pointer. Drawing every set on the CPU (as make_inputs does, for bit-identical inputs
        on every host) cost seconds per case, more than the timing itself. So each set is a device-side copy of
        the case's inputs with every tensor rolled along its rows (along its columns when it has one row) by an
        offset that differs per set: the same row-i.i.d. distribution (masks, constant rows and all), the same
        shapes and strides, new storage, other contents. Scalars are passed through.
        """
        out: list[Any] = []
        for x in inputs:
            if not isinstance(x, torch.Tensor) or x.dim() == 0:
                out.append(x)
                continue
            dim = 0 if x.shape[0] >= 2 or x.dim() == 1 else x.dim() - 1
            size = x.shape[dim]
            shift = 1 + (index * 40503) % (size - 1) if size > 1 else 0
            copy = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
            copy.copy_(torch.roll(x, shift, dims=dim) if shift else x)
            out.append(copy)
        return tuple(out)

    @property
    def builtin_candidate(self) -> Path:
        """Source file of the shipped reference Triton candidate (a candidate like any other)."""
        return KERNELS_DIR / f"{self.name}.py"
