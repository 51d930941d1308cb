"""Builds the native SQLite tokenizer at install (cofferd/infrastructure/storage/native).
A machine without a C compiler gets a pure-Python install that indexes CJK text with
SQLite's own tokenizer: the same results, slower."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

NATIVE = "cofferd/infrastructure/storage/native"


class NativeBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        sys.path.insert(0, self.root)  # the packages it imports are the standard library's
        try:
            from cofferd.infrastructure.storage.native import LIBRARY_NAME, build
        finally:
            sys.path.remove(self.root)
        if version == "editable":  # the code is read from the source tree: built beside it
            target = build.LIBRARY
        else:
            target = Path(self.directory) / "native" / LIBRARY_NAME
        why = build.compile_library(target)
        if why is not None:
            self.app.display_warning(
                f"the CJK tokenizer was not built ({why}): SQLite's own is used, slower"
            )
            return
        if version != "editable":
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
            build_data["force_include"][str(target)] = f"{NATIVE}/{LIBRARY_NAME}"
