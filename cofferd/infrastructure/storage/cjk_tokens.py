"""SQLite's `unicode61`, about twice as fast on Chinese, Japanese and Korean text: the
extension of native/cjk_tokens.c, built at install. Loaded, it gives the same tokens as
SQLite's own under the same name, so an index is the same with it or without it (a
machine with no C compiler at install indexes CJK text more slowly, nothing else)."""

from __future__ import annotations

from cofferd.infrastructure.storage import native
from cofferd.infrastructure.storage.sqlite import Connection, Error

load_error: str | None = None


def load(conn: Connection) -> bool:
    """Load the tokenizer into a connection; False (and `load_error` set) when it cannot."""
    global load_error
    if not native.LIBRARY.is_file():
        load_error = "not built at install (no C compiler): SQLite's own, slower on CJK text"
        return False
    try:
        conn.enable_load_extension(True)
        try:
            conn.execute("SELECT load_extension(?, ?)", (str(native.LIBRARY), native.ENTRY_POINT))
        finally:
            conn.enable_load_extension(False)
    except Error as exc:
        load_error = f"the CJK tokenizer cannot be loaded: {exc}"
        return False
    return True
