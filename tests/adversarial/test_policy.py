"""The static policy (second layer): each rule fires on the construct it names, known evasions are closed, and every
honest candidate and shipped kernel is clean."""

from __future__ import annotations

import pytest

from kernelproof_core.integrity.policy import POLICY_VERSION, RULES, check_source
from tests.adversarial.corpus import HONEST_CANDIDATES

# (source, rule it must break)
VIOLATIONS = [
    ("import threading", "no-concurrency"),
    ("from concurrent.futures import ThreadPoolExecutor", "no-concurrency"),
    ("async def f():\n    pass", "no-concurrency"),
    ("import gc", "no-introspection"),
    ("import inspect", "no-introspection"),
    ("import sys", "no-introspection"),
    ("def f(e):\n    return e.__traceback__.tb_frame.f_back", "no-introspection"),
    ("import torch\nwith torch.profiler.profile():\n    pass", "no-introspection"),
    ("import ctypes", "no-native-code"),
    ("import torch.utils.cpp_extension", "no-native-code"),
    ("import os", "no-process-env"),
    ("open('/etc/passwd')", "no-process-env"),
    ("import time", "no-timers"),
    ("import torch\ne = torch.cuda.Event(enable_timing=True)", "no-timers"),
    ("from torch.cuda import Event", "no-timers"),
    ("import triton.testing", "no-timers"),
    ("eval('1')", "no-dynamic-code"),
    ("exec('x = 1')", "no-dynamic-code"),
    ("__import__('gc')", "no-dynamic-code"),
    ("import torch\ncuda = getattr(torch, 'cu' + 'da')", "no-dynamic-code"),
    ("import torch\nm = torch\nm.cuda.synchronize()", "no-dynamic-code"),
    ("from torch import *", "no-dynamic-code"),
    ("import importlib", "no-dynamic-code"),
    ("import operator\nget = operator.attrgetter('cuda')", "no-dynamic-code"),
    ("def f(fn):\n    return fn.__globals__", "no-dunder-access"),
    ("import torch\nd = torch.__dict__", "no-dunder-access"),
    ("key = '__subclasses__'", "no-dunder-access"),
    ("import torch\ntorch.cuda.synchronize = lambda: None", "no-monkeypatching"),
    ("import torch\nT = torch.Tensor\nT.double = lambda self: self", "no-monkeypatching"),
    ("import triton.language as tl\ntl.exp = None", "no-monkeypatching"),
    ("import torch\ntorch.set_default_dtype(torch.float16)", "no-monkeypatching"),
    ("import torch\nclass Lazy(torch.Tensor):\n    pass", "no-tensor-subclass"),
    ("class M:\n    def __torch_dispatch__(self, *a):\n        pass", "no-tensor-subclass"),
    ("import torch\nfrom torch.overrides import TorchFunctionMode", "no-tensor-subclass"),
    ("def f(t, cls):\n    return t.as_subclass(cls)", "no-tensor-subclass"),
    ("import torch\ns = torch.cuda.Stream()", "no-streams"),
    ("import torch\nwith torch.cuda.stream(None):\n    pass", "no-streams"),
    ("import torch\ng = torch.cuda.CUDAGraph()", "no-streams"),
    ("import torch\nf = torch.compile(len)", "no-torch-compile"),
    ("import torch\nx = torch._C", "no-private-internals"),
    ("from torch.utils._python_dispatch import TorchDispatchMode", "no-private-internals"),
    ("import triton\nk = triton.knobs", "no-private-internals"),
    ("import _posixsubprocess", "no-private-internals"),
    ("import torch\ngetattr(torch, '_C')", "no-private-internals"),
    ("import kernelproof_core", "no-harness-access"),
    ("name = 'kernelproof_core.gates'", "no-harness-access"),
    ("import numpy", "no-host-compute"),
    ("def f(x):\n    return x.numpy()", "no-host-compute"),
    ("def f(x):\n    return x.cpu()", "no-host-compute"),
    ("import json", "import-not-allowed"),
    ("from . import sibling", "import-not-allowed"),
]


@pytest.mark.parametrize(("source", "rule"), VIOLATIONS)
def test_rule_fires(source: str, rule: str) -> None:
    assert rule in RULES
    found = {v.rule for v in check_source(source)}
    assert rule in found, (source, found)


def test_every_rule_is_exercised() -> None:
    assert {rule for _, rule in VIOLATIONS} == set(RULES)


@pytest.mark.parametrize("entry", HONEST_CANDIDATES, ids=lambda h: f"{h.task}-{h.path.stem}")
def test_honest_sources_are_clean(entry: object) -> None:
    assert check_source(entry.path.read_text()) == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("source", [
    "import kernelproof_no_such_module",  # missing modules are left to fail at import (import_error)
    "from __future__ import annotations\nimport functools\nimport math\nimport torch.nn.functional as F",
    "class Launcher:\n    def __init__(self):\n        self.cache = {}\n    def __call__(self, x):\n        return x",
    '"""A docstring may mention __globals__ or kernelproof."""',
    "import torch\ndef f(x: torch.Tensor) -> torch.Tensor:\n    return torch.empty_like(x).contiguous()",
    "import triton\nfrom triton.runtime import driver\nsms = driver.active.utils",
    "def candidat(:\n",  # a syntax error is the loader's to report
])
def test_allowed_constructs(source: str) -> None:
    assert check_source(source) == []


def test_violation_names_rule_and_line() -> None:
    (v,) = check_source("x = 1\nimport gc\n")
    assert (v.rule, v.line, str(v)) == ("no-introspection", 2, "no-introspection (line 2): import gc")
    assert POLICY_VERSION.startswith("kernelproof.policy.v")
