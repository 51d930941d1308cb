"""Whether a `credential_ref` can be resolved here, checked without reading the secret."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def credential_problem(ref: str | None) -> str | None:
    """Why `ref` (`env:NAME` or `file:/path`) cannot be resolved by cofferd; None if it can."""
    if ref is None:
        return None
    kind, _, where = ref.partition(":")
    if kind == "env":
        if not os.environ.get(where):
            return (
                f"credential_ref {ref}: the environment variable {where} is not set in "
                "cofferd's environment (set it where cofferd starts, then restart it)"
            )
        return None
    path = Path(where)
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"credential_ref {ref}: the file cannot be read ({exc.strerror})"
    if not stat.S_ISREG(mode) or not os.access(path, os.R_OK):
        return f"credential_ref {ref}: the file cannot be read"
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        return f"credential_ref {ref}: the file must be private (chmod 600 {path})"
    return None
