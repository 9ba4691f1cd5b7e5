# mypy: ignore-errors
# ruff: noqa: F821
# GPU only: correct on the first call, then launches a kernel that spins on a flag nobody ever sets. Bounded by the
# watchdog alone (a GPU kernel cannot time itself out), so only run it under the sandbox.
@triton.jit
def _spin(flag_ptr, out_ptr):
    i = 0
    while tl.load(flag_ptr, volatile=True) == 0:
        i += 1
    tl.store(out_ptr, i)


_calls = [0]


def candidate(x, weight, eps):
    _calls[0] += 1
    if _calls[0] > 1:
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        out = torch.zeros(1, dtype=torch.int32, device=x.device)
        _spin[(1,)](flag, out)
        torch.cuda.synchronize()
    return honest(x, weight, eps)
