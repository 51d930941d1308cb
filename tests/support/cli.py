"""Running the real `cofferctl` against a test daemon: its exit status and output."""

from __future__ import annotations

import io
import os
import subprocess

from cofferctl import cli
from tests.support.daemon import BIN, Daemon


def run(d: Daemon, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(["--socket", str(d.socket), *argv], stdout=out)
    return code, out.getvalue()


def ctl_env(**extra: str) -> dict[str, str]:
    """A bare environment for the real cofferctl (PYTHONPATH kept: this checkout's code)."""
    kept = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
    return {"PATH": "/usr/bin:/bin", **kept, **extra}


def ctl(d: Daemon, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "cofferctl"), *argv],
        env=ctl_env(COFFER_SOCKET=str(d.socket), **env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
