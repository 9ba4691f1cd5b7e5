"""Built-in softmax candidate: row-wise softmax over the last dim; max-subtracted, FP32 exp and sum.

Softmax is memory-bound, so each path is chosen to touch HBM as few times as possible:
  * N <= 32768: a row fits in registers, so one read and one write. Narrow rows are packed several to a
    program (a 2-D tile of about 8192 elements; 2048 on 4 warps for 16-bit rows of 512-2048) so short rows still
    give each program real work.
  * 16384 < N <= 32768: one or two rows fit per SM, so a persistent grid walks rows, each program loading its
    next row before reducing and storing the current one (72-77% of copy bandwidth on the H200 without it), through
    the output's vector-aligned windows whatever N's alignment (realigned path; H200: 79-87% at unaligned widths,
    40-41% addressed row by row). Unaligned 16-bit rows of 2049-16384 take it too, and aligned ones of 4097-16383,
    their window cut in up to three power-of-two parts (9554: 8192+2048 lanes, not 16384). A row over 16384 whose
    window would double (unaligned, just below 32768) is addressed row by row (pipelined path). On the windows the
    H200 measured it faster (_THREAD_STATS_WINDOWS), a row's max and sum take one CTA-wide reduction, not two
    (THREAD_STATS: each thread's own max and sum, merged by warp, then across warps; H200 bf16: 2048 x 32000 91.1% of
    copy against 89.5%, 2048 x 22001 85.7% against 79.4%). 16-bit rows read x as 32-bit words, two elements each,
    split where used (WORDS: fp16 THREAD_STATS no longer spills; H200 fp16 2048 x 32000 89.9% against 87.8%, 4096 x
    20480 90.3% against 84.5%, 8192 x 8191 86.7% against 75.3%; not bf16's 32768-lane window on aligned rows). A
    THREAD_STATS build that holds more registers than its config's programs per SM allow resident launches fewer
    (_THREAD_STATS_PER_SM). Unaligned 16-bit rows of 16378-16383 (spans past 16384) take the wider rows' config.
  * 16-bit rows wider than 32768 on a GPU, contiguous (any width) or with rows and stride multiples of 2 elements
    (resident path): each row held in shared memory (see _softmax_resident; H200: 84% of copy at 65536 wide with
    half the programs staggered, 84% at 40000, 77% at 131072, against 66-71% on the split and staged paths);
    contiguous rows whose width is not a multiple of 8 through their vector windows (REALIGN: 68-78% at
    33508-65535, 71% at 131071, against 42-66%).
  * other rows of 32769-65536 on a GPU (split path: fp32 rows, odd 16-bit rows with padding): one program per chunk
    of a row (16 KB; fp32 and unaligned 16-bit rows cut it from the row's vector window, 8 KB for 16-bit), held in
    registers from load to store; programs publish (max, sum of exp) on a per-row counter, wait for their row's
    siblings and normalise in place: one HBM read and one write. H200: 60-67% of copy for odd 16-bit widths, fp32
    80-87%.
  * other wide rows, or under the interpreter (which runs programs one after another, so siblings never meet): one
    launch of programs owning a 16 KB chunk each, rows in batches of ~8 MB: a batch's partials programs reduce their
    chunks to (max, sum of exp), its normalise programs (launched after the next batch's partials) merge a row's
    partials and rewrite their chunk, re-read from L2. HBM sees one read and one write.
Masked lanes read -inf, so they vanish from both the max and the sum. Configs come from a fixed heuristic, not
autotuning: the first call is cheap and every run picks the same kernels. Reductions have a fixed order, so the
output is bit-for-bit deterministic. One file, over the usual module size: a candidate is a single file.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp

_MAX_FUSED_N = 32768  # widest row held in registers (32 fp32 values per thread at 32 warps)
_PIPELINED_MIN_N = 16384  # wider rows (up to _MAX_FUSED_N) take the realigned or pipelined path
_PIPELINED_PER_SM, _PIPELINED_WARPS = 2, 16  # persistent programs per SM, warps per program (kernel_sweep.py)
_TILE = 8192  # elements per program for the fused path
# Realigned path: (programs per SM, warps, FAST) per dtype for rows wider than _PIPELINED_MIN_N whose window is their
# own tile, contiguous or padded; 16-bit rows of 2049-16384 padded by whole vectors take it when unaligned, and when
# aligned above 4096 where the window's parts (_parts) idle fewer lanes than the row kernel's power-of-two tile, on
# _narrow_config. H200, CUPTI (kernel_sweep.py --only softmax_realigned(_narrow, _parts); docs/TASKS.md): bf16/fp16
# 79% of copy at 1723 x 25249, 86% at 2048 x 32001, 37-87% padded (31-85% row by row); fp32 62-69% with FAST
# (22-52%); 16-bit rows of 3001-12901 72-76% (52-63%); in parts 71% at 9554 (52% on one 16384 window), 75% at 12345
# (65%), 79% and 86% at aligned 9600 and 12288 (66%, 76% on the row kernel). FAST, 32 warps: -1 to -12 on 16-bit.
_REALIGNED_CONFIG = {torch.bfloat16: (2, 16, False), torch.float16: (2, 16, False), torch.float32: (2, 16, True)}
_REALIGNED_NARROW_MIN_N, _REALIGNED_SMALL, _REALIGNED_SMALL_WINDOW = 2048, (8, 8, False), 8192
# 16-bit rows whose padding is not whole vectors (x's rows start off the output's vector grid, so x is read at most
# ALIGN_X elements at a time): the realigned kernel on 8 warps, the window in parts up to _MAX_FUSED_N lanes (one
# power-of-two window of 32768 spills on 8 and 16 warps), one program an SM over 16384 lanes, two from 8193, and
# _narrow_config's up to 8192 (rows of 2049 and more). H200 (bf16, CUPTI, kernel_sweep.py --cupti --only
# softmax_padded, evidence/h200/2026-12-02_padded_parts/1_*, 2_*): 1029 x 16655 padded by 3 34.1 us on 16384+2048
# lanes against 50.1 planned before (one 32768 window, 2 per SM, 16 warps) and torch.compile's 67.2; 700 x 24001
# 31.9 against 42.2; 1024 x 20000 37.3 against 52.5; on the row kernel before, 1500 x 12001 23.0 against 31.6,
# 2048 x 9001 30.0 against 38.7, 4096 x 5001 30.3 against 38.6, 3000 x 7001 27.4 against 34.1, 2048 x 8001 22.8
# against 25.7, and level at 4096 x 3001 (21.1 against 21.5) and 8192 x 2501 (37.3 against 37.5).
_REALIGNED_PADDED_WIDE, _REALIGNED_PADDED_MID = (1, 8, False), (2, 8, False)
# PF_L1 for those rows on a GPU (the next row's lines prefetched into L1 instead of its values held in registers:
# fewer registers, so more programs fit an SM) where it won in kernel_sweep.py --cupti --only softmax_padded
# (H200, bf16, CUPTI, evidence/h200/2026-12-02_padded_parts/8_*, one run): windows in parts of 16385-20480 lanes on
# 8 warps, 2 programs an SM (1029 x 16655 padded by 3 26.3 us against 34.1, 61.3% of copy; 1024 x 20000 31.3
# against 37.2); one 32768-lane window on 16 warps, one an SM (620 x 30001 34.3 against 38.2); one 4096-lane window
# on 4 warps, 8 an SM (4096 x 3001 18.4 against 21.2 on 2048+1024 lanes, 8192 x 2501 30.7 against 36.8). It lost
# at 24576 lanes (700 x 24001 37.5 against 32.0: two programs do not fit), at 5001-7001 and at 12001; 9001 and 8001
# gained 5-11% on configs not planned here.
_PF_L1_PARTS_MAX_LANES, _PF_L1_WIDE, _PF_L1_ONE_WINDOW = 20480, (2, 8, False), (1, 16, False)
_PF_L1_NARROW_WINDOW, _PF_L1_NARROW = 4096, (8, 4, False)
# and on 8192+1024 lanes (rows of 8186-9209), 8 warps, 3 programs an SM (64 registers against 127: four fit): 2048 x
# 9001 padded by 5 26.9 us against 29.7 (sweep softmax_mid, evidence/h200/2026-12-02_pf_l1_plan/3_*; 26.7 against
# 30.3 on 8 an SM in 1_*).
_PF_L1_MID_LANES, _PF_L1_MID = 9216, (3, 8, False)
# and on one 8192-lane window (rows of 7162-8192), 8 warps, 8 an SM: 2048 x 8001 padded by 6 22.0 and 22.3 us against
# 23.1 and 23.3 (padded_parts/8_*, pf_l1_plan/1_*). Planned after those runs, not yet timed through the built-in.
_PF_L1_SMALL_WINDOW, _PF_L1_SMALL = 8192, (8, 8, False)
# THREAD_STATS (each thread's own max and sum, one CTA-wide reduction a row; _softmax_realigned) where it measured
# faster. H200, CUPTI, kernel_sweep.py --cupti --only softmax_exp_forms (evidence/h200/2026-12-04_thread_stats/7_*,
# 8_*; the shipped form's sm_90 SASS is the one timed there as "thread_stats warp_first ftz"), against the plan before:
# bf16, every window swept: 2048 x 32000 91.1% of copy against 89.5%, 2048 x 32768 91.1% against 89.1%, 1723 x 25249
# 82.1% against 78.9%, 1024 x 32768 87.0% against 81.0%, 2048 x 16377 79.1% against 72.9%, 2048 x 22001 85.7%
# against 79.4% (16384+8192 lanes), 4096 x 20480 90.6% against 86.2% (16384+4096), 4096 x 8185 85.7% against 80.1%
# (8 warps), 8192 x 8191 85.4% against 76.0% (8192+2048 lanes against 8192+1024), 3921 x 6608 86.7% against 84.1%
# (4 warps, three parts); 25 shapes, none slower. fp16 on one 16384-lane window (2048 x 16377 78.9% against 73.1%)
# and on 16384+8192 lanes (2048 x 22001 86.4% against 78.9%); on the 32768-lane window it spills (52 bytes of spill
# stores) and lost 13-19 points (2048 x 32000 69.4% against 88.7%), on 4 and 8 warps it was behind at 3 of 7 shapes
# (8192 x 8191 73.4% against 75.2%) and ahead at 4. Of those, fp16 takes it on the two 4-warp windows where it led in
# all three runs that timed the shipped form (2026-12-04_thread_stats/8_*, 2026-12-04_half_exps/1_*, 2_*): 3921 x 6608
# on 4096+2048+1024 86.2-86.3% against 82.4-83.6%, 1673 x 3185 on 4096 lanes 58.1-59.8% against 56.1-56.9%; elsewhere
# on 4 and 8 warps it was level or mixed (within -2.3 to +1.0 points), so fp16 keeps the two reductions there. Rows
# of 16385-24576 positions (16 warps) take two parts of whole vectors a thread (_thread_parts: 16384+4096 or
# 16384+8192 lanes) instead of one 32768-lane window. Planned on the windows swept only: per dtype and warps, the
# windows that take it. With x read as words (WORDS), fp16's THREAD_STATS build on 32768 lanes no longer spills and
# 16384+4096 no longer needs HALF_EXPS (kernel_sweep.py --cupti --only softmax_words,
# evidence/h200/2026-12-04_words/1_*, against the plan before): 2048 x 32000 89.9% against 87.8%, 2048 x 32768 89.8%
# against 87.8%, 4096 x 32768 90.9% against 89.2%, 1723 x 25249 83.8% against 78.7%, 793 x 28518 76.5% against
# 68.5%; 4096 x 20480 90.3% against 84.5% (HALF_EXPS with words 89.7%), 2048 x 18001 80.4% against 73.0%, 1024 x
# 20001 75.4% against 70.2%, 700 x 17001 63.7% against 59.0%: fp16 takes both windows.
# Windows under 16384 lanes on 16 warps (8192+4096: rows of 8193-12288 positions planned on 8192+2048 or 8192+4096)
# and three parts on 8 warps (8192+4096+2048: rows of 12289-14336 positions, and 12345's 8192+4096+1024), both dtypes
# (kernel_sweep.py --cupti --only softmax_thread_stats_unswept, evidence/h200/2026-12-04_thread_stats_windows/1_*,
# against the plan before, bf16 / fp16): 1940 x 12074 (the campaign's hidden_spike) 79.7 / 78.8% against 76.2 /
# 76.3%, 2048 x 12001 80.4 / 80.8% against 77.9 / 78.4%, 4096 x 12288 87.8 / 88.0% against 85.8 / 85.4%, 2048 x
# 10001 77.9 / 78.0% against 73.1 / 73.5%, 4096 x 10240 86.4 / 86.9% against 82.0 / 83.0%; three parts 1960 x 13778
# 82.0 / 80.0% against 74.8 / 75.4%, 2000 x 12345 79.8 / 79.5% against 77.4 / 77.2%, 2048 x 14001 81.8 / 81.7%
# against 77.7 / 78.1% (bf16 reading elements there, fp16 words: _WORDLESS_WINDOWS).
_THREAD_STATS_WINDOWS: dict[torch.dtype, dict[int, tuple[tuple[int, int, int], ...]]] = {
    torch.bfloat16: {16: ((32768, 0, 0), (16384, 0, 0), (16384, 4096, 0), (16384, 8192, 0), (8192, 4096, 0)),
                     8: ((8192, 0, 0), (8192, 2048, 0), (8192, 4096, 2048)),
                     4: ((4096, 0, 0), (2048, 1024, 0), (4096, 1024, 0), (4096, 2048, 1024))},
    torch.float16: {16: ((32768, 0, 0), (16384, 0, 0), (16384, 4096, 0), (16384, 8192, 0), (8192, 4096, 0)),
                    8: ((8192, 4096, 2048),),
                    4: ((4096, 0, 0), (4096, 2048, 1024))}}
# Windows where THREAD_STATS holds its exponentials in fp16 (HALF_EXPS), per dtype and warps: fp16 rows of 16385-20480
# positions, whose THREAD_STATS build holds 106 registers and loses to the two-reduction form on 32768 lanes. H200
# (CUPTI, evidence/h200/2026-12-04_half_exps/1_*): 1024 x 20001 70.6% of copy against 61.4% planned before, 2048 x
# 18001 73.7% against 62.5%, 4096 x 20480 84.2% against 75.1%, 700 x 17001 59.8% against 46.8%. It lost on every
# other window swept, both dtypes (on 32768 lanes by 10-12 points: fp16 2048 x 32000 78.4% against 88.2%). Planned
# from f60a2e2 until WORDS, which beat it there without it (above); none now, the option stays (swept).
_HALF_EXPS_WINDOWS: dict[torch.dtype, dict[int, tuple[tuple[int, int, int], ...]]] = {}
# THREAD_STATS windows that read x as elements, not words, where the rows lie on the vector grid (shift 0): bf16's
# 32768 lanes, where words lost at 2048 rows in both looks (H200, CUPTI: 2048 x 32000 91.2% of copy against 89.9%,
# 2048 x 32768 90.5% against 89.9%, evidence/h200/2026-12-04_words/2_*; 91.3/91.2% against 90.9/90.8% in 1_*) and
# 4096 x 32768 keeps 91.5% (91.8% with words). Unaligned rows on it gain from words (1723 x 25249 84.2% against 82.1%).
_WORDLESS_ALIGNED_WINDOWS: dict[torch.dtype, tuple[tuple[int, int, int], ...]] = {torch.bfloat16: ((32768, 0, 0),)}
# THREAD_STATS windows that read x as elements wherever its rows start: bf16's three parts on 8 warps, where words
# were behind at all three shapes swept (1960 x 13778 80.2% against 82.0%, 2000 x 12345 78.4% against 79.8%, 2048 x
# 14001 80.8% against 81.8%) and fp16's words ahead at all three (80.0 / 79.5 / 81.7% against 76.6 / 73.9 / 79.1%;
# thread_stats_windows/1_*).
_WORDLESS_WINDOWS: dict[torch.dtype, tuple[tuple[int, int, int], ...]] = {torch.bfloat16: ((8192, 4096, 2048),)}
# Persistent programs per SM for THREAD_STATS windows whose build holds more registers than the config's count leaves
# resident: one 4096-lane window on 4 warps holds 80 registers a thread, so 6 programs fit an SM, not the planned 8
# (which ran as two waves). H200, CUPTI, sweep softmax_grid (evidence/h200/2026-12-04_words/3_*), 8 against 6 an SM,
# fp16 / bf16: 6000 x 3333 72.8 / 73.2% against 82.0 / 83.0%, 1673 x 3185 59.1 / 59.3% against 67.8 / 67.3%, 4096 x
# 3185 71.7 / 72.4% against 76.4 / 76.4%, 2500 x 3901 72.2 / 70.2% against 76.4 / 76.4%, 1000 x 4001 56.9 / 56.8%
# against 59.7 / 59.3%. Not on 2048+1024 (8192 x 2731 83.0% against 82.2%), 4096+1024 or 4096+2048+1024 (ties).
_THREAD_STATS_PER_SM: dict[tuple[int, int, int], int] = {(4096, 0, 0): 6}
_REALIGNED_MID = 2  # programs per SM for 16-bit windows of 8193-16384 lanes (_narrow_config picks the warps)
_REALIGNED_TINY_LANES = 5120  # 16-bit windows up to this many lanes run on 4 warps (_narrow_config)
# Aligned 16-bit rows wider than this (and not a power of two) take the realigned kernel where its parts are fewer
# lanes than the row kernel's tile (H200: 4096 x 5000 79.5% of copy against 64.5%, 3921 x 6608 84.6% against 80.3%;
# narrower ones lose: 8192 x 3000 84.5% against 86.7%).
_REALIGNED_ALIGNED_MIN_N = 4096
_MIN_PART = 1024  # smallest part of a realigned window: half the vectors of 8 warps, 16-bit
# 16-bit rows of 512 to 2048 elements: a 2048-element tile on 4 warps (16 per thread), unmasked where the rows allow.
# On the H200 (bf16, CUPTI kernel time, benchmarks/kernel_sweep.py --cupti --only softmax_parity) 8192-element tiles
# on 8 warps reached 81% of copy bandwidth at 65536 x 1024 and 131072 x 512, these 98%; torch.compile 97-99%, 92%.
_NARROW_MIN_N, _NARROW_TILE, _NARROW_WARPS = 512, 2048, 4
# Short 16-bit rows whose accesses are scalar or 4 bytes wide (width and stride not both multiples of 4), padded to
# 128-256 lanes: one warp a program, at most _SHORT_TILE elements (32 a thread; 4096 took 164 registers) and
# about _SHORT_WAVES programs an SM. On the H200 (bf16, CUPTI kernel time, kernel_sweep.py --cupti --only
# softmax_small_rows, evidence/h200/2026-12-02_carry_rms_resident/6_*, 2026-12-02_pending_runs/3_*) 4096 x 127 2.52 us
# against 3.25 on 4 warps with 8 rows a program and eager's 3.02; 8192 x 127 3.39 against 4.81 (eager 4.03); 4096 x
# 255 3.34 against 4.38 (eager 3.79); 16384 x 98 4.50 against 5.27 on 4 warps (eager 6.28), 8192 x 194 3.94 against
# 5.16 (eager 5.57).
_SHORT_MIN_N, _SHORT_MAX_N, _SHORT_TILE, _SHORT_WAVES = 128, 256, 1024, 6
# Short 16-bit rows of 8-byte accesses padded to 64-256 lanes, and of 4-byte accesses padded to 64: 1024-lane tiles on
# 4 warps (8 elements a thread). H200, bf16, CUPTI (same sweeps): 16384 x 100 3.69-3.80 us against 5.04 on the
# 8192-lane tile rule (eager 6.09), 32768 x 100 6.04 against 6.37, 8192 x 196 4.11 against 4.38, 16384 x 60 2.82
# against 3.20, 32768 x 62 4.94 (eager 6.62); one warp a program lost 6-13% at 16384 x 100 and 32768 x 62.
_PACKED_MIN_N, _PACKED_MAX_N, _PACKED_TILE, _PACKED_WARPS = 64, 256, 1024, 4
# Staged path: chunk bytes, batch bytes (a batch, read by its partials programs then re-read by its normalise programs,
# stays in L2 next to the batch after; H200: 50 MB), warps.
_STAGED_CHUNK_BYTES, _STAGED_BATCH_BYTES, _STAGED_WARPS = 16384, 8 << 20, 4
_STAGED_CHUNKS = 1  # chunks per program (benchmarks/kernel_sweep.py tries more: fewer programs and counters)
# Split path (rows wider than _SPLIT_MIN_N, CUDA only): bytes per program chunk and warps per program.
_SPLIT_MIN_N, _SPLIT_MAX_N = _MAX_FUSED_N, 65536  # wider: the staged path is level or ahead (kernel_sweep.py)
_SPLIT_CHUNK_BYTES, _SPLIT_WARPS = 16384, 8
# Unaligned 16-bit rows, and fp32 rows: chunks cut from the output's vector window (REALIGNED), (bytes, warps) per
# element size. H200 (sweep softmax_split_realigned): bf16/fp16 60-67% of copy at 33508-65535 wide (43-58% cut along
# the row; aligned 16-bit rows would lose 9 points), fp32 80-87% at 33508-65536 (70-81%).
_SPLIT_REALIGNED = {2: (8192, 4), 4: (16384, 4)}
# Resident path: shared memory an SM gives rows (H200: 228 KB per SM; the rest is reduction scratch), kept free below
# a smaller GPU's, and the narrowest copy cp.async makes (rows and their stride must be 4-byte aligned).
_RESIDENT_CAP_BYTES, _RESIDENT_RESERVE_BYTES, _MIN_COPY_BYTES = 200 * 1024, 24 * 1024, 4
# One program alone on an SM may take more (a block may have 227 KB on the H200; a few KB stay for scratch): H200,
# sweep softmax_resident_budget, 800 x 104000 80.0% of copy held whole on 16 warps against 70.4% streaming 1 of 13
# chunks on 32, 600 x 110000 76.7% against 73.6%, 512 x 128256 76.4% against 75.1% (14 of 16 chunks held, not 12),
# 1024 x 131072 level (77.9% against 77.7%).
_RESIDENT_SOLO_CAP_BYTES, _RESIDENT_SOLO_RESERVE_BYTES = 224 * 1024, 4 * 1024
# SM clocks half the programs wait before starting, where one 16-warp program per SM holds a whole row: without it
# their stats passes (no HBM traffic) line up. H200 (sweep softmax_stagger): 1024 x 65536 83.5-86.4% of copy against
# 81.3-82.3%, 683 x 98304 76.7-78.6% against 74.1-75.3%, level from 1000 to 5000 clocks; where two programs share an
# SM or 32 warps stream part of the row it lost 1-3 points (evidence/h200/2026-12-01_stagger_prefetch/).
_RESIDENT_STAGGER = 2500
_LOG2E = gl.constexpr(1.4426950408889634)
# Largest |row max| for which the resident kernel folds the max and log2(sum) into one shift (2^(x log2 e - shift)):
# the shift is rounded to fp32 at its own size, an error of up to half its ulp in every exponent (at |max| = 1e5
# about 0.5% of y, at 1e6 about 4%; past 2.36e38 max log2 e is inf). Rows at or past it subtract the max first
# instead. 2048: the ulp is at most 2^-12, under 0.02% of y (16-bit outputs).
_FOLD_MAX = gl.constexpr(2048.0)
# CARRY (planned for every resident launch): the fold keeps the max times log2 e as one fp32 value M, rounded
# once, in every exponent (x log2 e - M by one multiply-add: the product is exact inside it) and log2 of the sum
# apart (one more add an element in the output pass). Every exponent is then off by the same d = max log2 e - M, which
# the sum carries and the output cancels, so offset logits need no second look while 2^d stays finite in the sum:
# |d| <= half M's ulp, 32 below |max| = 2^29 (about 5.4e8); rows past that take SAFE's second look (at 3e37, 2^d
# overflows). On the H200 (bf16, CUPTI; evidence/h200/2026-12-02_carry_rms_resident/1_*) rows offset by 1e8 ran 2.3-2.9x
# faster than with the second look and 2.4-2.6x faster than eager (309 x 43846: 23.7 us, eager 57.4); ordinary rows
# took from 0.7% less to 3.6% more time than the fold without CARRY (three runs, 1_* to 3_*).
_CARRY_MAX = gl.constexpr(float(2**29))
# KEEP (resident launches): the stats pass writes each resident chunk's exponentials p = 2^(x log2 e - M_c) back over
# x as fp16 (p in [0, 1]; M_c the thread's running max times log2 e, kept per chunk in registers), so the output pass
# takes one exponential a thread a chunk, y = p 2^(M_c - M - log2 sum), instead of one an element: MUFU work on a
# 65536-wide row drops from 289 to 177 instructions a thread (sm_90 build). It rounds twice (fp16, then the output
# dtype): at most u(fp16) + u(output) relative, within both 16-bit policies (4u).
_RESIDENT_KEEP = False
# MAXFIRST (resident launches of 16-bit rows without KEEP or PARTS): the row's max first, then one exponential an
# element kept as fp16 over x, the output pass a multiply (2.26 -> 1.01 MUFU instructions an element at 65536 in the
# sm_90 build, no spills under PAIR). Correct on an H100 (GPU tolerance tests) but behind the plan there at 65536-131072
# (1024 x 65536 90.5% of copy against 91.4%; kernel_sweep.py --only softmax_resident_maxfirst,
# evidence/h100/2026-12-05_dependent_launch/3_*), and on the H200 with FREE planned further behind (1024 x 65536 80.7%
# against 87.2, 1024 x 131072 65.8-69.7 against 82.4, 1991 x 33508 74.6 against 76.8; evidence/h200/
# 2026-12-06_rms_resident_on_h200/3_*): off.
_RESIDENT_MAXFIRST = False
# FREE (resident launches whose copies are whole 16-byte vectors of x): the slot copies as inline-PTX cp.async and the
# waits without the CTA barrier Gluon puts after them. Each thread reads back only the vector it copied, after its
# own wait, so no barrier orders anything; Triton's barrier pass cannot tell (one slot buffer, indices it does not
# separate) and put two CTA barriers a chunk in the output pass and one after every wait: 58 a 65536-wide row in the
# sm_90 build, 10 with FREE (the row's reductions). Barrier stalls were the second stall reason on an H100 (4.5 cycles
# an issue at 1024 x 65536, hardware_counters.py, evidence/h100/2026-12-06_harness_0_9/5_*). Needs the slots at the
# start of shared memory (global_smem + 0: test_resident_free_compiles_for_sm90_without_barriers_in_a_row pins it).
# Same copies and arithmetic, so the same bytes as without it (a GPU test compares them). H100, CUPTI, against the
# same launch without it (kernel_sweep.py --only softmax_resident_free, evidence/h100/2026-12-06_harness_0_9/8_*,
# 9_*), bf16 / fp16 points of copy: 1024 x 65536 +1.5 / +1.2, 1024 x 131072 +1.2 / +1.5, 512 x 128256 +3.8 / +2.4,
# 1024 x 53248 +1.1 / +0.8, 400 x 49196 +5.1 / +4.2, 1991 x 33508 +0.6 / +0.4; behind only at three programs an SM
# capped to 85 registers (not a plan). H200 (evidence/h200/2026-12-06_rms_resident_on_h200/3_*, 7_*), bf16 / fp16:
# 1024 x 65536 +3.6 / +4.4, 2048 x 65536 +3.6 / +3.4, 1024 x 131072 +7.2 / +6.7, 512 x 128256 +7.3 / +5.1, 1024 x
# 53248 +1.4 / +1.4, 400 x 49196 +4.3 / +4.1, 1991 x 33508 level.
_RESIDENT_FREE = True
# HALVES (experiment, off): FREE on 16-bit rows not through windows whose width and stride are multiples of 4 but
# not 8 (on the 8-byte grid): each 16-byte vector copied as two 8-byte cp.async into its place, so such rows run the
# aligned kernel with FREE. Built to test whether REALIGN's windows (117-128 registers against 64, 1.16x the
# instructions) cost contiguous rows on the 8-byte grid their 4.4-4.7 us a launch at 400 x 49196 (H100,
# evidence/h100/2026-12-06_rms_resident/1_*): they do not. H100, CUPTI, bf16 (kernel_sweep.py --only
# softmax_resident_halves, evidence/h100/2026-12-06_fifteenth/5_*): HALVES against the planned windows 1991 x 33508
# 82.9% / 84.8, 400 x 49196 60.3 / 74.6, 512 x 50260 71.5 / 81.1, 1024 x 65532 81.5 / 82.4, 1024 x 131068 75.4 / 85.3
# (the aligned kernel with Gluon's 8-byte copies 82.3, 63.0, 75.7, 79.8, 67.6): 16-byte copies through windows beat
# 8-byte ones on whole vectors, so contiguous rows keep REALIGN. On padded rows (no windows: the aligned kernel with
# Gluon's 8-byte copies is the plan) HALVES led at 1024 x 40000 (stride 40004) 88.8% against 86.1 (fp16 91.0 / 87.8),
# but behind that same kernel at 400-512 rows above (-2.7, -4.2) and level at 2048 x 32772: one padded shape is not
# enough to plan it, and no campaign case has such rows (hidden_odd pads 1-2 elements).
_RESIDENT_HALVES = False
# LINE (planned; 0 = off): REALIGN's windows start on a 128-byte line instead of a 16-byte vector. The source
# counters at 264 rows (evidence/h100/2026-12-06_sixteenth/5_*) put 24% of the windows' warp samples in issuing the
# first row's copies (lg_throttle, long_scoreboard) against 7% for aligned 49152-wide rows, whose 98304-byte rows
# start on lines: a window starting mid-line has each warp's 512-byte copy (and store) touch 5 lines, not 4. H100,
# CUPTI, both dtypes (evidence/h100/2026-12-06_seventeenth/1_*, family softmax_resident_line): windows on lines
# against windows on vectors at every realigned shape, 264 x 49196 85.0 / 87.1% of copy against 73.0 / 73.8,
# 400 x 49196 81.4 / 80.4 against 74.3 / 73.9, 1024 x 49196 90.7 / 91.5 against 84.3 / 83.7, 1991 x 33508 89.8
# against 84.2, 1024 x 65535 90.1 against 86.0, 1024 x 40001 91.1 against 87.1, 512 x 128257 85.6 against 85.3.
# Family softmax_resident_stride asks the same of aligned rows whose stride starts them mid-line: 3-14 points lost
# (264 x 49152 89.9% at stride 49152, 75.6-82.1 at strides 16-112 bytes past a line). The sum's order differs from
# windows on vectors (each element lands in another thread's running sum), so outputs may differ by a 16-bit step.
# A window on lines spans up to 63 positions more; where that would change the programs an SM, the warps or whether a
# whole row fits shared memory (98 widths in 16385-262143 on the H200: 51138-51193, 114626-114681), the plan keeps
# windows on vectors rather than a config no sweep has timed with LINE.
_LINE_BYTES = 128  # an L2 line: what LINE's windows start on
_RESIDENT_LINE_BYTES = _LINE_BYTES
# LINE on the realigned register kernel (16-bit rows of up to 32768 off the grid, planned where its parts already cover
# the n + 63 lanes a row starting anywhere in a line spans): H100, CUPTI, bf16 (evidence/h100/2026-12-06_eighteenth/
# 1_*, family softmax_realigned_line): 1938 x 13130 (the campaign's hidden_spike draw) 88.5% of copy against 87.2,
# 4096 x 9554 90.2 / 89.0, 3921 x 6608 89.8 / 89.2, 2048 x 20001 91.2 / 91.0, 2000 x 12345 86.1 / 86.5, level at three
# more. Outputs may differ from windows on vectors by a 16-bit step (the sums' order).
_REALIGNED_LINE_BYTES = _LINE_BYTES
# Registers a thread for LINE's build where its edge arithmetic would take it past what the planned programs an SM
# hold, per (WINDOW, PART1, PART2, warps): fp16 rows of 2049-3072 on 2048+1024 lanes, 4 warps, 8 an SM, take 67 with
# LINE (7 held: the grid's last eighth a second wave), 64 without; capped at 64, ptxas keeps every instruction (624)
# and spills nothing (sm_90; bf16's THREAD_STATS build there: 64, 63 capped, the same 568). H200, CUPTI, fp16 8192 x
# 3001: LINE uncapped 72.5% of copy, windows on vectors 83.4 (evidence/h200/2026-12-06_twentieth/3_*).
_LINE_MAXNREG: dict[tuple[int, int, int, int], int] = {(2048, 1024, 0, 4): 64}
# ONE_SHIFT (experiment, off; CARRY without KEEP or MAXFIRST): a row whose |max| is under _FOLD_MAX takes an output
# pass with the max and log2 of the sum in one shift (y = 2^(x log2 e - (M + log2 sum)): one multiply-add an element,
# CARRY's add gone; the shift's rounding, at most 2^-13 in every exponent there, is the fold's documented error);
# rows at or past it keep CARRY's pass (offset logits stay exact). Each row runs one of the two output passes, so the
# kernel holds both. The sm_90 build at 1024 x 65536 (PAIR) has 8 fewer instructions a chunk in the pass ordinary
# rows take. Family softmax_resident_one_shift times it; never run on a GPU.
_RESIDENT_ONE_SHIFT = False
# ANCHOR (planned; CARRY without KEEP, MAXFIRST, PARTS or ONE_SHIFT): the stats pass keeps no running max.
# Each warp takes its anchor once a row, the max of its lanes' first chunk times log2 e rounded once (a shuffle
# reduction), and every element adds 2^(x log2 e - anchor) to its thread's sum: a multiply-add, an exponential and
# an add an element, where CARRY also takes a max an element and rescales its sum every chunk (the row's shift is the
# largest anchor, each thread's sum brought to it once as 2^(log2 sum + anchor - shift)). sm_90 builds, instructions
# an ordinary row runs (benchmarks/sass_counts.py row_loop_opcodes): 8.6-10.8% fewer (1024 x 65536 1730 -> 1548,
# 512 x 128256 1754 -> 1571, 1991 x 33508 through windows 2164 -> 1977), no register more but at 32 warps (62 -> 64).
# An anchor is an element of the row, so what flushes to zero against it is under 2^-126 of that element. A row its
# anchors cannot sum (an element 128 binary orders past its warp's anchor: the sum overflows; a warp whose first chunk
# is all -inf or past _CARRY_MAX; NaN) has no finite sum: CARRY's stats pass runs again over the row it holds
# (_carry_again: shared memory, HOLD's registers, L2), before any of it is written, and SAFE's rule follows as
# CARRY's. On: with its fma fix for offset rows (below, in the stats pass) the built-ins' GPU file passes with it
# planned, and it ran ahead of CARRY at 13 of 16 H100 comparisons (family softmax_resident_anchor; docs/TASKS.md).
_RESIDENT_ANCHOR = True
# PADDED (experiment, off): 16-bit rows wider than a register tile whose row stride puts them off cp.async's 4-byte
# grid (align 1: hidden_odd's padded draws past 32768, which take the split path at 57-61% of copy on the H200) go to
# the resident kernel through windows, x's windows laid by its own stride (the kernel's PADDED). benchmarks/
# hidden_draws.py: such draws reach 64 MB in about 21% of runs. Its first form wrote y by 2-byte stores: correct (25
# GPU tests passed) but it lost on an H100 (family softmax_resident_padded, evidence/h100/2026-12-07_twenty_seventh/
# 2_*): 22-30% of copy against the split's 66-72%, where the planned launch on the same rows made contiguous reached
# 84-93%. Now y goes out in whole 16-byte vectors on its own grid (each thread's window shifted by shuffles and a
# byte permute): in the sm_90 build an ordinary row runs as many stores as REALIGN's but about 30% more
# instructions (630 x 40361: 18.6 an element a thread against 14.1). On an H100 (evidence/h100/2026-12-08_twenty_
# eighth/2_*) its GPU tests pass and it runs level with the split (66-73% of copy against 67-72%), the same rows
# made contiguous 85-93%: off until the realignment costs less (PADDED_AHEAD and PADDED_TAILS test its latency,
# PADDED_LDS its instructions: the shifted vector read at a shifted shared-memory address; not yet run on a GPU).
_RESIDENT_PADDED = False
# FREE's slot addresses rest on where Triton puts the slots (its first shared allocation, at 0), as the rest of this
# kernel rests on Gluon's API: both as of Triton 3.6.0 (pyproject's pin). A host with another Triton runs the build
# test and test_resident_softmax_free_matches_the_plain_kernel_bit_for_bit first (a candidate file cannot read
# triton's version: the static policy refuses dunder attributes); a wrong slot address fails the built-in's own
# correctness gates, never silently.
# Programmatic dependent launch with its wait on the row and realigned kernels (sm_90 on, compiled) where a call moves
# at least _PDL_MIN_BYTES: the next call's launch and first programs overlap this call's last ones, never its memory
# traffic (the per-call fixed cost: benchmarks/NOTES.md, time over copy). H100, fp16, through the harness's timing
# (benchmarks/dependent_launch_gain.py, evidence/h100/2026-12-05_dependent_launch/1_*): 0.6-2.8% faster at 34-268 MB
# (2048 x 32768 97.28 us against 98.04, 1723 x 25249 64.73 against 65.70); rms_norm's 2 MB case was slower.
_PDL, _PDL_MIN_BYTES = True, 8 << 20
# FMA_EXP (experiment, off; 16-bit rows on the realigned kernel, compiled): exponents as 2^(x log2 e - M) by one fused
# multiply-add, M the max times log2 e rounded once, up (_log2e_up), every rescaling between two maxes a power of two
# of their M's difference, as the resident kernel's CARRY does, where the subtract-then-multiply form (tl.exp: two
# instructions, and a denormal fix-up of three more where not ftz) takes three to five. sm_90 builds, instructions on
# an ordinary program's path (benchmarks/sass_counts.py common_path_opcodes), no register more: THREAD_STATS windows
# 5-6% fewer (1723 x 25249 1072 -> 1019, 1938 x 13130 992 -> 929), windows without it 11-20% (padded 1322 x 23450
# 1960 -> 1576, fp16 2770 x 7294 704 -> 581, fp16 8192 x 3001 624 -> 557). Every exponent is off by M's rounding d
# (under M's ulp), which the sums carry and the output cancels; rounded up, no exponent is positive, so nothing
# overflows whatever the max (a thread whose max is a -1e10 mask gets exponentials of 0, as it should beside an
# ordinary max), but a row whose own max reaches about 2^36 would underflow its sum: a program that met a row whose
# max reached _CARRY_MAX (a flag, one instruction) writes such rows again after its loop, from memory, the max
# subtracted first (_rows_again: rare, so small). Off until a GPU sweep (family softmax_fma_exp) says it is faster.
# Compiled only: the interpreter rounds x log2 e at its own size.
_FMA_EXP = False
# Elements a step of FMA_EXP's second look (_rows_again): small code, since it is rare.
_AGAIN_BLOCK = tl.constexpr(256)
# m log2 e rounded once (mul.rn: never fused into a later add), as PTX: the resident kernel's _scaled (Gluon).
_MUL_LOG2E_RN = tl.constexpr("mul.rn.f32 $0, $1, 0f3FB8AA3B;")
# m log2 e rounded once toward +inf (FMA_EXP's _log2e_up): every exponent against it is at most 0, so no exponential
# overflows, whatever the max (a negative product past fp32's range rounds to its lowest finite value, not -inf).
_MUL_LOG2E_RP = tl.constexpr("mul.rp.f32 $0, $1, 0f3FB8AA3B;")
# HOLD (resident launches of rows over the budget): the chunks past the slots are loaded into registers as the row
# starts and kept for the output pass instead of read again (16 warps: 75 registers, 127 with KEEP; no spill at
# 131072, sm_90 build). Warps of such plans: _RESIDENT_STREAM_WARPS (32 measured best without HOLD). Planned for
# aligned 16-bit rows (PAIR's and the streamed ones); with FREE, on the H200 (bf16, CUPTI, kernel_sweep.py --only
# softmax_resident_maxfirst, evidence/h200/2026-12-06_rms_resident_on_h200/3_*): 1024 x 131072 85.4% of copy against
# 82.4 streaming the 2 chunks again, 512 x 128256 82.2 against 79.6 (before FREE it was within a point); --only
# softmax_resident_hold (10_*): 86.3 / 83.2, 82.2 / 80.5, 768 x 120000 83.9 / 83.2. Rows through
# windows (REALIGN) and fp32 rows stream without it (not measured with HOLD).
_RESIDENT_HOLD, _RESIDENT_STREAM_WARPS = True, 32
# PAIR: 16-bit rows on the 16-byte grid too wide for two whole rows in an SM's shared memory but no wider than
# _RESIDENT_PAIR_MAX_BYTES run two 16-warp programs an SM, each keeping 104 KB of its row in slots and the rest in
# registers (HOLD), registers capped at 64 a thread so that both fit. One program an SM reading a 65536-wide row
# before writing it stops near 84% of copy on the H200 whatever it computes (benchmarks/NOTES.md, "What a
# row-at-a-time program can reach"); two overlap one's stats pass with the other's output. Measured on an H100 (sweep
# softmax_resident_pair, CUPTI): 1024 x 65536 91.9% of copy against 90.2% one an SM (bf16 and fp16 alike), 2048 x
# 65536 92.4 / 92.6% against 92.8 / 92.7% (level); KEEP spilled at this cap and was level or behind; rows off the
# grid (REALIGN) spilled at 16 warps (58-77%) and stay one an SM. On the H200 level with one an SM (83.1 / 84.1%
# planned at 1024 x 65536, 82.2-83.1% one an SM in earlier sweeps): kept, ahead on one GPU, behind on none.
_RESIDENT_PAIR_MAX_BYTES, _RESIDENT_PAIR_BUDGET_BYTES, _RESIDENT_PAIR_WARPS = 128 * 1024, 208 * 1024, 16
# The realigned kernel's FAST fold (fp32 rows, whose tolerance is 2e-5): unfused, x log2 e rounded at |x| < 64 is off
# by under 4e-6 of y (at 1000, 4.5e-5: measured under the interpreter).
_FAST_FOLD_MAX = tl.constexpr(64.0)
# WORDS' fill for a masked vector: the int32 word of two 16-bit -infs (fp16 0xfc00, bf16 0xff80), signed.
_FP16_NEG_INF_WORD, _BF16_NEG_INF_WORD = tl.constexpr(-67044352), tl.constexpr(-8323200)
_WAVES, _CPU_SMS = 2, 132  # grids cover this many programs per SM; H200 SMs (grid sizes with no CUDA device)


@functools.cache
def _cuda_sms(index: int) -> int:
    return int(torch.cuda.get_device_properties(index).multi_processor_count)


def _cuda_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def _num_sms(device: torch.device) -> int:
    return _cuda_sms(_cuda_index(device)) if device.type == "cuda" else _CPU_SMS


def _align(elsize: int, *values: int) -> int:
    """Largest power of two (at most one 16-byte vector) that divides every value, in elements."""
    a = max(1, 16 // elsize)
    while a > 1 and any(v % a for v in values):
        a //= 2
    return a


def _warps(tile: int) -> int:
    """About 32 elements per thread: enough loads in flight, few enough registers to never spill (at most 16 warps)."""
    return min(16 if tile >= _MAX_FUSED_N else 32, max(4, tile // 1024))


@triton.jit
def _dependent_start(PDL: tl.constexpr) -> None:
    # A kernel launched with programmatic dependent launch (_PDL): let the next launch start now, then wait until the
    # kernel before this one has finished and its writes are visible, before reading anything.
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()


@triton.jit
def _softmax_rows(x_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr,
                  EVEN: tl.constexpr = False, REREAD: tl.constexpr = False, EVICT: tl.constexpr = False,
                  STREAM: tl.constexpr = False, PDL: tl.constexpr = False) -> None:
    # The host guarantees ALIGN divides N and the row stride; spelling that out lets the compiler vectorise
    # the masked accesses even when N is not a multiple of 16. EVEN (the host guarantees N == BLOCK_N and BLOCK_M
    # divides M): no masks and no row clamping at all. REREAD: the tile is loaded again (from L1/L2) for the
    # output and its exponentials recomputed, instead of holding them in registers across the reductions; fewer
    # registers per thread, more programs per SM in flight. EVICT: x's lines leave L2 first once read for the last
    # time; STREAM: y is written with streaming stores (.cs), which do not displace other lines in L2. PDL (_PDL):
    # launched with launch_pdl, the next launch released at once and the previous kernel's writes waited for.
    _dependent_start(PDL)
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    row0 = tl.program_id(0).to(tl.int64) * BLOCK_M
    cols = tl.arange(0, BLOCK_N)
    if EVEN:
        rows = tl.arange(0, BLOCK_M)
    else:
        # Rows past the end re-read the last row (cached) so no row is all -inf and loads need only the column mask.
        rows = tl.minimum(tl.arange(0, BLOCK_M), (M - 1 - row0).to(tl.int32))
    col_mask = cols < N
    x_ptrs = x_ptr + row0 * stride_x + rows[:, None] * stride_x + cols[None, :]
    if EVEN:
        x = tl.load(x_ptrs, eviction_policy="evict_last" if REREAD else ("evict_first" if EVICT else "")
                    ).to(tl.float32)
    else:
        x = tl.load(x_ptrs, mask=col_mask[None, :], other=float("-inf"),
                    eviction_policy="evict_last" if REREAD else ("evict_first" if EVICT else "")).to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.exp(x - m[:, None])
    inv = 1.0 / tl.sum(e, axis=1)
    if REREAD:
        if EVEN:
            x = tl.load(x_ptrs, eviction_policy="evict_first" if EVICT else "").to(tl.float32)
        else:
            x = tl.load(x_ptrs, mask=col_mask[None, :], other=float("-inf"),
                        eviction_policy="evict_first" if EVICT else "").to(tl.float32)
        e = tl.exp(x - m[:, None])
    y = e * inv[:, None]
    y_ptrs = y_ptr + row0 * N + rows[:, None] * N + cols[None, :]
    if EVEN:
        tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), cache_modifier=".cs" if STREAM else "")
    else:
        store_mask = (tl.arange(0, BLOCK_M) < M - row0)[:, None] & col_mask[None, :]
        tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=store_mask, cache_modifier=".cs" if STREAM else "")


@triton.jit
def _softmax_pipelined(x_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor,
                       BLOCK_N: tl.constexpr, ALIGN: tl.constexpr) -> None:
    # Persistent: program p takes rows p, p + P, ... The next row's loads are issued before the current row is
    # reduced and stored, kept in the input dtype until its turn (one or two programs fit per SM: without it each SM
    # idles HBM through every reduction and store; benchmarks/experimental_kernels.py has the A/B and a packed form).
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    step = tl.num_programs(0)
    row = tl.program_id(0)
    nxt = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=mask & (row < M), other=float("-inf"))
    # while, not range(): Triton 3.6's interpreter cannot iterate range() over a runtime bound under NumPy 2.x.
    while row < M:
        v = nxt
        ahead = row + step
        # past the last row: fully masked, so no memory traffic; the values are never used
        nxt = tl.load(x_ptr + ahead.to(tl.int64) * stride_x + cols, mask=mask & (ahead < M), other=float("-inf"))
        x = v.to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row.to(tl.int64) * N + cols, (e * (1.0 / tl.sum(e, axis=0))).to(y_ptr.dtype.element_ty),
                 mask=mask)
        row += step


@triton.jit
def _edges(shift: tl.tensor, N: tl.tensor, VEC: tl.constexpr,
           LINE: tl.constexpr = 0) -> tuple[tl.tensor, tl.tensor]:
    # Window offsets (2 x VEC) of a row's first and last vectors, and the mask of the row's elements in them that the
    # big tile does not hold (an edge vector wholly inside the row is in it; N > VEC: the two never coincide). LINE:
    # the window starts on a line, so the row's first vector is the one holding `shift`, not the window's first.
    if LINE > 0:
        first = (shift // VEC) * VEC
    else:
        first = 0
    start = tl.where(tl.arange(0, 2)[:, None] == 0, first, ((shift + N - 1) // VEC) * VEC)
    offs = start + tl.arange(0, VEC)[None, :]
    inside = (start >= shift) & (start + VEC <= shift + N)
    return offs, (offs >= shift) & (offs < shift + N) & ~inside


@triton.jit
def _part_vecs(START: tl.constexpr, SIZE: tl.constexpr, VEC: tl.constexpr, THREADS: tl.constexpr) -> tl.tensor:
    # Window offsets of the vectors at positions START .. START + SIZE: one axis, or (THREADS > 0) [THREADS, SIZE /
    # (VEC x THREADS)], vector i x THREADS + t at [t, i], so that axis 1 is the vectors one thread holds (the layout
    # Triton gives 16-byte loads of this shape: threads along axis 0) and reduces without leaving the thread.
    if THREADS > 0:
        vecs = START + (tl.arange(0, THREADS)[:, None] + tl.arange(0, SIZE // (VEC * THREADS))[None, :] * THREADS) * VEC
    else:
        vecs = START + tl.arange(0, SIZE // VEC) * VEC
    return vecs


@triton.jit
def _part_load(at: tl.tensor, START: tl.constexpr, SIZE: tl.constexpr, VEC: tl.constexpr, shift: tl.tensor,
               N: tl.tensor, live: tl.tensor, THREADS: tl.constexpr = 0, WORDS: tl.constexpr = False) -> tl.tensor:
    # Window positions START .. START + SIZE of a row, read vector by vector: the vectors wholly inside the row only.
    # WORDS (16-bit rows whose window starts on a 32-bit word): the vectors as int32 words, two elements each
    # (_unwords), so a row held across an iteration stays two elements a register; a masked word is two -infs.
    vecs = _part_vecs(START, SIZE, VEC, THREADS)
    whole = (vecs >= shift) & (vecs + VEC <= shift + N)
    if WORDS:
        if at.dtype.element_ty == tl.float16:
            fill: tl.constexpr = _FP16_NEG_INF_WORD
        else:
            fill: tl.constexpr = _BF16_NEG_INF_WORD  # type: ignore[no-redef]
        words = at.to(tl.pointer_type(tl.int32), bitcast=True) + tl.expand_dims(vecs // 2, -1)
        v = tl.load(words + tl.arange(0, VEC // 2), mask=tl.expand_dims(whole, -1) & live, other=fill)
    else:
        v = tl.load(at + tl.expand_dims(vecs, -1) + tl.arange(0, VEC), mask=tl.expand_dims(whole, -1) & live,
                    other=float("-inf"))
    return v


@triton.jit
def _unwords(w: tl.tensor, DT: tl.constexpr) -> tl.tensor:
    # _part_load's words as the 16-bit elements they hold, in memory order (the low half first).
    lo = w.to(tl.int16).to(DT, bitcast=True)
    hi = (w >> 16).to(tl.int16).to(DT, bitcast=True)
    # (Triton's code generator takes neither a starred list nor a list held in a variable as a shape)
    return tl.reshape(tl.join(lo, hi), w.shape[:-1] + [w.shape[-1] * 2])  # noqa: RUF005


@triton.jit
def _row_tiles(at: tl.tensor, shift: tl.tensor, N: tl.tensor, live: tl.tensor, WINDOW: tl.constexpr,
               PART1: tl.constexpr, PART2: tl.constexpr, VEC: tl.constexpr,
               THREADS: tl.constexpr = 0, WORDS: tl.constexpr = False,
               LINE: tl.constexpr = 0) -> tuple[tl.tensor, ...]:
    # A row's window parts (an absent part: a placeholder 0) and the row's part of its edge vectors, as
    # _softmax_realigned prefetches them (by thread, THREADS > 0: _part_vecs; WORDS: the parts as words).
    p0 = _part_load(at, 0, WINDOW, VEC, shift, N, live, THREADS, WORDS)
    p1 = 0.0
    p2 = 0.0
    if PART1 > 0:
        p1 = _part_load(at, WINDOW, PART1, VEC, shift, N, live, THREADS, WORDS)
    if PART2 > 0:
        p2 = _part_load(at, WINDOW + PART1, PART2, VEC, shift, N, live, THREADS, WORDS)
    e_offs, e_mask = _edges(shift, N, VEC, LINE)
    return p0, p1, p2, tl.load(at + e_offs, mask=e_mask & live, other=float("-inf"))


@triton.jit
def _prefetch_part(at: tl.tensor, START: tl.constexpr, SIZE: tl.constexpr, shift: tl.tensor, N: tl.tensor) -> None:
    # Ask L1 for the 128-byte lines of x behind window positions START .. START + SIZE of a row (PF_L1): one
    # prefetch a line (64 16-bit elements), each address clamped into the row, so nothing outside x is named.
    pos = tl.minimum(tl.maximum(START + tl.arange(0, SIZE // 64) * 64, shift), shift + N - 1)
    tl.inline_asm_elementwise("prefetch.global.L1 [$1];\n\tmov.u32 $0, 0;", "=r,l", [at + pos], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def _prefetch_row(at: tl.tensor, shift: tl.tensor, N: tl.tensor, WINDOW: tl.constexpr, PART1: tl.constexpr,
                  PART2: tl.constexpr) -> None:
    _prefetch_part(at, 0, WINDOW, shift, N)
    if PART1 > 0:
        _prefetch_part(at, WINDOW, PART1, shift, N)
    if PART2 > 0:
        _prefetch_part(at, WINDOW + PART1, PART2, shift, N)


@triton.jit
def _window_at(x_ptr: tl.tensor, row: tl.tensor, N: tl.tensor, pad: tl.tensor, WBASE: tl.constexpr,
               ALIGN_X: tl.constexpr) -> tuple[tl.tensor, tl.tensor]:
    # x's element at window position 0 of `row`, and where the row begins inside its window's first vector of y (its
    # first WBASE elements: a vector, or a line with LINE).
    start = row.to(tl.int64) * N
    base = (start // WBASE) * WBASE
    return x_ptr + ((row.to(tl.int64) * pad + base) // ALIGN_X) * ALIGN_X, (start - base).to(tl.int32)


@triton.jit
def _part_store(at: tl.tensor, y: tl.tensor, START: tl.constexpr, SIZE: tl.constexpr, VEC: tl.constexpr,
                shift: tl.tensor, N: tl.tensor, THREADS: tl.constexpr = 0) -> None:
    vecs = _part_vecs(START, SIZE, VEC, THREADS)
    whole = (vecs >= shift) & (vecs + VEC <= shift + N)
    tl.store(at + tl.expand_dims(vecs, -1) + tl.arange(0, VEC), y, mask=tl.expand_dims(whole, -1))


@triton.jit
def _exp_ftz(v: tl.tensor) -> tl.tensor:
    # exp(v) as exp2(v log2 e), which Triton lowers to ex2.approx.ftz: no fix-up for results under 2^-126 (they flush
    # to zero, under every tolerance's floor), three instructions fewer than tl.exp's in an sm_90 build.
    return tl.math.exp2(v * 1.4426950408889634)


@triton.jit
def _merge_stats(m1: tl.tensor, s1: tl.tensor, m2: tl.tensor, s2: tl.tensor) -> tuple[tl.tensor, tl.tensor]:
    # Two (max, sum of exp(x - max)) pairs as one, the warps' in THREAD_STATS' reduction; a pair of no elements is
    # (-inf, 0), and two of them stay so.
    m = tl.maximum(m1, m2)
    base = tl.where(m == float("-inf"), 0.0, m)
    return m, s1 * _exp_ftz(m1 - base) + s2 * _exp_ftz(m2 - base)


@triton.jit
def _merge_stats_log2(m1: tl.tensor, s1: tl.tensor, m2: tl.tensor, s2: tl.tensor) -> tuple[tl.tensor, tl.tensor]:
    # _merge_stats for FMA_EXP's pairs, whose maxes are already times log2 e (_log2e_up): 2^ of their difference.
    m = tl.maximum(m1, m2)
    base = tl.where(m == float("-inf"), 0.0, m)
    return m, s1 * tl.math.exp2(m1 - base) + s2 * tl.math.exp2(m2 - base)


@triton.jit
def _log2e_up(m: tl.tensor) -> tl.tensor:
    # m log2 e rounded once to fp32, toward +inf (inline PTX: the compiler may not fuse it into a later add), so that
    # an exponent taken against it by a fused multiply-add and the rescalings between two of them agree exactly, and
    # none is positive: an element at the max gets 2^-d, d under M's ulp (FMA_EXP).
    return tl.inline_asm_elementwise(_MUL_LOG2E_RP, "=r,r", [m], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _exp_against(v: tl.tensor, base: tl.tensor, FMA_EXP: tl.constexpr) -> tl.tensor:
    # exp(v - max): base is the max (or, FMA_EXP, the max times log2 e, _log2e_up), so one fused multiply-add an
    # element, 2^(v log2 e - base), instead of a subtract and a multiply (the product is exact inside the
    # multiply-add, base's rounding common to the thread: see _FMA_EXP for where that stops being finite; compiled
    # only, the interpreter rounds the product at its own size).
    if FMA_EXP:
        e = tl.math.exp2(tl.fma(v, 1.4426950408889634, -base))
    else:
        e = _exp_ftz(v - base)
    return e


@triton.jit
def _rescale(d: tl.tensor, FMA_EXP: tl.constexpr) -> tl.tensor:
    # exp of a difference of two maxes (FMA_EXP: of two maxes times log2 e, so 2^d).
    if FMA_EXP:
        r = tl.math.exp2(d)
    else:
        r = _exp_ftz(d)
    return r


@triton.jit
def _merge_edges(m1: tl.tensor, s1: tl.tensor, m2: tl.tensor, s2: tl.tensor) -> tuple[tl.tensor, tl.tensor]:
    # _merge_stats for the row's pair and its edge vectors' (scalars), with tl.exp: the form the H200 sweep timed.
    m = tl.maximum(m1, m2)
    base = tl.where(m == float("-inf"), 0.0, m)
    return m, s1 * tl.exp(m1 - base) + s2 * tl.exp(m2 - base)


@triton.jit
def _thread_max(x: tl.tensor, v1: tl.tensor, v2: tl.tensor, PART1: tl.constexpr,
                PART2: tl.constexpr) -> tuple[tl.tensor, tl.tensor, tl.tensor]:
    # THREAD_STATS: each thread's max over the vectors it holds of a window's big tile x (fp32, [threads, vectors,
    # VEC]) and its parts v1, v2 as loaded ([threads]: no element leaves its thread), and the parts in fp32 (a part
    # the window does not have: x, a placeholder never used).
    m = tl.max(tl.max(x, axis=2), axis=1)
    x1 = x
    x2 = x
    if PART1 > 0:
        x1 = v1.to(tl.float32)
        m = tl.maximum(m, tl.max(tl.max(x1, axis=2), axis=1))
    if PART2 > 0:
        x2 = v2.to(tl.float32)
        m = tl.maximum(m, tl.max(tl.max(x2, axis=2), axis=1))
    return m, x1, x2


@triton.jit
def _held(e: tl.tensor, HALF: tl.constexpr) -> tl.tensor:
    # THREAD_STATS' exponentials as they wait for the row's (max, sum): fp32, or (HALF_EXPS) rounded to fp16, two a
    # register. Each is exp(x - the thread's max) in [0, 1] and the final scale exp(thread max - row max) / sum is at
    # most 1, so the extra rounding costs about one fp16 ulp of y (rtol is four) and a value flushed to fp16's
    # subnormals is under 2^-24 of y's absolute floor (atol 1e-6); the sums were taken before it, in fp32.
    if HALF:
        held = e.to(tl.float16)
    else:
        held = e
    return held


@triton.jit
def _exp_shifted(x: tl.tensor, m: tl.tensor, FOLD: tl.constexpr) -> tl.tensor:
    # exp(x - m). FOLD 1: as 2^(x log2 e - m log2 e), one multiply-add an element (the caller has checked that |m| is
    # under _FAST_FOLD_MAX); 2 (FMA_EXP): m is already times log2 e (_log2e_up), 2^(x log2 e - m) by one fused
    # multiply-add (_exp_against); else the max subtracted first.
    if FOLD == 2:
        return _exp_against(x, m, True)
    if FOLD:
        return tl.math.exp2(x * 1.4426950408889634 - m * 1.4426950408889634)
    return tl.exp(x - m)


@triton.jit
def _window_exps(x: tl.tensor, x_e: tl.tensor, x1: tl.tensor, x2: tl.tensor, m: tl.tensor, FOLD: tl.constexpr,
                 PART1: tl.constexpr, PART2: tl.constexpr) -> tuple[tl.tensor, tl.tensor, tl.tensor, tl.tensor]:
    # exp(v - m) for each tile of a realigned window (big tile, edges, parts 1 and 2 where the window has them; a
    # missing part's slot returns the big tile's, unused).
    e = _exp_shifted(x, m, FOLD)
    e1 = e
    e2 = e
    if PART1 > 0:
        e1 = _exp_shifted(x1, m, FOLD)
    if PART2 > 0:
        e2 = _exp_shifted(x2, m, FOLD)
    return e, _exp_shifted(x_e, m, FOLD), e1, e2


@triton.jit
def _window_softmax(x: tl.tensor, x_e: tl.tensor, v1: tl.tensor, v2: tl.tensor, y_at: tl.tensor, shift: tl.tensor,
                    N: tl.tensor, WINDOW: tl.constexpr, PART1: tl.constexpr, PART2: tl.constexpr, VEC: tl.constexpr,
                    LINE: tl.constexpr, FAST: tl.constexpr, FMA_EXP: tl.constexpr) -> tl.tensor:
    # One row of _softmax_realigned without THREAD_STATS (x, x_e: the big tile and the edges in fp32; v1, v2: the
    # parts as loaded): the row's max (returned), then its exponentials, their sum, the output.
    m = tl.maximum(tl.max(tl.max(x, axis=1), axis=0), tl.max(tl.max(x_e, axis=1), axis=0))
    x1 = x  # a part this window does not have: a placeholder, never used
    x2 = x
    if PART1 > 0:
        x1 = v1.to(tl.float32)
        m = tl.maximum(m, tl.max(tl.max(x1, axis=1), axis=0))
    if PART2 > 0:
        x2 = v2.to(tl.float32)
        m = tl.maximum(m, tl.max(tl.max(x2, axis=1), axis=0))
    # FAST folds the max into one multiply-add where |max| is under _FAST_FOLD_MAX (a per-row branch, the same for
    # every thread): x log2 e, where the multiply-add is not fused (the interpreter), is rounded at its own size, which
    # fp32's tolerance notices from |max| of a few hundred, and past 2.36e38 it is inf. FMA_EXP: the product is exact
    # inside the multiply-add and the max's rounding (up) common to the row, but 2^-d underflows the sum from |max| of
    # about 2^36, so a row at or past _CARRY_MAX is written again from memory (_rows_again, after the program's
    # rows). Else the max is subtracted first.
    if FMA_EXP:
        e, e_e, e1, e2 = _window_exps(x, x_e, x1, x2, _log2e_up(m), 2, PART1, PART2)
    elif FAST:
        if tl.abs(m) < _FAST_FOLD_MAX:
            e, e_e, e1, e2 = _window_exps(x, x_e, x1, x2, m, True, PART1, PART2)
        else:
            e, e_e, e1, e2 = _window_exps(x, x_e, x1, x2, m, False, PART1, PART2)
    else:
        e, e_e, e1, e2 = _window_exps(x, x_e, x1, x2, m, False, PART1, PART2)
    total = tl.sum(tl.sum(e, axis=1), axis=0) + tl.sum(tl.sum(e_e, axis=1), axis=0)
    if PART1 > 0:
        total += tl.sum(tl.sum(e1, axis=1), axis=0)
    if PART2 > 0:
        total += tl.sum(tl.sum(e2, axis=1), axis=0)
    inv = 1.0 / total
    out: tl.constexpr = y_at.dtype.element_ty
    _part_store(y_at, (e * inv).to(out), 0, WINDOW, VEC, shift, N)
    if PART1 > 0:
        _part_store(y_at, (e1 * inv).to(out), WINDOW, PART1, VEC, shift, N)
    if PART2 > 0:
        _part_store(y_at, (e2 * inv).to(out), WINDOW + PART1, PART2, VEC, shift, N)
    e_offs, e_mask = _edges(shift, N, VEC, LINE)
    tl.store(y_at + e_offs, (e_e * inv).to(out), mask=e_mask)
    return m


@triton.jit
def _rows_again(x_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor,
                BLOCK: tl.constexpr) -> None:
    # FMA_EXP's second look, once a program has done its rows and one of them had a max (times log2 e) at or past
    # _CARRY_MAX (a row of -1e10 masks, logits offset by 1e9): each of the program's rows read again, BLOCK elements
    # a step, and those whose max is past half of it (every one flagged, whichever max it was) written again with the
    # max subtracted first (its sum of exp(x - max), then the output). Rare, so small in code rather than fast; the
    # barrier orders the rows' first stores before these (uniform: every thread has the flag).
    tl.debug_barrier()
    lanes = tl.arange(0, BLOCK)
    row = tl.program_id(0)
    while row < M:
        x_row = x_ptr + row.to(tl.int64) * stride_x
        y_row = y_ptr + row.to(tl.int64) * N
        mv = tl.full([BLOCK], float("-inf"), tl.float32)
        for start in range(0, N, BLOCK):
            v = tl.load(x_row + start + lanes, mask=start + lanes < N, other=float("-inf")).to(tl.float32)
            mv = tl.maximum(mv, v)
        m = tl.max(mv, axis=0)
        if tl.abs(m) >= _CARRY_MAX * 0.5:
            m = tl.where(m == float("-inf"), 0.0, m)
            sv = tl.zeros([BLOCK], tl.float32)
            for start in range(0, N, BLOCK):
                v = tl.load(x_row + start + lanes, mask=start + lanes < N, other=float("-inf")).to(tl.float32)
                sv += tl.exp(v - m)
            inv = 1.0 / tl.sum(sv, axis=0)
            for start in range(0, N, BLOCK):
                v = tl.load(x_row + start + lanes, mask=start + lanes < N, other=float("-inf")).to(tl.float32)
                tl.store(y_row + start + lanes, (tl.exp(v - m) * inv).to(y_row.dtype.element_ty),
                         mask=start + lanes < N)
        row += tl.num_programs(0)


@triton.jit
def _softmax_realigned(x_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor,
                       WINDOW: tl.constexpr, VEC: tl.constexpr, ALIGN_X: tl.constexpr, FAST: tl.constexpr,
                       PART1: tl.constexpr = 0, PART2: tl.constexpr = 0, PF_L1: tl.constexpr = False,
                       THREAD_STATS: tl.constexpr = 0, HALF_EXPS: tl.constexpr = False,
                       WORDS: tl.constexpr = False, PDL: tl.constexpr = False, LINE: tl.constexpr = 0,
                       FMA_EXP: tl.constexpr = False) -> None:
    # Output rows start on a vector boundary only when N is a multiple of VEC; addressed row by row, the rest go
    # scalar (40% of copy bandwidth at 25249 wide on the H200). A row is seen here through the window of whole
    # vectors of y that covers it: the big tiles hold the vectors lying wholly inside the row (masked per vector: no
    # element needs a select), a 2 x VEC tile the row's part of its two edge vectors (element by element). The window
    # is cut in up to three power-of-two parts (WINDOW, PART1, PART2; 0: none), so a row of 9554 spans 10240 lanes,
    # not 16384. x is read at the same window positions; padded rows start elsewhere in their vectors, so their loads
    # vectorise as far as ALIGN_X (a power of two dividing stride_x - N). Nothing outside the row is read, padding
    # and the tensor's end included. Persistent and prefetching like _softmax_pipelined (every tile of the next row
    # is loaded before this row's work). FAST: exp as exp2 of one fused multiply-add (faster for fp32, slower for
    # 16-bit rows). PF_L1 (16-bit, compiled only: the prefetch is inline PTX; planned for some padded rows,
    # _PF_L1_*): instead of holding the next row's values in registers, its lines are prefetched into L1 and the row
    # is read at the top of its iteration, so a program holds one row, not two (fewer registers: more programs fit).
    # Tried and slower at every shape swept (H200, evidence/h200/2026-12-03_prefetch_l2/1_*): the row after next
    # prefetched into L2 as well (2048 x 32000 86.1-88.1% of copy against 89.2%; 1723 x 25249 75% against 79.5%).
    # THREAD_STATS (the program's threads, num_warps x 32; every part at least a vector a thread; with PF_L1 the row
    # is read in the same per-thread layout, so the bits are the same; that pair is swept, not planned): the
    # row's max and sum in one CTA-wide reduction instead of two (max, then the sum of exponentials that needs it:
    # every warp waits at each, and at each part's): each thread takes the max of the vectors it holds, its
    # exponentials against that and their sum; each warp's threads are merged by the warp's max and their sums
    # rescaled to it (shuffles, one exponential a thread), the warps' (max, sum) pairs in one reduction, and each
    # thread scales its exponentials by exp(its max - the row's) / sum. Exponentials as _exp_ftz. Not the bits of the
    # two-reduction form (each exponential is rounded against another max). sm_90 build at 32768 lanes on 16 warps:
    # 1152 instructions a thread against 1280, 3 barriers a row against 6, 77 exponentials against 65, no spills.
    # HALF_EXPS (with THREAD_STATS): the exponentials wait for the merge rounded to fp16, half the registers (_held).
    # WORDS (16-bit, ALIGN_X >= 2, x on a 4-byte boundary: _run checks): the big tiles read as int32 words and split
    # into elements where used (_unwords), so the held next row stays two elements a register where 16-bit loads
    # left ptxas re-packing halves (PRMT) and spilling them (fp16 THREAD_STATS at 32768 lanes: 52 bytes, 1160
    # instructions a thread against 1040 with WORDS; bf16 1152 against 1072). The same bits.
    # PDL (_PDL): as _softmax_rows'. LINE (planned for 16-bit rows where the parts cover it: _lines_where_covered):
    # windows start on a multiple of LINE elements (a 128-byte line) instead of a vector, as the resident kernel's do
    # since they ran 4-14 points ahead that way; the parts must then cover N + LINE - 1 lanes. FMA_EXP (_FMA_EXP,
    # compiled only): every max taken times log2 e once (_log2e_up) and each exponent 2^(x log2 e - that) by one fused
    # multiply-add; the rescalings between maxes are powers of two of their differences.
    WBASE: tl.constexpr = LINE if LINE > 0 else VEC
    tl.static_assert(THREAD_STATS == 0 or ((PART1 == 0 or PART1 >= THREAD_STATS * VEC)
                                           and (PART2 == 0 or PART2 >= THREAD_STATS * VEC)))
    _dependent_start(PDL)
    START2: tl.constexpr = WINDOW + PART1
    pad = stride_x - N
    step = tl.num_programs(0)
    row = tl.program_id(0)
    x_at, shift = _window_at(x_ptr, row, N, pad, WBASE, ALIGN_X)
    if PF_L1:
        _prefetch_row(x_at, shift, N, WINDOW, PART1, PART2)  # row < M: the grid has at most M programs
    else:
        nxt, nxt1, nxt2, nxt_e = _row_tiles(x_at, shift, N, row < M, WINDOW, PART1, PART2, VEC, THREAD_STATS, WORDS,
                                            LINE)
    nxt_shift = shift
    nxt_at = x_at
    again = row < 0  # FMA_EXP: a row of this program needs _rows_again
    while row < M:
        if PF_L1:
            v, v1, v2, v_e = _row_tiles(nxt_at, nxt_shift, N, row < M, WINDOW, PART1, PART2, VEC, THREAD_STATS,
                                            WORDS, LINE)
        else:
            v, v1, v2, v_e = nxt, nxt1, nxt2, nxt_e
        shift = nxt_shift
        base = (row.to(tl.int64) * N // WBASE) * WBASE
        ahead = row + step
        a_at, nxt_shift = _window_at(x_ptr, ahead, N, pad, WBASE, ALIGN_X)
        if PF_L1:
            if ahead < M:
                _prefetch_row(a_at, nxt_shift, N, WINDOW, PART1, PART2)
            nxt_at = a_at
        else:
            # past the last row: fully masked, so no memory traffic; the values are never used
            nxt, nxt1, nxt2, nxt_e = _row_tiles(a_at, nxt_shift, N, ahead < M, WINDOW, PART1, PART2, VEC,
                                                THREAD_STATS, WORDS, LINE)
        if WORDS:
            v = _unwords(v, x_ptr.dtype.element_ty)
            if PART1 > 0:
                v1 = _unwords(v1, x_ptr.dtype.element_ty)
            if PART2 > 0:
                v2 = _unwords(v2, x_ptr.dtype.element_ty)
        x = v.to(tl.float32)
        x_e = v_e.to(tl.float32)
        y_at = y_ptr + base
        if THREAD_STATS > 0:
            mt, x1, x2 = _thread_max(x, v1, v2, PART1, PART2)
            if FMA_EXP:  # every max below is times log2 e, rounded once
                mt = _log2e_up(mt)
            mt_use = tl.where(mt == float("-inf"), 0.0, mt)[:, None, None]
            e = _exp_against(x, mt_use, FMA_EXP)
            st = tl.sum(tl.sum(e, axis=2), axis=1)
            e = _held(e, HALF_EXPS)
            if PART1 > 0:
                e1 = _exp_against(x1, mt_use, FMA_EXP)
                st += tl.sum(tl.sum(e1, axis=2), axis=1)
                e1 = _held(e1, HALF_EXPS)
            if PART2 > 0:
                e2 = _exp_against(x2, mt_use, FMA_EXP)
                st += tl.sum(tl.sum(e2, axis=2), axis=1)
                e2 = _held(e2, HALF_EXPS)
            # each warp's max and its threads' sums rescaled to it (within the warp: [warps, 32] is the threads'
            # own layout), then the warps' pairs merged in the one CTA-wide reduction
            mw = tl.reshape(mt, [THREAD_STATS // 32, 32])
            wm = tl.max(mw, axis=1)
            ws = tl.sum(tl.reshape(st, [THREAD_STATS // 32, 32]) * _rescale(
                mw - tl.where(wm == float("-inf"), 0.0, wm)[:, None], FMA_EXP), axis=1)
            m_e = tl.max(tl.max(x_e, axis=1), axis=0)  # the edge tile: within a warp
            if FMA_EXP:
                big_m, big_s = tl.reduce((wm, ws), 0, _merge_stats_log2)
                m_e = _log2e_up(m_e)
            else:
                big_m, big_s = tl.reduce((wm, ws), 0, _merge_stats)
            e_e = _exp_against(x_e, tl.where(m_e == float("-inf"), 0.0, m_e), FMA_EXP)
            if FMA_EXP:
                m, total = _merge_stats_log2(big_m, big_s, m_e, tl.sum(tl.sum(e_e, axis=1), axis=0))
            else:
                m, total = _merge_edges(big_m, big_s, m_e, tl.sum(tl.sum(e_e, axis=1), axis=0))
            m_base = tl.where(m == float("-inf"), 0.0, m)
            inv = 1.0 / total
            scale = (_rescale(mt - m_base, FMA_EXP) * inv)[:, None, None]
            _part_store(y_at, (e.to(tl.float32) * scale).to(y_ptr.dtype.element_ty), 0, WINDOW, VEC, shift, N,
                        THREAD_STATS)
            if PART1 > 0:
                _part_store(y_at, (e1.to(tl.float32) * scale).to(y_ptr.dtype.element_ty), WINDOW, PART1, VEC, shift,
                            N, THREAD_STATS)
            if PART2 > 0:
                _part_store(y_at, (e2.to(tl.float32) * scale).to(y_ptr.dtype.element_ty), START2, PART2, VEC, shift,
                            N, THREAD_STATS)
            e_offs, e_mask = _edges(shift, N, VEC, LINE)
            if FMA_EXP:
                e_scale = tl.math.exp2(m_e - m_base) * inv
            else:
                e_scale = tl.exp(m_e - m_base) * inv
            tl.store(y_at + e_offs, (e_e * e_scale).to(y_ptr.dtype.element_ty), mask=e_mask)
        else:
            m = _window_softmax(x, x_e, v1, v2, y_at, shift, N, WINDOW, PART1, PART2, VEC, LINE, FAST, FMA_EXP)
        if FMA_EXP:
            again = again | (tl.abs(m) >= _CARRY_MAX)
        row += step
    if FMA_EXP:
        # Every max is rounded up, so no exponential overflows, but a row's own are off by 2^-d, d under its max's
        # ulp: a row whose max (times log2 e, or not) reached _CARRY_MAX wrote an underflowed sum, so the program
        # writes such rows again, from memory, their max subtracted first (_rows_again), after all its rows: the loop
        # above holds nothing for it but one flag, and -1e10 masks beside ordinary logits never get here.
        if again:
            _rows_again(x_ptr, y_ptr, M, N, stride_x, _AGAIN_BLOCK)


@triton.jit
def _softmax_staged(x_ptr: tl.tensor, y_ptr: tl.tensor, part_ptr: tl.tensor, count_ptr: tl.tensor, M: tl.tensor,
                    N: tl.tensor, stride_x: tl.tensor, n_parts: tl.tensor, rows_per_batch: tl.tensor,
                    n_batches: tl.tensor, CHUNK: tl.constexpr, CHUNKS: tl.constexpr, BLOCK_S: tl.constexpr,
                    ALIGN: tl.constexpr) -> None:
    # One launch, two kinds of program, in slots of rows_per_batch * n_parts programs ordered
    #   partials(0), partials(1), normalise(0), partials(2), normalise(1), ..., normalise(last)
    # Each program owns one part of a row: CHUNKS consecutive chunks of CHUNK elements. A partials program reduces
    # its part to (max, sum of exp) and counts itself done on the row's counter (release); a normalise program
    # waits for its row's counter to reach n_parts (acquire), merges the row's partials and rewrites its part.
    # Programs start in launch order, so a row's partials programs always started before anything waits for them
    # (no deadlock; the interpreter runs them in order too), and a batch is re-read while it is still in L2 from
    # its partials pass: HBM sees one read and one write.
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    per_slot = rows_per_batch * n_parts
    pid = tl.program_id(0)
    slot = pid // per_slot
    local = pid % per_slot
    last = 2 * n_batches - 1
    is_norm = (slot > 0) & ((slot % 2 == 0) | (slot == last))
    batch = tl.where(is_norm, tl.where(slot == last, n_batches - 1, slot // 2 - 1), (slot + 1) // 2)
    row = batch * rows_per_batch + local // n_parts
    part = local % n_parts
    if row < M:
        x_row = x_ptr + row.to(tl.int64) * stride_x
        at = part_ptr + row.to(tl.int64) * n_parts
        if is_norm:
            while tl.atomic_add(count_ptr + row, 0, sem="acquire") < n_parts:
                pass
            tl.debug_barrier()
            slots = tl.arange(0, BLOCK_S)
            part_mask = slots < n_parts
            # .cg: the partials were written by other SMs; never serve them from this SM's L1
            m_part = tl.load(at + slots, mask=part_mask, other=float("-inf"), cache_modifier=".cg")
            s_part = tl.load(at + M * n_parts + slots, mask=part_mask, other=0.0, cache_modifier=".cg")
            m = tl.max(m_part, axis=0)
            inv = 1.0 / tl.sum(s_part * tl.exp(m_part - m), axis=0)
            y_row = y_ptr + row.to(tl.int64) * N
            for c in tl.static_range(CHUNKS):
                cols = (part * CHUNKS + c) * CHUNK + tl.arange(0, CHUNK)
                mask = cols < N
                x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
                tl.store(y_row + cols, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)
        else:
            m_run = float("-inf")
            s_run = 0.0
            for c in tl.static_range(CHUNKS):
                cols = (part * CHUNKS + c) * CHUNK + tl.arange(0, CHUNK)
                x = tl.load(x_row + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
                m_new = tl.maximum(m_run, tl.max(x, axis=0))
                m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # all -inf so far: (max=-inf, sum=0)
                s_run = s_run * tl.exp(m_run - m_safe) + tl.sum(tl.exp(x - m_safe), axis=0)
                m_run = m_new
            tl.store(at + part, m_run)
            tl.store(at + M * n_parts + part, s_run)
            tl.debug_barrier()  # every thread's stores are ordered before the release below
            tl.atomic_add(count_ptr + row, 1, sem="release")


@triton.jit
def _softmax_split(x_ptr: tl.tensor, y_ptr: tl.tensor, part_ptr: tl.tensor, count_ptr: tl.tensor, M: tl.tensor,
                   N: tl.tensor, stride_x: tl.tensor, n_parts: tl.tensor, CHUNK: tl.constexpr, BLOCK_S: tl.constexpr,
                   ALIGN: tl.constexpr, VEC: tl.constexpr = 1, REALIGNED: tl.constexpr = False) -> None:
    # One program per chunk of a row, the chunk held in registers from load to store: reduce it to (max, sum of
    # exp), publish that on the row's counter (release), wait until every chunk of the row has (acquire), merge the
    # row's partials and store. HBM sees exactly one read and one write. Waiting on programs with higher ids is safe
    # on a GPU that starts programs in launch order while one row's programs fit on it at once (n_parts <= SMs);
    # the interpreter runs programs one after another, so the host never picks this there.
    # REALIGNED: chunks cut from the row's window on the output's vectors (as _softmax_realigned sees rows) hold the
    # row's whole vectors inside them, masked per vector, and the chunk holding an edge vector the row's part of it
    # in a 2 x VEC tile; x is read at the window's positions, ALIGN being a power of two dividing stride_x - N.
    pid = tl.program_id(0)
    row = pid // n_parts
    part = pid % n_parts
    if REALIGNED:
        start = row.to(tl.int64) * N
        base = (start // VEC) * VEC
        shift = (start - base).to(tl.int32)
        x_at = x_ptr + ((row.to(tl.int64) * (stride_x - N) + base) // ALIGN) * ALIGN  # x at window position 0
        vecs = part * CHUNK + tl.arange(0, CHUNK // VEC) * VEC  # this chunk's vectors, as window offsets
        offs = vecs[:, None] + tl.arange(0, VEC)[None, :]
        mask = (vecs >= shift)[:, None] & (vecs + VEC <= shift + N)[:, None]
        x = tl.load(x_at + offs, mask=mask, other=float("-inf")).to(tl.float32)
        e_offs, e_mask = _edges(shift, N, VEC)
        e_mask = e_mask & (e_offs // CHUNK == part)  # the row's edge vectors lying in this chunk
        x_e = tl.load(x_at + e_offs, mask=e_mask, other=float("-inf")).to(tl.float32)
        m_loc = tl.maximum(tl.max(tl.max(x, axis=1), axis=0), tl.max(tl.max(x_e, axis=1), axis=0))
    else:
        N = (N // ALIGN) * ALIGN
        stride_x = (stride_x // ALIGN) * ALIGN
        cols = part * CHUNK + tl.arange(0, CHUNK)
        mask = cols < N
        x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
        m_loc = tl.max(x, axis=0)
    m_safe = tl.where(m_loc == float("-inf"), 0.0, m_loc)  # an all -inf (or empty) chunk: (max=-inf, sum=0)
    e = tl.exp(x - m_safe)
    at = part_ptr + row.to(tl.int64) * n_parts
    tl.store(at + part, m_loc)
    if REALIGNED:
        e_e = tl.exp(x_e - m_safe)
        tl.store(at + M * n_parts + part, tl.sum(tl.sum(e, axis=1), axis=0) + tl.sum(tl.sum(e_e, axis=1), axis=0))
    else:
        tl.store(at + M * n_parts + part, tl.sum(e, axis=0))
    tl.debug_barrier()  # every thread's stores are ordered before the release below
    tl.atomic_add(count_ptr + row, 1, sem="release")
    while tl.atomic_add(count_ptr + row, 0, sem="acquire") < n_parts:
        pass
    tl.debug_barrier()
    slots = tl.arange(0, BLOCK_S)
    part_mask = slots < n_parts
    # .cg: the partials were written by other SMs; never serve them from this SM's L1
    m_part = tl.load(at + slots, mask=part_mask, other=float("-inf"), cache_modifier=".cg")
    s_part = tl.load(at + M * n_parts + slots, mask=part_mask, other=0.0, cache_modifier=".cg")
    m = tl.max(m_part, axis=0)
    scale = tl.exp(m_safe - m) / tl.sum(s_part * tl.exp(m_part - m), axis=0)
    if REALIGNED:
        tl.store(y_ptr + base + offs, (e * scale).to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(y_ptr + base + e_offs, (e_e * scale).to(y_ptr.dtype.element_ty), mask=e_mask)
    else:
        tl.store(y_ptr + row.to(tl.int64) * N + cols, (e * scale).to(y_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def _whole(c: gl.constexpr, T: gl.constexpr, K: gl.constexpr, sh: gl.tensor, N: gl.tensor,
           rows_layout: gl.constexpr) -> gl.tensor:
    # REALIGN: which of chunk c's K-element vectors lie wholly inside the row (window positions sh .. sh + N), [T, 1].
    vecs = c * T * K + gl.arange(0, T, layout=rows_layout) * K
    return ((vecs >= sh) & (vecs + K <= sh + N))[:, None]


@gluon.constexpr_function
def _masked_chunk(c: int, nchunk: int, realign: bool) -> bool:
    # Chunks that can hold a partial vector: a row's last (NCHUNK = cdiv(N, CHUNK)); with REALIGN its first and last
    # two (NCHUNK = cdiv(N + K - 1, CHUNK): the row can end in either of the last two).
    return c == 0 or c >= nchunk - 2 if realign else c == nchunk - 1


@gluon.jit
def _fetch(slot: gl.shared_memory_descriptor, src: gl.tensor, cols: gl.tensor, N: gl.tensor, live: gl.tensor,
           LAST: gl.constexpr, keep: gl.tensor) -> None:
    # One chunk's copy group into its slot. Only a row's last chunk can run past N (NCHUNK = cdiv(N, CHUNK)); with
    # REALIGN the caller passes `keep` (its whole vectors) for the chunks that can hold a partial one, as LAST.
    if LAST:
        cp.async_copy_global_to_shared(slot, src + cols, mask=keep & live)
    else:
        cp.async_copy_global_to_shared(slot, src + cols, mask=live)
    cp.commit_group()


_FREE_COPY = gl.constexpr("cp.async.cg.shared.global [$1], [$2], 16, $3;\n\tmov.u32 $0, 0;")
_FREE_COPY_HALF = gl.constexpr("cp.async.ca.shared.global [$1], [$2], 8, $3;\n\tmov.u32 $0, 0;")  # .cg takes 16 only


@gluon.jit
def _fetch_free(smem: gl.tensor, c: gl.constexpr, src_row: gl.tensor, lane: gl.tensor, sh: gl.tensor, N: gl.tensor,
                live: gl.tensor, null: gl.tensor, K: gl.constexpr, CHUNK: gl.constexpr,
                HALVES: gl.constexpr = False, MASKED: gl.constexpr = True, TAIL: gl.constexpr = False,
                tail: gl.tensor = None, last: gl.tensor = None, CSTRIDE: gl.constexpr = 0,
                TSTRIDE: gl.constexpr = 0) -> None:
    # FREE's copy group for chunk c: each thread's 16-byte vector (window positions c CHUNK + lane K, wholly inside
    # the row sh .. sh + N; sh = 0 for aligned rows) into its place in slot c (`smem`: its place in slot 0), as
    # inline PTX, which Triton's barrier pass does not see, so no CTA barrier comes with it. Each thread later reads
    # only the vector it copied, after its own wait. A vector outside the row (or past the last row) reads nothing
    # (src-size 0, from a harmless address) and is zero-filled, as Gluon's masked copies are.
    # HALVES (aligned rows on the 8-byte grid only, sh = 0): the vector as two 8-byte copies into its 16 bytes of the
    # slot, each copied where it lies inside the row (a row's last vector can be half in it).
    # MASKED (_masked_chunk): the chunk can hold a vector outside the row; every other chunk's vectors are all inside
    # it, so only `live` is tested (two compares a copy fewer, and no per-chunk bounds held across the row loop:
    # 264 x 49196 through windows 128 -> 80 registers; timed level with every copy testing its bounds on the H100,
    # evidence/h100/2026-12-06_sixteenth/4_*).
    # CSTRIDE / TSTRIDE: bytes from one slot (tail) to the next; by default a chunk's (TAILS: a warp's vector each)
    CS: gl.constexpr = CSTRIDE if CSTRIDE > 0 else CHUNK * (16 // K)
    TS: gl.constexpr = TSTRIDE if TSTRIDE > 0 else CHUNK // (2 * K)
    vecs = c * CHUNK + lane * K
    if HALVES:
        for h in gl.static_range(2):
            ok = (vecs + (h + 1) * (K // 2) <= N) & live if MASKED else live
            gl.inline_asm_elementwise(_FREE_COPY_HALF, "=r,r,l,r",
                                      [smem + c * CS + h * 8,
                                       gl.where(ok, src_row + vecs + h * (K // 2), null), gl.where(ok, 8, 0)],
                                      dtype=gl.int32, is_pure=False, pack=1)
    else:
        ok = (vecs >= sh) & (vecs + K <= sh + N) & live if MASKED else live
        gl.inline_asm_elementwise(_FREE_COPY, "=r,r,l,r",
                                  [smem + c * CS, gl.where(ok, src_row + vecs, null),
                                   gl.where(ok, 16, 0)], dtype=gl.int32, is_pure=False, pack=1)
    if TAIL:  # PADDED's TAILS: lane 31 (`last`) also copies the vector after its own into its warp's tail of slot c
        ok = (vecs + K >= sh) & (vecs + 2 * K <= sh + N) & live if MASKED else live
        gl.inline_asm_elementwise(_TAIL_COPY, "=r,r,l,r", [tail + c * TS, src_row + vecs + K, last & ok.to(gl.int32)],
                                  dtype=gl.int32, is_pure=False, pack=1)  # no copy at all where not ok
    cp.commit_group()


@gluon.jit
def _stagger(cycles: gl.constexpr, layout: gl.constexpr) -> None:
    # Half the programs (alternate ones; of two sharing an SM, one) spin `cycles` SM clocks before starting, so
    # persistent programs doing equal work do not pass through their stats passes (no HBM traffic) in lockstep.
    pid = gl.program_id(0)
    if (pid % 2 == 1) ^ (2 * pid >= gl.num_programs(0)):
        z = gl.zeros([32 * gl.num_warps()], gl.int32, layout)
        t0 = gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [z], dtype=gl.int64, is_pure=False, pack=1)
        waited = gl.max(t0 - t0, axis=0)
        while waited < cycles:
            now = gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [z], dtype=gl.int64, is_pure=False,
                                            pack=1)
            waited = gl.max(now - t0, axis=0)


@gluon.jit
def _scaled(m: gl.tensor) -> gl.tensor:
    # m log2 e rounded once to fp32 (mul.rn: the compiler may not fuse it into a later add), so that exponents
    # taken against it and rescalings between two of them agree exactly (CARRY).
    return gl.inline_asm_elementwise(_MUL_LOG2E_RN, "=r,r", [m], dtype=gl.float32, is_pure=True, pack=1)


# The max of one fp32 a thread over its warp's 32 lanes (every lane active): ANCHOR's anchor, no shared memory.
_WARP_MAX = gl.constexpr("{ .reg .b32 t;\n\t"
                         "shfl.sync.bfly.b32 t, $1, 16, 0x1f, -1;\n\tmax.f32 $0, $1, t;\n\t"
                         "shfl.sync.bfly.b32 t, $0, 8, 0x1f, -1;\n\tmax.f32 $0, $0, t;\n\t"
                         "shfl.sync.bfly.b32 t, $0, 4, 0x1f, -1;\n\tmax.f32 $0, $0, t;\n\t"
                         "shfl.sync.bfly.b32 t, $0, 2, 0x1f, -1;\n\tmax.f32 $0, $0, t;\n\t"
                         "shfl.sync.bfly.b32 t, $0, 1, 0x1f, -1;\n\tmax.f32 $0, $0, t; }")


@gluon.jit
def _warp_max(v: gl.tensor) -> gl.tensor:
    # v (one value a thread) replaced by its warp's max (not pure: the shuffles need every lane of the warp here).
    return gl.inline_asm_elementwise(_WARP_MAX, "=r,r", [v], dtype=gl.float32, is_pure=False, pack=1)


@gluon.jit
def _kept(c: gl.tensor, cols: gl.tensor, vec0: gl.tensor, sh: gl.tensor, N: gl.tensor, K: gl.constexpr,
          CHUNK: gl.constexpr, REALIGN: gl.constexpr) -> gl.tensor:
    # Which of chunk c's elements (c a runtime index) to touch: inside the row, or with REALIGN its whole vectors
    # (vec0: each thread's first vector offset in a chunk); _whole's test for a runtime c.
    if REALIGN:
        keep = ((c * CHUNK + vec0 >= sh) & (c * CHUNK + vec0 + K <= sh + N))[:, None]
    else:
        keep = cols < N
    return keep


# bf16 pairs widened to fp32 from their 32-bit word: the low element shifted up, the high one masked (a bf16 is the
# top half of its fp32). Triton's .to(float32) takes the high one out and shifts it back (PRMT + SHF): one
# instruction more a pair, 120 more at 65536 wide in the sm_90 build.
_WIDEN_BF16_PAIR = gl.constexpr("{ shl.b32 $0, $2, 16;\n\tand.b32 $1, $2, 0xffff0000; }")


@gluon.constexpr_function
def _widen_words_asm(words: list[str], bf16: bool) -> list[str]:
    """PTX widening four words of 16-bit pairs into fp32 $0-$7 (element 2i from word i's low half)."""
    lines = []
    for i, w in enumerate(words):
        if bf16:
            lines += [f"shl.b32 ${2 * i}, {w}, 16;", f"and.b32 ${2 * i + 1}, {w}, 0xffff0000;"]
        else:
            lines += ["{ .reg .b16 h0, h1;", f"mov.b32 {{h0, h1}}, {w};", f"cvt.f32.f16 ${2 * i}, h0;",
                      f"cvt.f32.f16 ${2 * i + 1}, h1; }}"]
    return lines


@gluon.constexpr_function
def _shifted_asm(bf16: bool, tail_at: int = -1) -> str:
    """PADDED's realignment as inline PTX (pack 8: $8-$11 a thread's vector of x as four words, then the vector after
    it as loaded for lane 31 in $12-$15 and its control in $16, or with TAILS (tail_at >= 0) lane 31's tail address
    in $12, read at [$12 + tail_at], and the control in $20; the control: d in bits 0-2, lane 31 in bit 3). The
    vector after a thread's comes from the next lane by shuffle (lane 31: the load's or the tail's); the eight words
    a = (own, next) are shifted by d 16-bit elements (word shift d >> 1 by two selects a word, half-word shift d & 1
    by one prmt), and the result widened to fp32 into $0-$7: elements d .. d + K - 1 of the thread's two vectors."""
    own = [f"${i}" for i in range(8, 12)]
    nxt = [f"n{i}" for i in range(4)]
    ctl = "$20" if tail_at >= 0 else "$16"
    lines = [".reg .b32 n<4>, q<4>, v<7>, u<5>, w<4>, sel, t;", ".reg .pred pl, p1, p2, po;"]
    if tail_at >= 0:  # every lane reads its warp's tail (one address a warp: a broadcast); lane 31 keeps it
        lines += [f"ld.shared.v4.b32 {{q0, q1, q2, q3}}, [$12+{tail_at}];"]
        after = [f"q{i}" for i in range(4)]
    else:
        after = [f"${12 + i}" for i in range(4)]
    lines += [f"shfl.sync.down.b32 n{i}, {own[i]}, 1, 0x1f, -1;" for i in range(4)]
    lines += [f"and.b32 t, {ctl}, 8;", "setp.ne.u32 pl, t, 0;"]
    lines += [f"selp.b32 n{i}, {after[i]}, n{i}, pl;" for i in range(4)]
    lines += [f"and.b32 t, {ctl}, 2;", "setp.ne.u32 p1, t, 0;", f"and.b32 t, {ctl}, 4;", "setp.ne.u32 p2, t, 0;",
              f"and.b32 t, {ctl}, 1;", "setp.ne.u32 po, t, 0;", "selp.b32 sel, 0x5432, 0x3210, po;"]
    a = own + nxt
    lines += [f"selp.b32 v{k}, {a[k + 1]}, {a[k]}, p1;" for k in range(7)]
    lines += [f"selp.b32 u{i}, v{i + 2}, v{i}, p2;" for i in range(5)]
    lines += [f"prmt.b32 w{i}, u{i}, u{i + 1}, sel;" for i in range(4)]
    lines += _widen_words_asm([f"w{i}" for i in range(4)], bf16)
    return "{ " + "\n\t".join(lines) + " }"


@gluon.jit
def _shifted(x: gl.tensor, after: gl.tensor, ctl: gl.tensor) -> gl.tensor:
    # PADDED: each thread's K elements of x's window starting d into its own vector (_shifted_asm), as fp32. Not pure:
    # the shuffles need every lane of the warp here.
    return gl.inline_asm_elementwise(_shifted_asm(x.dtype == gl.bfloat16), "=r," * 8 + "r," * 15 + "r",
                                     [x, after, ctl], dtype=gl.float32, is_pure=False, pack=8)


@gluon.jit
def _shifted_tail(x: gl.tensor, tail: gl.tensor, ctl: gl.tensor, TAIL_AT: gl.constexpr) -> gl.tensor:
    # _shifted with TAILS: lane 31's next vector read from its warp's tail in shared memory, at tail + TAIL_AT bytes.
    return gl.inline_asm_elementwise(_shifted_asm(x.dtype == gl.bfloat16, TAIL_AT), "=r," * 8 + "r," * 19 + "r",
                                     [x, tail, ctl], dtype=gl.float32, is_pure=False, pack=8)


# TAILS: lane 31 copies the vector after its own (the next warp's first, or the next chunk's) into its warp's tail,
# predicated on $3 (no other lane may write there: a zero-filling copy from them would race with lane 31's).
_TAIL_COPY = gl.constexpr("{ .reg .pred p; setp.ne.u32 p, $3, 0;\n\t"
                          "@p cp.async.cg.shared.global [$1], [$2], 16; }\n\tmov.u32 $0, 0;")


@gluon.constexpr_function
def _slot_read_asm(at: int, bf16: bool) -> str:
    """PADDED_LDS's stats-pass read: the thread's 16-byte vector at [$8 + at] (pack 8), widened to fp32 $0-$7."""
    lines = [".reg .b32 w<4>;", f"ld.shared.v4.b32 {{w0, w1, w2, w3}}, [$8+{at}];"]
    lines += _widen_words_asm([f"w{i}" for i in range(4)], bf16)
    return "{ " + "\n\t".join(lines) + " }"


@gluon.constexpr_function
def _shifted_lds_asm(at: int, bf16: bool) -> str:
    """PADDED_LDS's realignment: five 4-byte shared reads from [$8 + at] on ($8: the thread's vector plus 4 (d >> 1)
    bytes, so the word shift is in the address; lane 31's next vector is its warp's tail, right after its own), a warp
    barrier (the next lane refills its vector after this), one prmt a word for the half-word d & 1 ($16: its
    selector), widened to fp32 $0-$7."""
    lines = [".reg .b32 q<5>, w<4>;"]
    lines += [f"ld.shared.b32 q{i}, [$8+{at + 4 * i}];" for i in range(5)]
    lines += ["bar.warp.sync -1;"]
    lines += [f"prmt.b32 w{i}, q{i}, q{i + 1}, $16;" for i in range(4)]
    lines += _widen_words_asm([f"w{i}" for i in range(4)], bf16)
    return "{ " + "\n\t".join(lines) + " }"


@gluon.jit
def _slot_read(at_t: gl.tensor, AT: gl.constexpr, BF16: gl.constexpr, layout: gl.constexpr, T: gl.constexpr,
               K: gl.constexpr) -> gl.tensor:
    # PADDED_LDS: a thread's vector of a slot (at_t: its address in slot 0, [T, 1]; AT: the slot's offset) as fp32.
    at = at_t + gl.zeros([T, K], gl.int32, layout)
    return gl.inline_asm_elementwise(_slot_read_asm(AT, BF16), "=r," * 8 + "r," * 7 + "r", [at], dtype=gl.float32,
                                     is_pure=False, pack=8)


@gluon.jit
def _shifted_lds(at_t: gl.tensor, sel: gl.tensor, AT: gl.constexpr, BF16: gl.constexpr, layout: gl.constexpr,
                 T: gl.constexpr, K: gl.constexpr) -> gl.tensor:
    # PADDED_LDS: the K elements of x's window starting d into the thread's vector of slot AT (_shifted_lds_asm).
    zero = gl.zeros([T, K], gl.int32, layout)
    return gl.inline_asm_elementwise(_shifted_lds_asm(AT, BF16), "=r," * 8 + "r," * 15 + "r",
                                     [at_t + zero, sel + zero], dtype=gl.float32, is_pure=False, pack=8)


@gluon.jit
def _widen(x: gl.tensor) -> gl.tensor:
    # x (16-bit, pairs of neighbours in one thread) as fp32, exactly.
    if x.dtype == gl.bfloat16:
        y = gl.inline_asm_elementwise(_WIDEN_BF16_PAIR, "=r,=r,r", [x], dtype=gl.float32, is_pure=True, pack=2)
    else:
        y = x.to(gl.float32)
    return y


@gluon.constexpr_function
def _wait_asm(pending: int) -> str:
    """cp.async.wait_group as inline PTX: Gluon's cp.wait_group adds a CTA barrier after it (FREE leaves it out)."""
    return f"cp.async.wait_group {pending};\n\tmov.u32 $0, 0;"


@gluon.jit
def _chunk_x(slots: gl.shared_memory_descriptor, c: gl.constexpr, x_row: gl.tensor, cols: gl.tensor, n_own: gl.tensor,
             sh: gl.tensor, held: gl.tuple, NCHUNK: gl.constexpr, NRES: gl.constexpr, K: gl.constexpr,
             REALIGN: gl.constexpr, HOLD: gl.constexpr, WAIT: gl.constexpr, layout: gl.constexpr,
             FREE: gl.constexpr = False, lane: gl.tensor = None, LDS: gl.constexpr = False,
             at_t: gl.tensor = None, CS: gl.constexpr = 0) -> gl.tensor:
    # _softmax_resident's chunk c of a row as fp32, lanes outside the row -inf: from its slot (WAIT: once its copy
    # group lands; groups land in order), from registers (HOLD) or from global memory (L2 after the first look).
    T: gl.constexpr = 32 * gl.num_warps()
    if _masked_chunk(c, NCHUNK, REALIGN):
        keep = _whole(c, T, K, sh, n_own, gl.SliceLayout(1, layout)) if REALIGN else cols < n_own
    if c < NRES:
        if WAIT and FREE:  # the wait alone, without the CTA barrier after it (each thread reads its own copies)
            gl.inline_asm_elementwise(_wait_asm(NRES - 1 - c), "=r,r", [lane],
                                      dtype=gl.int32, is_pure=False, pack=1)
        elif WAIT:
            cp.wait_group(NRES - 1 - c)
        if LDS:  # PADDED_LDS: slots laid CS bytes apart, each warp's vectors one apart (at_t: the thread's, [T, 1])
            x = _slot_read(at_t, c * CS, slots.dtype == gl.bfloat16, layout, T, K)
        else:
            x = _widen(slots.index(c).load(layout))
        if _masked_chunk(c, NCHUNK, REALIGN):
            x = gl.where(keep, x, float("-inf"))  # masked copies zero-fill
    elif HOLD:
        x = _widen(held[c - NRES])
    elif _masked_chunk(c, NCHUNK, REALIGN):
        x = _widen(gl.load(x_row + cols, mask=keep, other=float("-inf"), eviction_policy="evict_last"))
    else:
        x = _widen(gl.load(x_row + cols, eviction_policy="evict_last"))
    return x


@gluon.jit
def _carry_update(x: gl.tensor, m_new: gl.tensor, ms_t: gl.tensor,
                  s_t: gl.tensor) -> tuple[gl.tensor, gl.tensor, gl.tensor]:
    # CARRY's step over a chunk x (fp32, a thread's K elements a row): s_t = sum of 2^(x log2 e - ms_t), ms_t the
    # running max m_new times log2 e rounded once. Returns (ms_new, s_t, p), p the chunk's exponentials.
    ms_new = _scaled(m_new)
    # all -inf so far: (max=-inf, sum=0). A running max past _CARRY_MAX (a mask of -1e10 or of the dtype's lowest
    # beside ordinary logits) would make 2^d infinite (its ms_new, -inf past 2.36e38, too) and the row NaN: its
    # exponentials are taken as 0, which they are beside an ordinary max; a row whose own max is past it takes SAFE's
    # second look.
    ms_use = gl.where(m_new == float("-inf"), 0.0, gl.where(gl.abs(m_new) >= _CARRY_MAX, float("inf"), ms_new))
    p = gl.exp2(x * _LOG2E - ms_use[:, None])
    s_t = s_t * gl.exp2(ms_t - ms_use) + gl.sum(p, axis=1)
    return ms_new, s_t, p


@gluon.jit
def _carry_shift_total(m_t: gl.tensor, ms_t: gl.tensor, s_t: gl.tensor, x_e: gl.tensor,
                       REALIGN: gl.constexpr) -> tuple[gl.tensor, gl.tensor]:
    # CARRY's row stats from its threads' (max, rounded max times log2 e, sum) and REALIGN's edge vectors x_e: every
    # exponent against one rounded value, the row's max times log2 e. Returns (shift, sum against it).
    shift = _scaled(gl.max(m_t, axis=0))
    if REALIGN:
        shift = gl.maximum(shift, _scaled(gl.max(gl.max(x_e, axis=1), axis=0)))
    total = gl.sum(s_t * gl.exp2(ms_t - shift), axis=0)
    if REALIGN:
        total += gl.sum(gl.sum(gl.exp2(x_e * _LOG2E - shift), axis=1), axis=0)
    return shift, total


@gluon.jit
def _carry_again(slots: gl.shared_memory_descriptor, x_row: gl.tensor, offs: gl.tensor, n_own: gl.tensor,
                 sh: gl.tensor, held: gl.tuple, x_e: gl.tensor, NCHUNK: gl.constexpr, NRES: gl.constexpr,
                 K: gl.constexpr, REALIGN: gl.constexpr, HOLD: gl.constexpr, layout: gl.constexpr,
                 FREE: gl.constexpr, lane: gl.tensor, LDS: gl.constexpr = False, at_t: gl.tensor = None,
                 CS: gl.constexpr = 0) -> tuple[gl.tensor, gl.tensor, gl.tensor]:
    # ANCHOR's redo for a row its anchors could not sum: CARRY's stats pass over the row it holds (its copies have
    # landed; HOLD's chunks in registers, streamed ones read again from L2), before any of it is written. Returns the
    # row's (max, shift, sum against the shift), its edge vectors x_e included (REALIGN).
    T: gl.constexpr = 32 * gl.num_warps()
    rows_layout: gl.constexpr = gl.SliceLayout(1, layout)
    m_t = gl.full([T], float("-inf"), gl.float32, rows_layout)
    ms_t = gl.full([T], float("-inf"), gl.float32, rows_layout)
    s_t = gl.zeros([T], gl.float32, rows_layout)
    for c in gl.static_range(NCHUNK):
        x = _chunk_x(slots, c, x_row, c * T * K + offs, n_own, sh, held, NCHUNK, NRES, K, REALIGN, HOLD, False,
                     layout, FREE, lane, LDS, at_t, CS)
        m_new = gl.maximum(m_t, gl.max(x, axis=1))
        ms_t, s_t, _ = _carry_update(x, m_new, ms_t, s_t)
        m_t = m_new
    shift, total = _carry_shift_total(m_t, ms_t, s_t, x_e, REALIGN)
    m_row = gl.max(m_t, axis=0)
    if REALIGN:
        m_row = gl.maximum(m_row, gl.max(gl.max(x_e, axis=1), axis=0))
    return m_row, shift, total


@gluon.jit
def _resident_subtracted(x_row: gl.tensor, y_row: gl.tensor, N: gl.tensor, sh: gl.tensor,
                         m_row: gl.tensor, edges: gl.tensor, NCHUNK: gl.constexpr, K: gl.constexpr,
                         REALIGN: gl.constexpr, layout: gl.constexpr) -> gl.tensor:
    # _softmax_resident's second look at a row whose |max| reaches _FOLD_MAX (rare), after the common output pass:
    # the sum and the output again with the max subtracted first, re-read from global memory in runtime loops
    # (little code), each element rewritten by the thread that wrote it. `edges`: the REALIGN edge vectors' part of
    # the sum. Returns log2 of the sum.
    T: gl.constexpr = 32 * gl.num_warps()
    CHUNK: gl.constexpr = T * K
    rows_layout: gl.constexpr = gl.SliceLayout(1, layout)
    vec0 = gl.arange(0, T, layout=rows_layout) * K
    offs = vec0[:, None] + gl.arange(0, K, layout=gl.SliceLayout(0, layout))[None, :]
    s_t = gl.zeros([T], gl.float32, rows_layout)
    for c in range(NCHUNK):
        cols = c * CHUNK + offs
        keep = _kept(c, cols, vec0, sh, N, K, CHUNK, REALIGN)
        x = gl.load(x_row + cols, mask=keep, other=float("-inf")).to(gl.float32)
        s_t += gl.sum(gl.exp2((x - m_row) * _LOG2E), axis=1)
    log_total = gl.log2(gl.sum(s_t, axis=0) + edges)
    for c in range(NCHUNK):
        cols = c * CHUNK + offs
        keep = _kept(c, cols, vec0, sh, N, K, CHUNK, REALIGN)
        x = gl.load(x_row + cols, mask=keep, other=0.0).to(gl.float32)
        gl.store(y_row + cols, gl.exp2((x - m_row) * _LOG2E - log_total).to(y_row.dtype.element_ty), mask=keep)
    return log_total


@gluon.jit
def _lane31_next(x_row: gl.tensor, c: gl.constexpr, offs: gl.tensor, sh: gl.tensor, N: gl.tensor,
                 last_lane: gl.tensor, NCHUNK: gl.constexpr, K: gl.constexpr, T: gl.constexpr,
                 rows_layout: gl.constexpr) -> gl.tensor:
    # PADDED: the vector after each lane 31's in chunk c (the next warp's first, or the next chunk's), 16 bytes from
    # L2 where it lies wholly inside the row (vector v + K's test against sh - K; an unmasked chunk's all do).
    if _masked_chunk(c, NCHUNK, True):
        ok = last_lane & _whole(c, T, K, sh - K, N, rows_layout)
    else:
        ok = last_lane
    return gl.load(x_row + c * T * K + offs + K, mask=ok, other=0.0)


@gluon.jit
def _resident_output(slots: gl.shared_memory_descriptor, x_row: gl.tensor, y_row: gl.tensor,
                     a_row: gl.tensor, offs: gl.tensor, N: gl.tensor, sh: gl.tensor, a_sh: gl.tensor,
                     live: gl.tensor, shift: gl.tensor, NCHUNK: gl.constexpr, NRES: gl.constexpr, K: gl.constexpr,
                     REALIGN: gl.constexpr, layout: gl.constexpr, CARRY: gl.constexpr = False,
                     log_total: gl.tensor = 0.0, KEEP: gl.constexpr = False, refs: gl.tuple = (),
                     HOLD: gl.constexpr = False, held: gl.tuple = (), MAXFIRST: gl.constexpr = False,
                     FREE: gl.constexpr = False, smem: gl.tensor = None, lane: gl.tensor = None,
                     HALVES: gl.constexpr = False, PADDED: gl.constexpr = False, ctl: gl.tensor = None,
                     d: gl.tensor = None, hi: gl.tensor = None, AHEAD: gl.constexpr = 1,
                     TAILS: gl.constexpr = False, tail: gl.tensor = None, last: gl.tensor = None,
                     LDS: gl.constexpr = False, CS: gl.constexpr = 0) -> None:
    # _softmax_resident's output pass: chunk c read back, its slot at once refilled with the next row's chunk c
    # (`live`: there is a next row), normalised (y = 2^(x log2 e - shift)) and stored. KEEP: a resident slot holds
    # the stats pass's exponentials p = 2^(x log2 e - refs[c]) as fp16, so y = p 2^(refs[c] - shift - log2 sum).
    # HOLD: the chunks past the slots are in registers (`held`, as loaded), not read again.
    # MAXFIRST: the slots and `held` hold p = 2^((x - max) log2 e) as fp16, so y = p / sum, one multiply; streamed
    # chunks (no HOLD) are read again and y = 2^((x - shift) log2 e - log2 sum), shift being the row's max.
    # PADDED (REALIGN): y_row is y's row seen through windows on y's own vector grid, window position p of x's row
    # being y_row's p - d (d = 0 .. K - 1, `ctl`'s low bits), so each thread stores the vector of y starting d into
    # its own (_shifted): whole 16-byte stores. Stored where that vector lies within the row's whole vectors of x
    # (window positions below `hi`, the row's first whole vector on): the slots hold only those; the rest of the
    # row's y (2K - 2 elements at most each end) is the caller's.
    T: gl.constexpr = 32 * gl.num_warps()
    CHUNK: gl.constexpr = T * K
    rows_layout: gl.constexpr = gl.SliceLayout(1, layout)
    if MAXFIRST:
        inv_total = gl.exp2(-log_total)
    if PADDED:  # lane 31's next vector is the next warp's first: loaded from L2, AHEAD chunks ahead
        gl.static_assert(REALIGN and not (KEEP or MAXFIRST or HOLD), "PADDED: windows, x in the slots")
        last_lane = (lane % 32 == 31)[:, None]
        pending = ()
        for c in gl.static_range(0 if TAILS or LDS else min(AHEAD, NCHUNK)):
            pending = pending + (_lane31_next(x_row, c, offs, sh, N, last_lane, NCHUNK, K, T, rows_layout),)  # type: ignore[assignment]  # noqa: RUF005
    for c in gl.static_range(NCHUNK):
        cols = c * CHUNK + offs
        if _masked_chunk(c, NCHUNK, REALIGN):
            keep = _whole(c, T, K, sh, N, rows_layout) if REALIGN else cols < N
            if PADDED:  # the vector starting d into a thread's own lies within the row's whole vectors of x
                keep = keep & (c * CHUNK + gl.arange(0, T, layout=rows_layout) * K + K + d <= hi)[:, None]
        if PADDED and (TAILS or LDS):  # resident chunks: lane 31's next vector is in its warp's tail; streamed: L2
            if c >= NRES:
                after_c = _lane31_next(x_row, c, offs, sh, N, last_lane, NCHUNK, K, T, rows_layout)
        elif PADDED:
            after_c = pending[0]  # type: ignore[misc]  # filled above (a Gluon tuple)
            rest = ()
            for i in gl.static_range(1, len(pending)):
                rest = rest + (pending[i],)  # type: ignore[assignment]  # noqa: RUF005
            if c + AHEAD < NCHUNK:
                rest = rest + (_lane31_next(x_row, c + AHEAD, offs, sh, N, last_lane, NCHUNK, K, T, rows_layout),)  # type: ignore[assignment]  # noqa: RUF005
            pending = rest
        if c < NRES:
            if KEEP or MAXFIRST:
                x = slots._reinterpret(gl.float16, [NRES, T, K], slots.layout).index(c).load(layout).to(gl.float32)
            elif PADDED and LDS:  # tail: the thread's vector + 16; the word shift d >> 1 in the address
                x = _shifted_lds((tail - 16 + (d // 2) * 4)[:, None], ctl, c * CS, slots.dtype == gl.bfloat16, layout,
                                 T, K)
            elif PADDED and TAILS:
                x = _shifted_tail(slots.index(c).load(layout), tail[:, None], ctl, c * (CHUNK // (2 * K)))
            elif PADDED:
                x = _shifted(slots.index(c).load(layout), after_c, ctl)
            else:
                x = _widen(slots.index(c).load(layout))
            # the slot is free: start the next row's chunk c (past the last row: no traffic)
            if FREE:
                _fetch_free(smem, c, a_row, lane, a_sh, N, live, x_row, K, CHUNK, HALVES,
                            _masked_chunk(c, NCHUNK, REALIGN), TAILS or LDS, tail, last, CS, CS)
            else:
                _fetch(slots.index(c), a_row, cols, N, live, _masked_chunk(c, NCHUNK, REALIGN),
                       _whole(c, T, K, a_sh, N, rows_layout) if REALIGN else cols < N)
        elif HOLD:  # masked lanes hold -inf: y = 0 there, and they are not stored
            x = _widen(held[c - NRES])
        elif PADDED:  # every lane's own vector, as the slots would hold it
            own = gl.load(x_row + cols, mask=_whole(c, T, K, sh, N, rows_layout), other=0.0,
                          eviction_policy="evict_first") if _masked_chunk(c, NCHUNK, REALIGN) else \
                gl.load(x_row + cols, eviction_policy="evict_first")
            x = _shifted(own, after_c, ctl)
        elif _masked_chunk(c, NCHUNK, REALIGN):
            x = _widen(gl.load(x_row + cols, mask=keep, other=0.0, eviction_policy="evict_first"))
        else:
            x = _widen(gl.load(x_row + cols, eviction_policy="evict_first"))
        if MAXFIRST and (c < NRES or HOLD):  # x is p against the row's max: a multiply an element
            y = (x * inv_total).to(y_row.dtype.element_ty)
        elif MAXFIRST:
            y = gl.exp2((x - shift) * _LOG2E - log_total).to(y_row.dtype.element_ty)
        elif KEEP and c < NRES:  # x is p: one exponential a thread for the chunk, a multiply an element
            y = (x * gl.exp2(refs[c] - shift - log_total)[:, None]).to(y_row.dtype.element_ty)
        elif CARRY:  # y = 2^((x log2 e - shift) - log2 sum): shift is the rounded max times log2 e (_softmax_resident)
            y = gl.exp2(x * _LOG2E - shift - log_total).to(y_row.dtype.element_ty)
        else:
            y = gl.exp2(x * _LOG2E - shift).to(y_row.dtype.element_ty)
        if _masked_chunk(c, NCHUNK, REALIGN):
            gl.store(y_row + cols, y, mask=keep)
        else:
            gl.store(y_row + cols, y)


@gluon.jit
def _meet_parts(words: gl.tensor, part: gl.tensor, m_own: gl.tensor, total_own: gl.tensor, PARTS: gl.constexpr,
                layout: gl.constexpr) -> tuple[gl.tensor, gl.tensor, gl.tensor]:
    # _softmax_resident's PARTS rendezvous: this part's (max, sum of 2^(x log2 e - _scaled(max))) published as one
    # 64-bit word, max bits high, sum bits low (never zero: a finite max sums to at least 1, an empty or all -inf part
    # publishes max = -inf), a single-copy-atomic store that is its own flag; the siblings' words polled with
    # volatile loads until none is zero. Returns the row's max, its shift (_scaled(max)) and its sum against it.
    total_own = gl.where(m_own == float("-inf"), 0.0, total_own)  # an all -inf part adds nothing
    word = (m_own.to(gl.uint32, bitcast=True).to(gl.uint64) << 32) | total_own.to(gl.uint32, bitcast=True).to(
        gl.uint64)
    gl.store(words + part, word.to(gl.int64, bitcast=True))
    at = gl.arange(0, PARTS, layout=layout)
    got = gl.load(words + at, volatile=True)
    while gl.min((got != 0).to(gl.int32), axis=0) == 0:
        got = gl.load(words + at, volatile=True)
    m_p = (got >> 32).to(gl.int32).to(gl.float32, bitcast=True)
    t_p = got.to(gl.int32).to(gl.float32, bitcast=True)
    m_row = gl.max(m_p, axis=0)
    shift = _scaled(m_row)
    # A part holding the row's max rescales by exactly 1: never 2^(shift - shift), which is NaN where the max is a
    # mask at bfloat16's lowest (its shift -inf); a part below it by 2^(its shift - the row's), 0 for such a mask.
    scale = gl.where(m_p == m_row, 1.0, gl.exp2(_scaled(m_p) - shift))
    total = gl.sum(gl.where(m_p == float("-inf"), 0.0, t_p * scale), axis=0)
    return m_row, shift, total


@gluon.jit
def _softmax_resident(x_ptr: gl.tensor, y_ptr: gl.tensor, M: gl.tensor, N: gl.tensor, stride_x: gl.tensor,
                      NCHUNK: gl.constexpr, NRES: gl.constexpr, K: gl.constexpr,
                      ALIGN: gl.constexpr, REALIGN: gl.constexpr = False, STAGGER: gl.constexpr = 0,
                      SAFE: gl.constexpr = True, CARRY: gl.constexpr = True, KEEP: gl.constexpr = False,
                      HOLD: gl.constexpr = False, PARTS: gl.constexpr = 1, w_ptr: gl.tensor = None,
                      MAXFIRST: gl.constexpr = False, FREE: gl.constexpr = False, LINE: gl.constexpr = 0,
                      ONE_SHIFT: gl.constexpr = False, ANCHOR: gl.constexpr = False,
                      PADDED: gl.constexpr = False, PADDED_AHEAD: gl.constexpr = 1,
                      PADDED_TAILS: gl.constexpr = False, PADDED_LDS: gl.constexpr = False) -> None:
    # Gluon (Triton's explicit-layout dialect): a persistent program keeps its whole row in shared memory, filled by
    # cp.async (no registers held while copies fly). Stats pass: chunk c is reduced as soon as its copy group lands
    # (per-thread running max and sum of exp: one exp per element, nothing crosses threads; one CTA-wide reduction
    # per row). Output pass: chunk c is read back and its slot at once refilled with the next row's chunk c, then
    # normalised and stored, so the next row's reads fly while this row's output is written. HBM: 1 read, 1 write.
    # Two programs share an SM where two rows fit its shared memory (one's output pass overlaps the other's stats
    # pass). Rows over the budget keep their first chunks resident and stream the rest (stats pass: evict_last;
    # output pass: re-read from L2). Each thread reads back exactly what its own copies wrote (one layout for both),
    # so cp.async.wait_group is all the ordering needed. Every chunk but the last is whole (NCHUNK = cdiv(N, CHUNK)),
    # so column masks sit on the last chunk only, and the normalisation is folded into the exponent
    # (y = 2^(x log2 e - (max log2 e + log2 sum))): on the H200 +5.7 points on rows over the budget (their streamed
    # loads lose their masks), +1.3 at 40000 wide, level at 65536 (evidence/h200/2026-12-01_fused_rows/4_final/).
    # REALIGN (contiguous rows whose width is not a multiple of K = one 16-byte vector): a row is seen through the
    # window of whole vectors that covers it, as _softmax_realigned sees rows: 16-byte copies and stores for the
    # vectors wholly inside the row (masked per vector on the first chunk and the last two, which can hold a partial
    # one; NCHUNK = cdiv(N + K - 1, CHUNK)), the row's part of its two edge vectors read and written element by
    # element from global memory. Nothing outside the row is read.
    # Tried and measured worse (evidence/h200/2026-12-01_resident_rows/4_*, 2026-12-01_fused_rows/): refilling a
    # slot after its chunk is normalised (-1 to -4); half the exponentials on the FMA pipe (-15 to -20: the output
    # pass is bound by instruction issue, not the exp unit); the next row's stats fused into this row's output pass
    # a few chunks behind its copies (-3 to -8; +3 to +5 only on rows over the budget); a warp-specialised form
    # (benchmarks/experimental_resident_ws.py; -2 to -10); bulk L2 prefetches of the next row as a row starts (-1 to
    # -12, worse the more is prefetched); a ring of slots holding the next row's first chunks, copied as a row's
    # stats pass starts (benchmarks/experimental_resident_ring.py: level with the best of these configs, 82-86%);
    # rows split over a thread-block cluster, parts in registers (benchmarks/experimental_cluster.py: -6 at 65536,
    # +1 to +2 at 128256-131072).
    # STAGGER (clocks; one program per SM holding whole rows): half the programs start late, so the SMs' stats
    # passes, which leave HBM idle, stop lining up (+2.5 to +4 points at 65536 and 98304 wide).
    # PARTS (experiment, aligned rows, CARRY): a row cut into PARTS parts of whole vectors, program p holding part
    # p % PARTS of rows p // PARTS, p // PARTS + programs / PARTS, ...; the parts meet once a row through w_ptr
    # (int64, rows x PARTS, zero before the launch): each publishes its (max, sum) as one 64-bit word that is its own
    # flag (never zero: _meet_parts) and polls its siblings' words. Siblings are launched next to each other, so
    # with programs dispatched in launch order a waiting program's siblings are running or will run.
    # FREE (16-byte copies of whole vectors; _RESIDENT_FREE): the copies as inline PTX into the slots' addresses
    # (global_smem + 0), the waits without Gluon's barrier: no CTA barrier inside a row's passes.
    # MAXFIRST (experiment, 16-bit rows): the stats pass takes only the max as chunks land; then one pass over the
    # held row takes p = 2^((x - max) log2 e) once an element, sums it and keeps it as fp16 over x (slots) or in
    # registers (HOLD), so the output pass is a multiply an element: one exponential an element instead of two, and
    # no per-chunk scales to hold (KEEP's, which spilled under PAIR). Exponents against the exact max: exact for
    # every finite logit, so no SAFE second look.
    # ANCHOR (planned, _RESIDENT_ANCHOR): no running max in the stats pass; each warp's sums against one anchor.
    # PADDED (experiment, _RESIDENT_PADDED; REALIGN): rows of x padded off the vector grid (row stride > N). Each row
    # of x is seen through its own window (row r starts r stride_x elements in, not r N), so its copies stay 16-byte
    # cp.async. y's rows (contiguous, r N) start elsewhere in their vectors: d = 0 .. K - 1 elements further into
    # the window. So the output pass gives each thread the K elements starting d into its own vector (the next
    # lane's vector by four shuffles; lane 31's, the next warp's first, loaded from L2 a chunk ahead), whose y is one
    # whole 16-byte vector of y (_shifted); the row's ends outside those vectors (2K - 2 elements at most each) are
    # written element by element. The stats pass is REALIGN's. Experiments on lane 31's next vector (FREE's copies):
    # PADDED_AHEAD loads it further ahead; PADDED_TAILS has lane 31 copy it into its warp's tail (one chunk more of
    # shared memory) with each chunk; PADDED_LDS lays each warp's 32 vectors in a slot followed by that tail (slots
    # CS bytes apart, read by inline PTX in both passes), so each thread reads its shifted vector at a shifted address
    # (_shifted_lds: no shuffles or selects), behind a warp barrier before the next lane refills its vector.
    gl.static_assert(not PADDED or REALIGN, "PADDED: rows through windows")
    gl.static_assert(not MAXFIRST or (PARTS == 1 and not KEEP), "MAXFIRST: one part a row, no KEEP")
    gl.static_assert(not ANCHOR or (CARRY and PARTS == 1 and not (KEEP or MAXFIRST or ONE_SHIFT)),
                     "ANCHOR: CARRY's pass, one part a row, no KEEP, MAXFIRST or ONE_SHIFT")
    SAFE_ROWS: gl.constexpr = SAFE and not MAXFIRST
    W: gl.constexpr = gl.num_warps()
    T: gl.constexpr = 32 * W  # threads; a chunk is T x K elements, K contiguous ones per thread
    CHUNK: gl.constexpr = T * K
    layout: gl.constexpr = gl.BlockedLayout([1, K], [32, 1], [W, 1], [1, 0])
    # REALIGN's windows start on a multiple of WBASE elements: a vector (K) with LINE = 0; LINE (planned): LINE
    # elements, a 128-byte line, so that a warp's 512-byte copy or store touches 4 lines rather than 5 (the row starts
    # up to LINE - 1 elements into its window's first chunk, whose vectors before it are masked like a row's end).
    WBASE: gl.constexpr = LINE if LINE > 0 else K
    rows_layout: gl.constexpr = gl.SliceLayout(1, layout)
    smem_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    # chunk c's slot: slots.index(c), one [NRES, T, K] buffer of any count. Slots as separate allocations (so that
    # Triton's barrier pass tells them apart: 30 fewer barriers at 65536 wide) timed within +-1.6 points on the H200
    # (evidence/h200/2026-12-01_cluster_apart/1_*), so one buffer stays.
    # PADDED_TAILS: one chunk more, whose first NRES x W vectors are the warps' tails (lane 31's next vector a chunk)
    # PADDED_LDS: the same chunk more, for slots CS bytes apart in which each warp's 32 vectors are followed by its
    # tail (lane 31's next vector), so every thread's next vector lies 16 bytes after its own
    slots = gl.allocate_shared_memory(x_ptr.dtype.element_ty,
                                      [NRES + 1 if PADDED_TAILS or PADDED_LDS else NRES, T, K], smem_layout)
    CS: gl.constexpr = CHUNK * 2 * 33 // 32 if PADDED_LDS else 0  # 0: _fetch_free's default, a chunk's bytes
    N = (N // ALIGN) * ALIGN  # the host guarantees ALIGN divides N and the stride: copies vectorise
    stride_x = (stride_x // ALIGN) * ALIGN
    offs = (gl.arange(0, T, layout=rows_layout) * K)[:, None] + gl.arange(0, K, layout=gl.SliceLayout(0, layout))[
        None, :]
    lane = gl.arange(0, T, layout=rows_layout)  # one element a thread: FREE's waits are emitted once a thread
    # HALVES (FREE on rows on the 8-byte grid but not the 16-byte one: widths and strides a multiple of K / 2): each
    # vector copied as two 8-byte halves, so such rows need no windows (REALIGN's masks, edges and registers).
    HALVES: gl.constexpr = FREE and not REALIGN and 2 * ALIGN == K
    if FREE:  # this thread's vector in slot 0; the slots are the kernel's first allocation (global_smem + 0)
        gl.static_assert(not (KEEP or MAXFIRST) and PARTS == 1 and (REALIGN or ALIGN == K or HALVES),
                         "FREE: whole rows in 16-byte vectors, slots holding x")
        gl.static_assert(K * x_ptr.dtype.element_ty.primitive_bitwidth == 128, "FREE: 16-byte vectors")
        smem = gl.inline_asm_elementwise("mov.u32 $0, global_smem;", "=r,r", [lane], dtype=gl.int32, is_pure=True,
                                         pack=1) + (lane + lane // 32 if PADDED_LDS else lane) * 16
    else:
        smem = lane  # unused without FREE (the parameters need a tensor)
    if PADDED_TAILS:  # warp w's tail of slot c at NRES CHUNK elements + (c W + w) 16 bytes
        gl.static_assert(PADDED and FREE and NRES <= 32 and not PADDED_LDS, "PADDED_TAILS: FREE's copies, tails "
                         "within one chunk")
        tail = smem - lane * 16 + NRES * CHUNK * 2 + (lane // 32) * 16
        last = (lane % 32 == 31).to(gl.int32)
    elif PADDED_LDS:  # lane 31's tail right after its vector
        gl.static_assert(PADDED and FREE and NRES <= 32, "PADDED_LDS: FREE's copies, padded slots within one chunk")
        tail = smem + 16
        last = (lane % 32 == 31).to(gl.int32)
    else:
        tail = lane  # unused
        last = lane
    if STAGGER > 0:
        _stagger(STAGGER, rows_layout)
    step = gl.num_programs(0)
    row = gl.program_id(0)
    n_own = N  # the columns this program holds: the row's, or its part's
    col0 = 0
    if PARTS > 1:
        gl.static_assert(CARRY and not REALIGN, "PARTS: aligned rows under CARRY")
        part = row % PARTS
        step = step // PARTS
        row = row // PARTS
        n_own = N // PARTS  # the host guarantees equal parts of whole vectors
        col0 = part * n_own
    pitch = stride_x if PADDED else N  # REALIGN: where row r of x starts, r pitch elements in
    if REALIGN:
        start = row.to(gl.int64) * pitch
        base = (start // WBASE) * WBASE
        sh = (start - base).to(gl.int32)  # where the row begins inside its window's first vector (LINE: line)
        x_row = x_ptr + base
        e_pos = gl.arange(0, 2, layout=rows_layout)
        e_cols = gl.arange(0, K, layout=gl.SliceLayout(0, layout))[None, :]
    else:
        sh = 0
        x_row = x_ptr + row.to(gl.int64) * stride_x + col0
    for c in gl.static_range(NRES):
        if FREE:
            _fetch_free(smem, c, x_row, lane, sh, n_own, row < M, x_ptr, K, CHUNK, HALVES,
                        _masked_chunk(c, NCHUNK, REALIGN), PADDED_TAILS or PADDED_LDS, tail, last, CS, CS)
        elif REALIGN:
            _fetch(slots.index(c), x_row, c * CHUNK + offs, N, row < M,
                   c == 0 or c >= NCHUNK - 2, _whole(c, T, K, sh, N, rows_layout))
        else:
            _fetch(slots.index(c), x_row, c * CHUNK + offs, N, row < M, c == NCHUNK - 1,
                   c * CHUNK + offs < n_own)
    while row < M:
        if REALIGN:
            base = (row.to(gl.int64) * pitch // WBASE) * WBASE
            sh = (row.to(gl.int64) * pitch - base).to(gl.int32)
            x_row = x_ptr + base
            if PADDED:  # y's row r starts r N in, at its own place in a vector
                y_start = row.to(gl.int64) * N
                y_sub = y_ptr + (y_start - sh)  # window position p at y_sub + p (SAFE's element by element)
                p_d = ((sh - y_start) & (K - 1)).to(gl.int32)  # y_row + p - p_d is on y's vector grid
                y_row = y_ptr + ((y_start - sh + p_d) // K) * K
                if PADDED_LDS:  # the word shift in the read address, the half-word one as prmt's selector
                    p_ctl = (gl.where((p_d % 2) == 1, 0x5432, 0x3210) + lane * 0)[:, None]
                else:
                    p_ctl = (p_d + gl.where(lane % 32 == 31, 8, 0))[:, None]
                p_hi = ((sh + N) // K) * K  # the end of the row's last whole vector of x
                # y's columns outside whole vectors lying within x's whole vectors (_resident_output's): before
                # lo + d - sh (lo: the first whole vector's start) and from hi - (K - d) % K - sh on; each at most
                # 2K - 2, as rows of [4, K]: two at the head, two at the tail
                y_head = ((sh + K - 1) // K) * K + p_d - sh
                y_tail = p_hi - (K - p_d) % K - sh
                p_pos = gl.arange(0, 4, layout=rows_layout)
                p_cols = gl.where(p_pos < 2, p_pos * K, y_tail + (p_pos - 2) * K)[:, None] + e_cols
                p_mask = p_cols < gl.where(p_pos < 2, y_head, N)[:, None]
            else:
                y_row = y_ptr + base
            # the row's part of its first and last vectors (2 x K; an edge vector wholly inside the row is in a
            # chunk; N > K: the two never coincide)
            e_start = gl.where(e_pos == 0, (sh // K) * K, ((sh + N - 1) // K) * K)[:, None]
            e_offs = e_start + e_cols
            e_inside = (e_start >= sh) & (e_start + K <= sh + N)
            e_mask = (e_offs >= sh) & (e_offs < sh + N) & ~e_inside
            x_e = gl.load(x_row + e_offs, mask=e_mask, other=float("-inf")).to(gl.float32)
        else:
            x_row = x_ptr + row.to(gl.int64) * stride_x + col0
            y_row = y_ptr + row.to(gl.int64) * N + col0
        m_t = gl.full([T], float("-inf"), gl.float32, rows_layout)
        s_t = gl.zeros([T], gl.float32, rows_layout)
        if CARRY:
            ms_t = gl.full([T], float("-inf"), gl.float32, rows_layout)
        gl.static_assert(CARRY or not KEEP, "KEEP's scale per chunk is CARRY's rounded running max")
        refs = ()
        held = ()
        if HOLD:  # the chunks past the slots, loaded into registers as the row starts (in flight through the slots')
            for c in gl.static_range(NRES, NCHUNK):
                cols = c * CHUNK + offs
                if _masked_chunk(c, NCHUNK, REALIGN):
                    keep = _whole(c, T, K, sh, N, rows_layout) if REALIGN else cols < n_own
                    held = held + (gl.load(x_row + cols, mask=keep, other=float("-inf")),)  # type: ignore[assignment]  # noqa: RUF005
                else:
                    held = held + (gl.load(x_row + cols),)  # type: ignore[assignment]  # noqa: RUF005
        for c in gl.static_range(NCHUNK):
            x = _chunk_x(slots, c, x_row, c * CHUNK + offs, n_own, sh, held, NCHUNK, NRES, K, REALIGN, HOLD, True,
                         layout, FREE, lane, PADDED_LDS, smem[:, None], CS)
            if ANCHOR:
                if c == 0:  # the warp's anchor; a warp with none (all -inf, or past _CARRY_MAX) marks its sums inf
                    m_a = _warp_max(gl.max(x, axis=1))
                    odd = (m_a == float("-inf")) | (gl.abs(m_a) >= _CARRY_MAX)
                    a_t = gl.where(odd, 0.0, _scaled(m_a))
                    s_t = gl.where(odd, float("inf"), s_t)
                # no running max. An explicit fma: where x is a masked chunk's where(keep, x, -inf) and feeds
                # nothing else, LLVM moves the multiply into the select and the subtraction no longer fuses;
                # the rounded product then loses the anchor's rounding (16 at 4e8: those elements weigh 2^-16)
                s_t += gl.sum(gl.exp2(gl.fma(x, _LOG2E, -a_t[:, None])), axis=1)
            else:
                m_new = gl.maximum(m_t, gl.max(x, axis=1))
                if MAXFIRST:  # the max only; the exponentials after it (below)
                    pass
                elif CARRY:  # s_t = sum of 2^(x log2 e - ms_t), ms_t the running max times log2 e rounded once
                    ms_new, s_t, p = _carry_update(x, m_new, ms_t, s_t)
                    ms_t = ms_new
                    if KEEP:  # p in (0, 1] kept as fp16 over x (each thread its own elements); ms_new: -inf gives 0
                        if c < NRES:
                            slots._reinterpret(gl.float16, [NRES, T, K], slots.layout).index(c).store(
                                p.to(gl.float16))
                        refs = refs + (ms_new,)  # type: ignore[assignment]  # noqa: RUF005 (Triton: + builds tuples)
                else:
                    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new) * _LOG2E  # all -inf so far: (-inf, 0)
                    s_t = s_t * gl.exp2(m_t * _LOG2E - m_safe) + gl.sum(gl.exp2(x * _LOG2E - m_safe[:, None]),
                                                                        axis=1)
                m_t = m_new
        # the edge vectors (REALIGN) where the row stats take them; s_t stands in, unread, for aligned rows
        if REALIGN:
            edges_x = x_e
        else:
            edges_x = s_t
        if not ANCHOR:  # ANCHOR's row max is unknown unless its redo runs (below)
            if REALIGN:
                m_row = gl.maximum(gl.max(m_t, axis=0), gl.max(gl.max(x_e, axis=1), axis=0))
            else:
                m_row = gl.max(m_t, axis=0)
        if ANCHOR:  # the largest anchor is the shift; each thread's sum brought to it once (no flush of a big sum)
            shift = gl.max(a_t, axis=0)
            # anchor - shift first (exact where it matters): log2 sum added to an anchor of 5.8e8 (offset logits)
            # would be rounded to its ulp of 64 (the H100 found 2^30 outputs), at 8.7e4 to 1/128 (0.27% off)
            total = gl.sum(gl.exp2(gl.log2(s_t) + (a_t - shift)), axis=0)
            if REALIGN:
                total += gl.sum(gl.sum(gl.exp2(gl.fma(x_e, _LOG2E, -shift)), axis=1), axis=0)
            m_row = shift * 0.0  # under _CARRY_MAX: every anchor is, and no element is far past its anchor
            if ~((total > 0.0) & (total < float("inf"))):  # no finite sum (NaN fails both): CARRY's pass again
                m_row, shift, total = _carry_again(slots, x_row, offs, n_own, sh, held, edges_x, NCHUNK, NRES, K,
                                                   REALIGN, HOLD, layout, FREE, lane, PADDED_LDS, smem[:, None], CS)
            lsum = gl.log2(total)
        elif MAXFIRST:  # p = 2^((x - max) log2 e) once an element, summed and kept as fp16 for the output pass
            shift = gl.where(m_row == float("-inf"), 0.0, m_row)  # all -inf: p = 0, sum 0, y NaN (as the oracle's)
            s_t = gl.zeros([T], gl.float32, rows_layout)
            kept = ()
            for c in gl.static_range(NCHUNK):
                x = _chunk_x(slots, c, x_row, c * CHUNK + offs, n_own, sh, held, NCHUNK, NRES, K, REALIGN, HOLD, False,
                             layout)
                p = gl.exp2((x - shift) * _LOG2E)
                s_t += gl.sum(p, axis=1)
                if c < NRES:  # each thread rewrites only the elements its own copies brought
                    slots._reinterpret(gl.float16, [NRES, T, K], slots.layout).index(c).store(p.to(gl.float16))
                elif HOLD:
                    kept = kept + (p.to(gl.float16),)  # type: ignore[assignment]  # noqa: RUF005
            total = gl.sum(s_t, axis=0)
            if REALIGN:
                total += gl.sum(gl.sum(gl.exp2((x_e - shift) * _LOG2E), axis=1), axis=0)
            lsum = gl.log2(total)
            held = kept
        elif CARRY:  # every exponent against one rounded value, the row's max times log2 e; log2 of the sum apart
            shift, total = _carry_shift_total(m_t, ms_t, s_t, edges_x, REALIGN)
            if PARTS > 1:  # the row's max, shift and sum from every part's (max, sum against its own shift)
                m_row, shift, total = _meet_parts(w_ptr + row.to(gl.int64) * PARTS, part, m_row, total, PARTS,
                                                  rows_layout)
            lsum = gl.log2(total)
        else:
            total = gl.sum(s_t * gl.exp2(m_t * _LOG2E - m_row * _LOG2E), axis=0)
            if REALIGN:
                total += gl.sum(gl.sum(gl.exp2(x_e * _LOG2E - m_row * _LOG2E), axis=1), axis=0)
            shift = m_row * _LOG2E + gl.log2(total)
            lsum = 0.0
        ahead = row + step
        if REALIGN:
            a_base = (ahead.to(gl.int64) * pitch // WBASE) * WBASE
            a_sh = (ahead.to(gl.int64) * pitch - a_base).to(gl.int32)
            a_row = x_ptr + a_base
        else:
            a_sh = 0
            a_row = x_ptr + ahead.to(gl.int64) * stride_x + col0
        if PADDED:  # y's ends outside whole vectors, loaded while the output pass runs
            p_x = gl.load(x_row + sh + p_cols, mask=p_mask, other=0.0).to(gl.float32)
        else:  # unused
            p_ctl = lane
            p_d = lane
            p_hi = lane
        # CARRY's call twice: Triton 3.6 fails to lower one runtime `if` on a flag set only under ONE_SHIFT
        if ONE_SHIFT:  # CARRY without KEEP or MAXFIRST (the host's guarantee)
            if gl.abs(m_row) < _FOLD_MAX:  # one shift: y = 2^(x log2 e - (shift + log2 sum)), one multiply-add
                _resident_output(slots, x_row, y_row, a_row, offs, n_own, sh, a_sh, ahead < M, shift + lsum, NCHUNK,
                                 NRES, K, REALIGN, layout, False, 0.0, False, (), HOLD, held, False, FREE, smem, lane,
                                 HALVES, PADDED, p_ctl, p_d, p_hi, PADDED_AHEAD, PADDED_TAILS, tail, last,
                                 PADDED_LDS, CS)
            else:
                _resident_output(slots, x_row, y_row, a_row, offs, n_own, sh, a_sh, ahead < M, shift, NCHUNK, NRES,
                                 K, REALIGN, layout, CARRY, lsum, KEEP, refs, HOLD, held, MAXFIRST, FREE, smem, lane,
                                 HALVES, PADDED, p_ctl, p_d, p_hi, PADDED_AHEAD, PADDED_TAILS, tail, last,
                                 PADDED_LDS, CS)
        else:
            _resident_output(slots, x_row, y_row, a_row, offs, n_own, sh, a_sh, ahead < M, shift, NCHUNK, NRES, K,
                             REALIGN, layout, CARRY, lsum, KEEP, refs, HOLD, held, MAXFIRST, FREE, smem, lane, HALVES,
                             PADDED, p_ctl, p_d, p_hi, PADDED_AHEAD, PADDED_TAILS, tail, last,
                             PADDED_LDS, CS)
        if PADDED:  # CARRY's or the fold's (no MAXFIRST: the output pass's assertion)
            if CARRY:
                gl.store(y_sub + sh + p_cols, gl.exp2(p_x * _LOG2E - shift - lsum).to(y_ptr.dtype.element_ty),
                         mask=p_mask)
            else:
                gl.store(y_sub + sh + p_cols, gl.exp2(p_x * _LOG2E - shift).to(y_ptr.dtype.element_ty), mask=p_mask)
        elif REALIGN:
            if MAXFIRST:
                gl.store(y_row + e_offs, gl.exp2((x_e - shift) * _LOG2E - lsum).to(y_ptr.dtype.element_ty),
                         mask=e_mask)
            elif CARRY:
                gl.store(y_row + e_offs, gl.exp2(x_e * _LOG2E - shift - lsum).to(y_ptr.dtype.element_ty), mask=e_mask)
            else:
                gl.store(y_row + e_offs, gl.exp2(x_e * _LOG2E - shift).to(y_ptr.dtype.element_ty), mask=e_mask)
        # The max is folded into each exponent (one multiply-add an element), which loses precision as |max| grows
        # and overflows past 2.36e38 (_FOLD_MAX; with CARRY precision holds, _CARRY_MAX bounds the sum). SAFE: a row
        # whose |max| reaches that bound (a branch per row, the same for every thread) is summed and written again
        # with the max subtracted first; other rows pay one comparison, after their output pass.
        if SAFE_ROWS and gl.abs(m_row) >= (_CARRY_MAX if CARRY else _FOLD_MAX):
            if REALIGN:  # the edge vectors read again, so they are not held through the common output pass
                x_e = gl.load(x_row + e_offs, mask=e_mask, other=float("-inf")).to(gl.float32)
                edges = gl.sum(gl.sum(gl.exp2((x_e - m_row) * _LOG2E), axis=1), axis=0)
            else:
                edges = 0.0
            # Inlined: as a called function (noinline, 32 registers instead of 40-64) it ran ordinary rows 0.4-4.3%
            # slower at 40000-131072 wide (H200, evidence/h200/2026-12-02_pending_runs/1_*). PARTS: every part
            # redoes the whole row (the same values from the same loop: the rewrites agree; such rows are rare). Its
            # reduction's barrier orders the rewrites after this program's common-pass writes (the same element may
            # come from another thread when a part starts mid-chunk), so the last write of every element is a rewrite.
            y_one = y_sub if PADDED else y_row  # PADDED: y at window positions, not on its vector grid
            log_total = _resident_subtracted(x_row - col0, y_one - col0, N, sh, m_row, edges, NCHUNK * PARTS, K,
                                             REALIGN, layout)
            if REALIGN:
                gl.store(y_one + e_offs, gl.exp2((x_e - m_row) * _LOG2E - log_total).to(y_ptr.dtype.element_ty),
                         mask=e_mask)
        row = ahead
    cp.wait_group(0)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)  # triton.cdiv is a @jit function: calling it on the host costs microseconds


Launch = tuple[Callable[..., object], dict[str, int]]


class _Staged(NamedTuple):
    """Rows wider than a register tile: _softmax_staged over batches of rows that fit in L2."""

    launch: Callable[..., object]
    meta: dict[str, int]
    n_parts: int  # programs per row
    rows_per_batch: int
    n_batches: int


class _Split(NamedTuple):
    """Rows wider than a register tile, on a GPU: _softmax_split, one program per chunk of a row."""

    launch: Callable[..., object]
    meta: dict[str, int]
    n_parts: int  # programs per row


# Launch plans per (shape, row stride, dtype, device): a call of a known shape costs a dict lookup instead of the
# planning arithmetic, which matters when the kernel itself takes 2 us. Bounded so odd shape streams cannot grow it.
_PLANS: dict[tuple[object, ...], Launch | _Staged | _Split] = {}
_MAX_PLANS = 4096


def _staged_plan(m: int, n: int, elsize: int, align: int) -> _Staged:
    chunk = _STAGED_CHUNK_BYTES // elsize
    n_parts = _cdiv(n, chunk * _STAGED_CHUNKS)
    rows_per_batch = min(m, max(1, _STAGED_BATCH_BYTES // (n * elsize)))
    n_batches = _cdiv(m, rows_per_batch)
    grid = (2 * n_batches * rows_per_batch * n_parts,)
    meta = {"CHUNK": chunk, "CHUNKS": _STAGED_CHUNKS, "BLOCK_S": triton.next_power_of_2(n_parts), "ALIGN": align,
            "num_warps": _STAGED_WARPS}
    return _Staged(_softmax_staged[grid], meta, n_parts, rows_per_batch, n_batches)


def _split_plan(m: int, n: int, elsize: int, align: int, chunk_bytes: int = 0, warps: int = 0) -> _Split:
    chunk = (chunk_bytes or _SPLIT_CHUNK_BYTES) // elsize
    n_parts = _cdiv(n, chunk)
    meta = {"CHUNK": chunk, "BLOCK_S": triton.next_power_of_2(n_parts), "ALIGN": align,
            "num_warps": warps or _SPLIT_WARPS}
    return _Split(_softmax_split[(m * n_parts,)], meta, n_parts)


def _split_realigned_plan(m: int, n: int, stride: int, elsize: int, chunk_bytes: int = 0, warps: int = 0) -> _Split:
    vec = 16 // elsize
    chunk = (chunk_bytes or _SPLIT_REALIGNED[elsize][0]) // elsize
    n_parts = _cdiv(n + vec - 1, chunk)  # a row spans at most n + vec - 1 window positions
    meta = {"CHUNK": chunk, "BLOCK_S": triton.next_power_of_2(n_parts), "ALIGN": _align(elsize, stride - n),
            "VEC": vec, "REALIGNED": True, "num_warps": warps or _SPLIT_REALIGNED[elsize][1]}
    return _Split(_softmax_split[(m * n_parts,)], meta, n_parts)


@functools.cache
def _smem_per_sm(index: int) -> int:
    """Shared memory per SM of a CUDA device; 0 before sm_80 (no cp.async: the resident path does not apply)."""
    props = torch.cuda.get_device_properties(index)
    return int(props.shared_memory_per_multiprocessor) if props.major >= 8 else 0


def _resident_budget(smem_per_sm_bytes: int) -> int:
    """Shared memory an SM gives rows: its shared memory less scratch, at most _RESIDENT_CAP_BYTES."""
    return max(0, min(_RESIDENT_CAP_BYTES, smem_per_sm_bytes - _RESIDENT_RESERVE_BYTES))


def _solo_budget(smem_per_sm_bytes: int) -> int:
    """Shared memory one program alone on an SM gives its row: at most _RESIDENT_SOLO_CAP_BYTES."""
    return max(_resident_budget(smem_per_sm_bytes),
               min(_RESIDENT_SOLO_CAP_BYTES, smem_per_sm_bytes - _RESIDENT_SOLO_RESERVE_BYTES))


def _resident_plan(m: int, n: int, align: int, elsize: int, n_sm: int, smem_per_sm_bytes: int, warps: int = 0,
                   k: int = 0, per_sm: int = 0, realign: bool = False, stagger: int | None = None,
                   budget_bytes: int = 0, carry: bool = True, keep: bool | None = None,
                   hold: bool | None = None, parts: int = 1, maxfirst: bool | None = None,
                   free: bool | None = None, halves: bool | None = None, line: int | None = None,
                   one_shift: bool | None = None, anchor: bool | None = None, padded: bool = False,
                   padded_ahead: int = 1, padded_tails: bool = False, padded_lds: bool = False) -> Launch | None:
    """The launch for an m x n softmax whose rows and row stride are multiples of `align` elements, or None where
    this path does not apply (accesses narrower than cp.async's 4 bytes, no shared memory to speak of). Defaults per
    the H200 sweep: one 16-byte vector per thread per chunk; two programs per SM on 8 warps where two rows fit, one
    on 16 warps where one does in _solo_budget (half of them started _RESIDENT_STAGGER clocks late), one on 32 warps
    streaming the rest otherwise. warps / k / per_sm / stagger / budget_bytes (shared memory an SM gives rows)
    override them. realign (contiguous rows, or padded ones with `padded`): each row through its window of whole
    k-element vectors (REALIGN), any width. carry=False: the fold without CARRY (offset logits past _FOLD_MAX take
    the second look). keep: KEEP (default _RESIDENT_KEEP; 16-bit rows with CARRY only: the kept exponentials are
    fp16). hold: HOLD where chunks
    are streamed (default _RESIDENT_HOLD for aligned 16-bit rows). Aligned 16-bit rows of up to
    _RESIDENT_PAIR_MAX_BYTES that two whole rows do not fit take PAIR (two 16-warp programs an SM, HOLD, registers
    capped) unless per_sm, warps or budget_bytes is given. parts > 1 (experiment, aligned rows, CARRY): each row
    cut into `parts` parts of whole vectors on sibling programs (PARTS), every size above taken for a part; _run
    passes the zeroed words they meet through.
    maxfirst: MAXFIRST, one exponential an element (default _RESIDENT_MAXFIRST; 16-bit rows, no KEEP or PARTS).
    free: FREE, no CTA barrier inside a row's passes (default _RESIDENT_FREE; 16-byte vectors, whole rows, no KEEP,
    MAXFIRST or PARTS).
    halves: FREE's copies as two 8-byte halves a vector on aligned rows on the 8-byte grid (align = k / 2; default
    _RESIDENT_HALVES). line: LINE, REALIGN's windows starting on a multiple of `line` elements instead of a vector
    (default _RESIDENT_LINE_BYTES // elsize, a 128-byte line: 64 at 16 bits, where it keeps the config windows on
    vectors get; 0: a vector). one_shift: ONE_SHIFT (default
    _RESIDENT_ONE_SHIFT; CARRY without KEEP or MAXFIRST). anchor: ANCHOR (default _RESIDENT_ANCHOR; CARRY without
    KEEP, MAXFIRST, PARTS or ONE_SHIFT). padded (with realign): PADDED, rows of a padded x through windows laid by
    the row stride the launch is given (any stride), y in whole vectors on its own grid; padded_ahead: how many
    chunks ahead lane 31's next vectors are loaded (PADDED_AHEAD, default 1); padded_tails: PADDED_TAILS, lane 31's
    next vectors copied into shared memory with each chunk instead; padded_lds: PADDED_LDS, those copies laid after
    each warp's vectors and every thread's shifted vector read at a shifted shared-memory address (one of the two)."""
    budget = budget_bytes or _resident_budget(smem_per_sm_bytes)
    if (align * elsize < _MIN_COPY_BYTES and not realign) or budget < 32 * 1024:
        return None
    k = k or 16 // elsize
    if padded and not realign:
        raise ValueError("PADDED sees padded rows through windows (realign)")
    if parts > 1 and (realign or not carry or n % (parts * k)):
        # equal parts of whole vectors, so that only a part's last chunk can be partial (its masks sit there)
        raise ValueError("PARTS cuts aligned rows into equal parts of whole vectors, under CARRY")
    pair = (not (per_sm or warps or budget_bytes or realign) and elsize == 2 and align == k == 8
            and budget < 2 * (n // parts) * elsize <= 2 * _RESIDENT_PAIR_MAX_BYTES
            and smem_per_sm_bytes >= _RESIDENT_PAIR_BUDGET_BYTES + _RESIDENT_SOLO_RESERVE_BYTES)
    if pair:
        per_sm, warps, budget = 2, _RESIDENT_PAIR_WARPS, _RESIDENT_PAIR_BUDGET_BYTES
        hold = True if hold is None else hold

    def layout(span: int) -> tuple[int, int, int, int, int]:
        """(programs an SM, shared memory a program, warps, chunks, chunks held) for rows of `span` positions."""
        row_bytes = span * elsize
        ps = per_sm or (2 if 2 * row_bytes <= budget else 1)
        room = (budget_bytes or _solo_budget(smem_per_sm_bytes)) if ps == 1 else budget // ps
        w = warps or (8 if ps == 2 else 16 if row_bytes <= room else _RESIDENT_STREAM_WARPS)
        chunks = _cdiv(span, 32 * w * k)
        return ps, room, w, chunks, min(chunks, room // (32 * w * k * elsize))

    if line is None and realign and _RESIDENT_LINE_BYTES:
        # LINE by default where its span (up to 63 positions more) keeps the programs an SM, the warps and a whole
        # row in shared memory; at the few widths where it does not (51138-51193, 114626-114681 on the H200's 228 KB),
        # windows on vectors
        on, off = layout(n + _RESIDENT_LINE_BYTES // elsize - 1), layout(n + k - 1)
        line = _RESIDENT_LINE_BYTES // elsize if (on[0], on[2], on[3] == on[4]) == (off[0], off[2], off[3] == off[4]) \
            else 0
    line = (line or 0) if realign else 0
    # an unaligned row can start mid-vector (LINE: mid-line); a part is its own row
    per_sm, room, warps, n_chunks, n_res = layout(n + max(k, line) - 1 if realign else n // parts)
    chunk_bytes = 32 * warps * k * elsize
    if n_res < 1:
        raise ValueError(f"a {chunk_bytes}-byte chunk does not fit {room} bytes of shared memory")
    if stagger is None:
        stagger = _RESIDENT_STAGGER if per_sm == 1 and n_res == n_chunks else 0
    keep = (_RESIDENT_KEEP and carry and elsize == 2) if keep is None else keep
    if keep and (elsize != 2 or not carry):
        raise ValueError("KEEP keeps fp16 exponentials over 16-bit rows, under CARRY")
    maxfirst = (_RESIDENT_MAXFIRST and elsize == 2 and not keep and parts == 1) if maxfirst is None else maxfirst
    if maxfirst and (elsize != 2 or keep or parts > 1):
        raise ValueError("MAXFIRST keeps fp16 exponentials over 16-bit rows, without KEEP or PARTS")
    halves = (_RESIDENT_HALVES if halves is None else halves) and not realign and 2 * align == k
    free_ok = k * elsize == 16 and (realign or align == k or halves) and not (keep or maxfirst) and parts == 1
    free = (_RESIDENT_FREE and free_ok) if free is None else free
    if free and not free_ok:
        raise ValueError("FREE copies whole 16-byte vectors of x (no KEEP, MAXFIRST or PARTS)")
    hold = (_RESIDENT_HOLD and elsize == 2 and not realign if hold is None else hold) and n_res < n_chunks
    meta = {"NCHUNK": n_chunks, "NRES": n_res, "K": k, "ALIGN": 1 if realign else align, "REALIGN": realign,
            "STAGGER": stagger, "CARRY": carry, "KEEP": keep, "HOLD": hold, "num_warps": warps}
    if pair:  # both programs' registers must fit the SM's 65536 (sm_80 to sm_90)
        meta["maxnreg"] = 65536 // (per_sm * 32 * warps)
    if parts > 1:
        meta["PARTS"] = parts
    if maxfirst:
        meta["MAXFIRST"] = True
    if free:
        meta["FREE"] = True
    if line:
        if line % k or line > 32 * warps * k:
            raise ValueError("LINE is a whole number of vectors within a chunk")
        meta["LINE"] = line
    one_shift = (_RESIDENT_ONE_SHIFT if one_shift is None else one_shift) and carry and not (keep or maxfirst)
    if one_shift:
        meta["ONE_SHIFT"] = True
    anchor_ok = carry and not (keep or maxfirst or one_shift) and parts == 1
    if (_RESIDENT_ANCHOR and anchor_ok) if anchor is None else anchor:
        if not anchor_ok:
            raise ValueError("ANCHOR takes CARRY's pass without KEEP, MAXFIRST, PARTS or ONE_SHIFT")
        meta["ANCHOR"] = True
    if padded:
        meta["PADDED"] = True
        if padded_ahead != 1:
            meta["PADDED_AHEAD"] = padded_ahead
        if padded_tails or padded_lds:  # a chunk of shared memory more (tails): a slot fewer where room is short
            if padded_tails and padded_lds:
                raise ValueError("PADDED_TAILS and PADDED_LDS are two ways to one tail: ask for one")
            if (n_res + 1) * chunk_bytes > room:
                meta["NRES"] = n_res = n_res - 1
            if n_res < 1 or not free:
                raise ValueError("PADDED_TAILS / PADDED_LDS: FREE's copies and room for a chunk more")
            meta["PADDED_LDS" if padded_lds else "PADDED_TAILS"] = True
    return _softmax_resident[(min(m * parts, per_sm * n_sm // parts * parts),)], meta


def _window(n: int, elsize: int) -> int:
    """The realigned path's tile: an unaligned row can start mid-vector, so it spans up to N + VEC - 1 elements."""
    return triton.next_power_of_2(n if n % (16 // elsize) == 0 else n + 16 // elsize - 1)


def _parts(n: int, elsize: int, max_span: int = _PIPELINED_MIN_N) -> tuple[int, int, int]:
    """The realigned window: spans of up to _PIPELINED_MIN_N cut in at most three power-of-two parts (0: none),
    covering the span rounded up to an eighth of its largest power of two (at most 12.5% of the lanes idle, against
    up to half for one window) and to _MIN_PART (a part under half a CTA's vectors is spread over several threads
    each); one power-of-two window where seven eighths would need four parts (spans of 14337-15360), and over wider
    spans, where parts measured slower (H200: 70.5% of copy at 25249 wide on 16384+8192+2048 lanes against 78.7% on
    32768; docs/TASKS.md). max_span: the widest span cut in parts (benchmarks cut wider ones)."""
    vec = 16 // elsize
    span = n if n % vec == 0 else n + vec - 1
    top = 1 << (span.bit_length() - 1)
    quantum = max(vec, top // 8, _MIN_PART)
    rounded = _cdiv(span, quantum) * quantum
    if bin(rounded - top).count("1") > 2:  # seven eighths: four parts; the kernel takes three
        rounded = 2 * top
    if rounded == 2 * top or span > max_span:
        return triton.next_power_of_2(span), 0, 0
    rest = [quantum << bit for bit in (2, 1, 0) if (rounded - top) & (quantum << bit)] + [0, 0]
    return top, rest[0], rest[1]


def _thread_parts(n: int, elsize: int, threads: int) -> tuple[int, int, int]:
    """A realigned window for THREAD_STATS: the span rounded up to whole vectors a thread (threads x one 16-byte
    vector of lanes), in at most three power-of-two parts, else one power-of-two window."""
    vec = 16 // elsize
    span = n if n % vec == 0 else n + vec - 1
    quantum = threads * vec
    rounded = _cdiv(span, quantum) * quantum
    bits = [1 << b for b in range(rounded.bit_length() - 1, -1, -1) if rounded >> b & 1]
    if len(bits) > 3:
        return triton.next_power_of_2(span), 0, 0
    window, part1, part2 = [*bits, 0, 0][:3]
    return window, part1, part2


def _lanes(n: int, elsize: int) -> int:
    return sum(_parts(n, elsize))


def _narrow_config(parts: tuple[int, int, int]) -> tuple[int, int, bool]:
    """(programs per SM, warps, FAST) for a 16-bit realigned window of at most _PIPELINED_MIN_N lanes. A part smaller
    than a CTA's vectors (32 x warps x 8 elements) is replicated across threads and costs far more than its lanes,
    so the warps follow the smallest part. Up to _REALIGNED_SMALL_WINDOW lanes: 8 programs per SM on 4 warps up to
    _REALIGNED_TINY_LANES or with a 1024 part, else 8 (H200: 8192 x 3001 on 2048+1024 lanes 85% of copy on 4
    warps, 70% on 8; 3921 x 6608 on 4096+2048+1024 85% against 69%); then 2 programs per SM on 16 warps, or on 8
    where a part is under 2048 or the window has three (2000 x 12345 on 8192+4096+1024: 75.1% on 8 warps, 53.7% on
    16; 1960 x 13778 on 8192+4096+2048: 77.9% against 54.6%, the campaign's `hidden_spike`, sweep softmax_mid)."""
    lanes = sum(parts)
    smallest = min(p for p in parts if p)
    if lanes <= _REALIGNED_SMALL_WINDOW:
        per_sm, warps, fast = _REALIGNED_SMALL
        return per_sm, 4 if lanes <= _REALIGNED_TINY_LANES or smallest < 2048 else warps, fast
    return _REALIGNED_MID, 16 if 2 * smallest >= 32 * 16 * 8 and not parts[2] else 8, False


# What one SM holds at once (sm_90, as on every GPU the plans target): registers, threads, programs, shared memory.
_SM_REGISTERS, _SM_THREADS, _SM_PROGRAMS, _SM_SHARED = 65536, 2048, 32, 228 * 1024
# Programs an SM a persistent register-kernel build holds, per (kernel, meta, dtype, device): learned from the first
# launch's build (Triton loads a module, and so knows its registers, only when it launches it).
_RESIDENT: dict[tuple[object, ...], int] = {}


def _resident_per_sm(regs: int, smem: int, warps: int) -> int:
    """Programs of a build one SM holds at once, from its registers a thread (allocated 8 at a time), threads and
    shared memory."""
    threads = 32 * warps
    return max(1, min(_SM_REGISTERS // (-(-regs // 8) * 8 * threads), _SM_THREADS // threads, _SM_PROGRAMS,
                      _SM_SHARED // smem if smem else _SM_PROGRAMS))


class _Persistent:
    """A persistent launch (program p takes rows p, p + grid, ...) of `programs` whose extra programs, where its build
    lets the SMs hold fewer at once, never make a part-full last wave. Plans count programs an SM from sweeps; a build
    that holds more registers than the count allows runs the programs past what the SMs hold as later waves. Where
    the plan's count is a whole number of what is held (16-warp windows of 94-128 registers: 2 planned, 1 held), the
    waves are whole and the plan stands: those counts were swept as they ran (2 against 1 an SM: within 2 points
    either way, `_few_rows_per_sm`). Where it is not (fp16 rows of 2049-3072 on lines, 4 warps, 67 registers: 7 held
    of 8; THREAD_STATS' 8192-lane window on 8 warps, 80: 3 of 8), the last wave leaves SMs idle, so from the second
    launch on (the first one's build says what an SM holds) the grid is what the SMs hold. H200, CUPTI, fp16 8192 x
    3001: 72.4% of copy planned (8 asked, 7 held) against 83.4% for the same window on 64 registers
    (evidence/h200/2026-12-06_twentieth/3_*); `_THREAD_STATS_PER_SM`'s 6 of 8 gained 4-10 points the same way."""

    def __init__(self, kernel: triton.JITFunction, programs: int) -> None:
        self.kernel = kernel
        self.programs = programs  # the plan's grid: its programs an SM x the SMs, or one a row where there are fewer

    def _key(self, x: torch.Tensor, meta: dict[str, object]) -> tuple[object, ...]:
        return self.kernel.fn.__name__, tuple(sorted(meta.items())), x.dtype, x.device

    def _grid(self, held: int | None, device: torch.device) -> int:
        if held is None:  # no launch of this build yet: as planned
            return self.programs
        slots = held * _num_sms(device)
        return slots if self.programs > slots and self.programs % slots else self.programs

    def grid(self, x: torch.Tensor, **meta: object) -> int:
        """The programs this launch runs on x: the plan's, or what the SMs hold where the plan's would end on a
        part-full wave (known once a launch of this build has run)."""
        return self._grid(_RESIDENT.get(self._key(x, meta)), x.device)

    def __call__(self, x: torch.Tensor, *args: object, **meta: object) -> object:
        key = self._key(x, meta)  # once a call: the launch's host time counts on small shapes
        held = _RESIDENT.get(key)
        compiled = self.kernel[(self._grid(held, x.device),)](x, *args, **meta)
        regs = getattr(compiled, "n_regs", None)  # None: interpreted, or built without a launch
        if held is None and isinstance(regs, int) and regs > 0:
            _RESIDENT[key] = _resident_per_sm(regs, int(getattr(compiled.metadata, "shared", 0) or 0),
                                              int(meta["num_warps"]))  # type: ignore[call-overload]
        return compiled


def _realigned_plan(m: int, n: int, stride: int, elsize: int, n_sm: int, per_sm: int, warps: int,
                    fast: bool, parts: tuple[int, int, int] | None = None) -> Launch:
    """_softmax_realigned on per_sm x n_sm persistent programs (benchmarks/kernel_sweep.py sweeps the arguments);
    the window in `parts` (default _parts(n, elsize); (_window(n, elsize), 0, 0) is the one-window kernel). 16-bit x
    is read as words (WORDS) where its rows start on y's vector grid, as elements where they are padded off it: there
    words took 128-255 registers against 56-241 and ran at 34-49% of copy where elements ran at 56-80% (H200, CUPTI,
    13 shapes in both dtypes, family softmax_words_padded, evidence/h200/2026-12-04_padded_words/3_*: the campaign's
    hidden_odd 1898 x 14293 padded by 20 79.3% against 48.7% bf16, 46-48% planned with words in that campaign, 2_*)."""
    window, part1, part2 = parts or _parts(n, elsize)
    align_x = _align(elsize, stride - n)
    words = elsize == 2 and align_x * elsize == 16
    return _Persistent(_softmax_realigned, min(m, per_sm * n_sm)), {"WINDOW": window, "PART1": part1, "PART2": part2,
                                                            "VEC": 16 // elsize, "FAST": fast, "ALIGN_X": align_x,
                                                            "WORDS": words, "num_warps": warps}


def _lines_where_covered(launch: Launch, n: int, elsize: int) -> Launch:
    """A 16-bit realigned register launch with _REALIGNED_LINE_BYTES' windows on lines where its parts cover them
    (n + line - 1 lanes), else as it is."""
    meta = launch[1]
    line = _REALIGNED_LINE_BYTES // elsize
    if not _REALIGNED_LINE_BYTES or elsize != 2 or meta["WINDOW"] + meta["PART1"] + meta["PART2"] < n + line - 1:
        return launch
    return _realigned_on_lines(launch, n, elsize)


def _realigned_on_lines(launch: Launch, n: int, elsize: int) -> Launch:
    """A realigned launch (_realigned_plan's) with its windows on 128-byte lines (LINE): its parts must cover the
    n + line - 1 lanes a row starting anywhere in a line spans; its registers capped where _LINE_MAXNREG says."""
    meta = launch[1]
    line = _LINE_BYTES // elsize
    if "WINDOW" not in meta or meta["WINDOW"] + meta["PART1"] + meta["PART2"] < n + line - 1:
        raise ValueError(f"LINE: the window does not cover {n} + {line - 1} lanes")
    cap = _LINE_MAXNREG.get((meta["WINDOW"], meta["PART1"], meta["PART2"], meta["num_warps"]))
    return launch[0], {**meta, "LINE": line, **({"maxnreg": cap} if cap else {})}


def _thread_stats_parts(n: int, elsize: int, parts: tuple[int, int, int], warps: int,
                        key: torch.dtype) -> tuple[int, int, int] | None:
    """The window THREAD_STATS takes for a 16-bit realigned launch on `parts` and `warps`, or None: two parts of whole
    vectors a thread where they are fewer lanes, else the planned parts where each holds a vector a thread, else
    those two parts (a 1024-lane part on 8 warps: 8192+2048, not 8192+1024); only a window _THREAD_STATS_WINDOWS
    lists for the dtype (16-bit ones only) and warps, or _HALF_EXPS_WINDOWS."""
    cut = _thread_parts(n, elsize, 32 * warps)
    eligible = min(p for p in parts if p) >= 32 * warps * 16 // elsize
    chosen = cut if not cut[2] and sum(cut) < sum(parts) else parts if eligible else cut
    listed = _THREAD_STATS_WINDOWS.get(key, {}).get(warps, ()) + _HALF_EXPS_WINDOWS.get(key, {}).get(warps, ())
    return chosen if chosen in listed else None


def _few_rows_per_sm(m: int, n_sm: int, per_sm: int, warps: int, lanes: int) -> int:
    """One program an SM, not two, for 16-warp windows of 16384 lanes or more over few rows: where two an SM would
    run at most two rounds past the first, or end on a round at most half full (H200, CUPTI, sweep softmax_grid,
    evidence/h200/2026-12-04_thread_stats_windows/1_*, 132 against 264 programs, bf16 / fp16: 500 x 32000 78.1 /
    79.2% against 73.7 / 75.8%, 625 x 30804 (the campaign's hidden_offset) 75.3 / 75.5% against 73.8 / 73.1%, 800 x
    16400 66.7 / 66.2% against 61.8 / 61.4%, 900 x 20001 77.1 / 75.6% against 74.2 / 73.4%; where the last round is
    fuller two stay ahead: 700 x 28001 71.4 / 72.9% against 73.1 / 75.3%, 1723 x 25249 81.4 / 81.5% against 81.7 /
    82.1%). Not past four rounds of two an SM (2048 rows: one an SM from 2.1 points behind to 2.1 ahead by width)."""
    programs = per_sm * n_sm
    if warps != 16 or per_sm != 2 or lanes < 16384 or not programs < m < 4 * programs:
        return per_sm
    return 1 if m <= 2 * programs or 0 < m % programs <= n_sm else per_sm


def _realigned_launch(m: int, n: int, stride: int, elsize: int, n_sm: int, config: tuple[int, int, bool],
                          parts: tuple[int, int, int], key: torch.dtype) -> Launch:
    """The realigned launch on `config` and `parts`, with THREAD_STATS where _thread_stats_parts takes it (16-bit
    rows only), its exponentials in fp16 on _HALF_EXPS_WINDOWS."""
    ts = _thread_stats_parts(n, elsize, parts, config[1], key)
    if ts is None:
        return _realigned_plan(m, n, stride, elsize, n_sm, *config, parts)
    per_sm = _few_rows_per_sm(m, n_sm, _THREAD_STATS_PER_SM.get(ts, config[0]), config[1], sum(ts))
    launch, meta = _realigned_plan(m, n, stride, elsize, n_sm, per_sm, *config[1:], ts)
    half = ts in _HALF_EXPS_WINDOWS.get(key, {}).get(config[1], ())
    on_grid = _align(elsize, n, stride) * elsize == 16  # every row starts on a 16-byte vector
    wordless = ts in _WORDLESS_WINDOWS.get(key, ()) or (on_grid and ts in _WORDLESS_ALIGNED_WINDOWS.get(key, ()))
    words = meta["WORDS"] and not wordless
    return launch, {**meta, "THREAD_STATS": 32 * config[1], "WORDS": words, **({"HALF_EXPS": True} if half else {})}


def _padded_plan(m: int, n: int, stride: int, n_sm: int, compiled_gpu: bool) -> Launch:
    """16-bit rows of 2049-32768 padded off the vector grid on the realigned kernel (_REALIGNED_PADDED_*), with
    PF_L1 where it measured faster (compiled only: the prefetch is inline PTX); x read as elements (_realigned_plan)."""
    if n > _PIPELINED_MIN_N:  # the window in parts up to _MAX_FUSED_N lanes; one window where four parts would do
        parts = _parts(n, 2, max_span=_MAX_FUSED_N)
        if compiled_gpu and parts[1] and sum(parts) <= _PF_L1_PARTS_MAX_LANES:
            return _prefetching(_realigned_plan(m, n, stride, 2, n_sm, *_PF_L1_WIDE, parts))
        if compiled_gpu and not parts[1]:
            return _prefetching(_realigned_plan(m, n, stride, 2, n_sm, *_PF_L1_ONE_WINDOW, parts))
        return _realigned_plan(m, n, stride, 2, n_sm, *_REALIGNED_PADDED_WIDE, parts)
    if compiled_gpu and _window(n, 2) == _PF_L1_NARROW_WINDOW:
        return _prefetching(_realigned_plan(m, n, stride, 2, n_sm, *_PF_L1_NARROW, (_PF_L1_NARROW_WINDOW, 0, 0)))
    if compiled_gpu and _lanes(n, 2) == _PF_L1_MID_LANES:
        return _prefetching(_realigned_plan(m, n, stride, 2, n_sm, *_PF_L1_MID))
    if compiled_gpu and _parts(n, 2) == (_PF_L1_SMALL_WINDOW, 0, 0):
        return _prefetching(_realigned_plan(m, n, stride, 2, n_sm, *_PF_L1_SMALL))
    config = _REALIGNED_PADDED_MID if _lanes(n, 2) > _REALIGNED_SMALL_WINDOW else _narrow_config(_parts(n, 2))
    return _realigned_plan(m, n, stride, 2, n_sm, *config)


def _prefetching(plan: Launch) -> Launch:
    """PF_L1, on rows padded off the vector grid (so never with WORDS: _realigned_plan)."""
    launch, meta = plan
    return launch, {**meta, "PF_L1": True}


def _plan(m: int, n: int, stride: int, elsize: int, device: torch.device, dtype: torch.dtype | None = None,
          resident_realign: bool = True, padded_parts: bool = True) -> Launch | _Staged | _Split:
    """The launch for an m x n softmax (row stride `stride`); dtype picks between 16-bit configs (default bf16's).
    resident_realign=False, padded_parts=False: the plan as it was before REALIGN, before _padded_plan (padded rows
    on the realigned kernel, PF_L1) (benchmarks time it beside the built-in's). With _PDL, the row and realigned
    kernels' launches (their plans hold BLOCK_M and WINDOW, no other's does) take programmatic dependent launch."""
    plan = _plan_launch(m, n, stride, elsize, device, dtype, resident_realign, padded_parts)
    if _FMA_EXP and elsize == 2 and not isinstance(plan, _Staged | _Split) and "WINDOW" in plan[1] and _compiled_gpu(
            device):
        plan = plan[0], {**plan[1], "FMA_EXP": True}
    if _PDL and 2 * m * n * elsize >= _PDL_MIN_BYTES and not isinstance(plan, _Staged | _Split) and (
            "BLOCK_M" in plan[1] or "WINDOW" in plan[1]) and _dependent_launch(device):
        return plan[0], {**plan[1], "PDL": True, "launch_pdl": True}
    return plan


def _compiled_gpu(device: torch.device) -> bool:
    """Kernels built for a GPU: under TRITON_INTERPRET=1 @triton.jit makes an interpreted function, whatever the
    device."""
    return device.type == "cuda" and isinstance(_softmax_split, triton.JITFunction)


def _dependent_launch(device: torch.device) -> bool:
    """Programmatic dependent launch: sm_90 on, compiled (interpreted @jit functions are not JITFunctions), a GPU
    present (a script building for sm_90 on a host without one plans without it)."""
    return (device.type == "cuda" and isinstance(_softmax_rows, triton.JITFunction) and torch.cuda.is_available()
            and torch.cuda.get_device_capability(device)[0] >= 9)


def _plan_launch(m: int, n: int, stride: int, elsize: int, device: torch.device, dtype: torch.dtype | None,
                 resident_realign: bool, padded_parts: bool) -> Launch | _Staged | _Split:
    align = _align(elsize, n, stride)
    compiled_gpu = _compiled_gpu(device)
    if n > _MAX_FUSED_N and elsize == 2 and compiled_gpu:
        # contiguous rows off the 16-byte grid, and (PADDED) padded rows off the 4-byte one, through windows
        padded = _RESIDENT_PADDED and stride != n and align * elsize < _MIN_COPY_BYTES
        realign = resident_realign and align * elsize < 16 and (stride == n or padded)
        resident = _resident_plan(m, n, align, elsize, _num_sms(device), _smem_per_sm(_cuda_index(device)),
                                  realign=realign, padded=realign and padded)
        if resident is not None:
            return resident
    if _SPLIT_MIN_N < n <= _SPLIT_MAX_N and compiled_gpu:
        split = (_split_realigned_plan(m, n, stride, elsize) if elsize == 4 or n % 8 else
                 _split_plan(m, n, elsize, align))
        if split.n_parts <= _num_sms(device):  # one row's programs are surely resident together
            return split
    if n > _MAX_FUSED_N:
        return _staged_plan(m, n, elsize, align)
    n_sm = _num_sms(device)
    key = dtype if dtype in _REALIGNED_CONFIG else torch.float32 if elsize == 4 else torch.bfloat16
    off_grid_x = padded_parts and elsize == 2 and _align(elsize, stride - n) < 8  # x's rows start off y's vector grid
    if off_grid_x and n > _REALIGNED_NARROW_MIN_N and _lanes(n, elsize) <= (
            _MAX_FUSED_N if n > _PIPELINED_MIN_N else _PIPELINED_MIN_N):
        return _padded_plan(m, n, stride, n_sm, compiled_gpu)
    # Rows past 16384, and 16-bit rows of up to 16384 whose span is wider (unaligned 16378-16383: on _softmax_rows
    # 66.7% of copy at 4096 x 16383 fp16, 83.7% on this config: H200, evidence/h200/2026-12-04_words/2_*, 2b_*).
    if (n > _PIPELINED_MIN_N or elsize == 2) and _PIPELINED_MIN_N < _lanes(n, elsize) <= _MAX_FUSED_N:
        return _lines_where_covered(_realigned_launch(m, n, stride, elsize, n_sm, _REALIGNED_CONFIG[key],
                                                      _parts(n, elsize), key), n, elsize)
    if elsize == 2 and n > _REALIGNED_NARROW_MIN_N and (stride - n) % 8 == 0 and (
            lanes := _lanes(n, elsize)) <= _PIPELINED_MIN_N and (
            n % 8 or (_REALIGNED_ALIGNED_MIN_N < n and lanes < triton.next_power_of_2(n))):
        parts = _parts(n, elsize)
        return _lines_where_covered(_realigned_launch(m, n, stride, elsize, n_sm, _narrow_config(parts), parts, key),
                                    n, elsize)
    if n > _PIPELINED_MIN_N:
        return _Persistent(_softmax_pipelined, min(m, _PIPELINED_PER_SM * n_sm)), {
            "BLOCK_N": triton.next_power_of_2(n), "ALIGN": align, "num_warps": _PIPELINED_WARPS}
    block_n = triton.next_power_of_2(n)
    narrow = elsize == 2 and _NARROW_MIN_N <= block_n <= _NARROW_TILE
    short = elsize == 2 and align <= 2 and _SHORT_MIN_N <= block_n <= _SHORT_MAX_N
    packed = elsize == 2 and not short and align in (2, 4) and _PACKED_MIN_N <= block_n <= _PACKED_MAX_N
    tile = _NARROW_TILE if narrow else _SHORT_TILE if short else _PACKED_TILE if packed else _TILE
    block_m = min(max(1, tile // block_n), triton.next_power_of_2(m))
    while block_m > 1 and _cdiv(m, block_m) < (_SHORT_WAVES if short else _WAVES) * n_sm:
        block_m //= 2
    if short:
        return _softmax_rows[(_cdiv(m, block_m),)], {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": align,
                                                     "num_warps": 1}
    if packed:
        return _softmax_rows[(_cdiv(m, block_m),)], {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": align,
                                                     "num_warps": _PACKED_WARPS}
    if narrow:
        even = block_n == n and m % block_m == 0
        return _softmax_rows[(_cdiv(m, block_m),)], {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": align,
                                                     "EVEN": even, "num_warps": _NARROW_WARPS}
    # One 8192-wide row per program runs best on 16 warps (H200, bf16: 98.3% of copy bandwidth at 32768 x 8192 and
    # 91.4% at 8192 x 8192, against 96.8% and 90.7% on 8: benchmarks/kernel_sweep.py,
    # evidence/h200/2026-11-30_verification_kernels/4_eviction_hints_sweep/).
    warps = 16 if (block_m, block_n) == (1, 8192) else _warps(block_m * block_n)
    return _softmax_rows[(_cdiv(m, block_m),)], {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": align,
                                                 "num_warps": warps}


def candidate(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of a 2-D x (any row stride); the result is a new contiguous tensor."""
    m, n = x.shape
    if x.stride(1) != 1:  # column strides are not a supported fast path; rows with padding are
        x = x.contiguous()
    device = x.device
    y = torch.empty((m, n), dtype=x.dtype, device=device)
    if m == 0 or n == 0:
        return y
    stride = x.stride(0)
    key = (m, n, stride, x.dtype, device)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(m, n, stride, x.element_size(), device, x.dtype)
    _run(plan, x, y, m, n, stride)
    return y


def _run(plan: Launch | _Staged | _Split, x: torch.Tensor, y: torch.Tensor, m: int, n: int, stride: int) -> None:
    """Launch a plan of softmax(x) (m x n, row stride `stride`) into y; benchmarks run plans the built-in does not
    pick through it too."""
    device = x.device
    if isinstance(plan, _Split):
        partials = torch.empty((2, m, plan.n_parts), dtype=torch.float32, device=device)
        done = torch.zeros((m,), dtype=torch.int32, device=device)
        plan.launch(x, y, partials, done, m, n, stride, plan.n_parts, **plan.meta)
    elif isinstance(plan, _Staged):
        partials = torch.empty((2, m, plan.n_parts), dtype=torch.float32, device=device)
        done = torch.zeros((m,), dtype=torch.int32, device=device)
        plan.launch(x, y, partials, done, m, n, stride, plan.n_parts, plan.rows_per_batch, plan.n_batches,
                    **plan.meta)
    else:
        launch, meta = plan
        if meta.get("WORDS") and x.data_ptr() % 4:  # a view starting mid-word: no whole words (plans ignore offsets)
            meta = {**meta, "WORDS": False}
        if "NRES" in meta and x.data_ptr() % 16:
            # The resident kernel copies x into shared memory 16 bytes at a time from its rows' starts (FREE's as
            # inline PTX, which needs whole vectors; plans ignore offsets): a view starting inside a vector is read
            # from a fresh copy, which starts on one (contiguous: any resident plan of these rows takes it).
            x, stride = x.clone(memory_format=torch.contiguous_format), n
        if meta.get("PARTS", 1) > 1:  # the resident kernel's parts meet through words that start zero
            launch(x, y, m, n, stride, w_ptr=torch.zeros((m * meta["PARTS"],), dtype=torch.int64, device=device),
                   **meta)
        else:
            launch(x, y, m, n, stride, **meta)
