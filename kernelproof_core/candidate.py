"""Loading an untrusted candidate file: gate 1 of the pipeline.

The source is decoded, size-checked, compiled and executed as a fresh module that is never inserted into
sys.modules, so two candidates cannot see each other and a candidate cannot shadow a real module. Loading happens
outside any measurement. Triton kernels are JIT-compiled on first launch; that launch happens in gate 2 (also
outside measurement), where a Triton compilation failure is still reported as `compile_error`.
"""

from __future__ import annotations

import hashlib
import linecache
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelproof_core.errors import CandidateFailure
from kernelproof_core.settings import get_settings
from kernelproof_core.verdicts import Verdict

ENTRYPOINT = "candidate"


@dataclass(frozen=True, slots=True)
class LoadedCandidate:
    fn: Callable[..., Any]
    module: types.ModuleType
    source_sha256: str
    size_bytes: int


def source_sha256(source: bytes) -> str:
    return hashlib.sha256(source).hexdigest()


def decode_source(source: bytes) -> str:
    """UTF-8 text within the size cap, or `invalid_source`."""
    cap = get_settings().candidate_max_source_bytes
    if len(source) > cap:
        raise CandidateFailure(Verdict.INVALID_SOURCE, f"source is {len(source)} bytes; the cap is {cap} bytes")
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CandidateFailure(Verdict.INVALID_SOURCE, f"source is not valid UTF-8: {exc}") from None
    if not text.strip():
        raise CandidateFailure(Verdict.INVALID_SOURCE, "source is empty")
    if "\x00" in text:
        raise CandidateFailure(Verdict.INVALID_SOURCE, "source contains NUL bytes")
    return text


def short_traceback(exc: BaseException, limit: int = 6) -> str:
    """The last frames of a traceback, enough to act on without flooding a report."""
    return "".join(traceback.format_exception(exc, limit=-limit))[-4000:]


def load_candidate(source: bytes, filename: str = "<candidate>") -> LoadedCandidate:
    """Decode, compile and execute a candidate file; return its `candidate` callable.

    Raises CandidateFailure with invalid_source, compile_error, import_error or missing_entrypoint.
    """
    text = decode_source(source)
    try:
        code = compile(text, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise CandidateFailure(Verdict.COMPILE_ERROR, f"{type(exc).__name__}: {exc}") from None
    # Triton's @jit reads kernel source through inspect, which falls back to linecache for files that do not exist;
    # registering the text there lets a submission (never written to disk) define kernels.
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    module = types.ModuleType("kernelproof_candidate")
    module.__file__ = filename
    try:
        exec(code, module.__dict__)
    except Exception as exc:  # the candidate's own code raised: its fault, typed
        raise CandidateFailure(
            Verdict.IMPORT_ERROR, f"executing the module raised {type(exc).__name__}: {exc}", short_traceback(exc)
        ) from None
    fn = module.__dict__.get(ENTRYPOINT)
    if fn is None or not callable(fn):
        raise CandidateFailure(Verdict.MISSING_ENTRYPOINT, f"no top-level callable named `{ENTRYPOINT}`")
    return LoadedCandidate(fn=fn, module=module, source_sha256=source_sha256(source), size_bytes=len(source))
