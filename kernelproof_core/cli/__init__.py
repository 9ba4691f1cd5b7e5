"""The `kernelproof` command line. Each module under cli/ registers its own subcommands."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from kernelproof_core import __version__
from kernelproof_core.cli import service, verification
from kernelproof_core.cli.exit_codes import ExitCode


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"kernelproof: error: {message}\n")
        raise SystemExit(ExitCode.USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kernelproof", description="Verify, time and score Triton kernels.")
    parser.add_argument("--version", action="version", version=f"kernelproof {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    verification.register(sub)
    service.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.handler(args))
    except BrokenPipeError:
        # The reader of stdout is gone (`kernelproof list | head`): end quietly, as a shell tool does, and point
        # stdout at /dev/null so the interpreter's final flush does not raise again. Reports already written stay.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.BROKEN_PIPE)
