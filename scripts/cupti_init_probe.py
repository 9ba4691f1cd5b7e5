#!/usr/bin/env python3
"""How long CUDA context creation and the first and later torch.profiler (CUPTI) sessions take in a fresh process,
with PyTorch's default CUPTI teardown and with TEARDOWN_CUPTI=0. Used to find where a sandboxed child's start-up
time goes (evidence/h200/2026-11-30_checks/). Needs CUDA."""
import os
import subprocess
import sys

CODE = r'''
import time, torch
from torch.profiler import profile, ProfilerActivity
t=time.perf_counter(); torch.zeros(1, device="cuda"); torch.cuda.synchronize(); t0=time.perf_counter()
out=[("ctx", t0-t)]
for i in range(3):
    a=time.perf_counter(); p=profile(activities=[ProfilerActivity.CUDA]); p.__enter__(); b=time.perf_counter()
    torch.zeros(1024, device="cuda").add_(1); torch.cuda.synchronize(); c=time.perf_counter()
    p.__exit__(None, None, None); d=time.perf_counter(); ev=len(p.events()); e=time.perf_counter()
    out += [(f"s{i}.enter", b-a), (f"s{i}.exit", d-c), (f"s{i}.events", e-d)]
print(" ".join(f"{k}={v:.3f}" for k, v in out))
'''
for env in ({}, {"TEARDOWN_CUPTI": "0"}):
    r = subprocess.run([sys.executable, "-c", CODE], env={**os.environ, **env}, capture_output=True, text=True)
    print(env or "default", r.stdout.strip(), r.stderr.strip()[-300:])
