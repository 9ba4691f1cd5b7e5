"""Service subcommands (serve, worker, submit, keys). Filled in by the service work; registered here."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    del sub  # no service commands yet


__all__ = ["argparse", "register"]
