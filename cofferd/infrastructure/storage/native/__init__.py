"""The one C file (cjk_tokens.c) and where its library is, once built (build.py builds it)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBRARY_NAME = "cjk_tokens.dylib" if sys.platform == "darwin" else "cjk_tokens.so"
LIBRARY = HERE / LIBRARY_NAME
ENTRY_POINT = "sqlite3_cjktokens_init"  # what SQLite calls as it loads the library
