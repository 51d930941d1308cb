"""`cofferctl`: the control client for cofferd."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("cofferctl talks to a running cofferd; its commands arrive with the daemon.")
    return 2 if (argv if argv is not None else sys.argv[1:]) else 0
