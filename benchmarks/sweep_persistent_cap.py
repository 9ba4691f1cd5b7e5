"""kernel_sweep.py family `softmax_persistent_cap`: the persistent register kernels' planned launch, whose grid stops
at the programs an SM its build holds from the second launch on where the plan's count would end on a part-full wave
(softmax._Persistent), against the same launch on the plan's whole grid (the extra programs later waves) and on what
the SMs hold (whole waves included), at the widths whose sm_90 builds hold fewer than planned (4096+1024 lanes on 4
warps: 5 of 8; 4096+2048 on 8 warps: 4 of 8; three parts on 4 warps: 4 of 8; 8192 lanes on 8 warps: 3 of 8; the
16-warp windows: 1 of 2) and ones that hold them all (3001 in both dtypes: fp16's windows on lines capped at 64
registers, _LINE_MAXNREG)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial
from sweep_resident import _correct_twice

from kernelproof_core.kernels import softmax

SHAPES = ((8192, 3001), (4096, 2500), (4096, 4500), (2048, 4500), (4096, 5500), (4096, 6601), (2770, 7294),
          (4096, 7801), (1723, 25249), (2048, 20001), (700, 28001))


def softmax_persistent_cap_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """At each shape the planned launch, then the same kernel and meta on the plan's whole grid and on what its
    build lets the SMs hold (learned by one launch here); each checked against fp32 twice."""
    for m, n in SHAPES:
        x = torch.randn(m, n, dtype=dtype, device=device) * 4
        y, ref, moved = torch.empty_like(x), torch.softmax(x.float(), -1), 4 * m * n
        launch, meta = softmax._plan(m, n, n, x.element_size(), device, dtype)  # type: ignore[misc]
        if not isinstance(launch, softmax._Persistent):
            print(f"softmax.persistent_cap {m}x{n}: not a persistent launch", flush=True)
            continue
        launch(x, y, m, n, n, **meta)  # learns what the build holds
        sms = softmax._num_sms(device)
        held = softmax._RESIDENT[(launch.kernel.fn.__name__, tuple(sorted(meta.items())), x.dtype, x.device)]
        label = (f"WINDOW={meta['WINDOW']}+{meta['PART1']}+{meta['PART2']} warps={meta['num_warps']} "
                 f"TS={meta.get('THREAD_STATS', 0)} LINE={meta.get('LINE', 0)} planned={launch.programs // sms} "
                 f"held={held}")
        yield ("softmax.planned", (m, n), f"runs={launch.grid(x, **meta) // sms} {label}",
               partial(softmax.candidate, x), moved, True)
        for name, grid in (("whole_grid", launch.programs), ("held", min(launch.programs, held * sms))):
            run = partial(launch.kernel[(grid,)], x, y, m, n, n, **meta)
            if _correct_twice(run, y, ref, f"softmax.persistent_cap {m}x{n} {name}"):
                yield ("softmax.persistent_cap", (m, n), f"{name} {label}", run, moved, False)
