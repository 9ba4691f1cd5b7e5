# mypy: ignore-errors
# Exits the process with status 0 in the middle of a run, before any result could be reported.
import os


def candidate(x, weight, eps):
    os._exit(0)
