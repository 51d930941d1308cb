"""Where the daemon's socket is: the one definition, shared by cofferd and cofferctl."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

APP_NAME = "coffer"
SOCKET_NAME = "cofferd.sock"


def default_socket(env: dict[str, str] | None = None) -> Path:
    """`COFFER_SOCKET`, else `cofferd.sock` in the platform's user runtime directory."""
    env = dict(os.environ) if env is None else env
    if env.get("COFFER_SOCKET"):
        return Path(env["COFFER_SOCKET"]).expanduser().absolute()
    import platformdirs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no XDG_RUNTIME_DIR: platformdirs falls back, loudly
        return platformdirs.user_runtime_path(APP_NAME) / SOCKET_NAME
