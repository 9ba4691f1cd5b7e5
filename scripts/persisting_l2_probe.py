#!/usr/bin/env python3
"""What this GPU's driver does with persisting-L2 limits, in a fresh process: the device's maximum, the default limit,
and for requests of 4 MiB, 32 MiB, the maximum and 1 TiB the CUresult and the limit read back. The l2_persistence
exploit and the harness's check (integrity.plausibility.PersistingL2) rely on a nonzero limit reading back nonzero;
gpu-check's env stage runs this so a device that clamps or refuses differently shows in the evidence. Needs CUDA."""
import ctypes
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.integrity.plausibility import CU_LIMIT_PERSISTING_L2_CACHE_SIZE, PersistingL2

torch.cuda.synchronize()
l2 = PersistingL2()
cuda = ctypes.CDLL("libcuda.so.1")
most = l2.max_bytes()
print(f"device {torch.cuda.get_device_name()}: L2 {torch.cuda.get_device_properties(0).L2_cache_size} bytes, "
      f"max persisting {most}, default limit {l2.limit()}, context {l2.context()}")
for request in (4 << 20, 32 << 20, most or 0, 1 << 40):
    status = cuda.cuCtxSetLimit(ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(request))
    print(f"request {request:>15} bytes: CUresult {status}, limit now {l2.limit()}")
    l2.disable()
print(f"after disable: limit {l2.limit()}")
