"""`python -m kernelproof_core` is the `kernelproof` command."""

import sys

from kernelproof_core.cli import main

sys.exit(main())
