# mypy: ignore-errors
# ruff: noqa: F821
# Forks up to 300 sleeping children (each exits after 30 s); the test's pids limit is far lower.
import os
import time


def candidate(x, weight, eps):
    for _ in range(300):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
    return honest(x, weight, eps)
