"""The one way tests and benches start cofferd: the venv's `cofferd` as a process, in the
caller's environment, with the caller's log level, arguments and streams. Standard library
only, so that a bench measuring another checkout's code (`--repo`) can import it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent


def start_cofferd(
    env: Mapping[str, str],
    *args: str,
    log_level: str | None = "DEBUG",
    under: Sequence[str] = (),
    **popen: Any,
) -> subprocess.Popen[bytes]:
    """cofferd with `args` in `env`; `log_level` None starts it as a user does (no
    --log-level); `under` runs it as the last argument of another program (strace, a
    sandbox, a socket handed over as systemd hands it); `popen` goes to Popen as it is."""
    level = ["--log-level", log_level] if log_level else []
    return subprocess.Popen([*under, str(BIN / "cofferd"), *level, *args], env=env, **popen)
