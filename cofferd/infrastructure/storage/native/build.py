"""Builds the SQLite extension of `cjk_tokens.c`: at install (hatch_build.py, beside the code
in an editable install, into the wheel otherwise) and in tests. The standard library only:
it runs in the install's own build environment, imported from the source tree. The
headers are SQLite 3.50.4's, vendored in the checkout's `third_party/sqlite/`.

Without a C compiler nothing is built and SQLite's own tokenizer indexes CJK text: the same
tokens, more slowly (docs/install.md says how much).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from cofferd.infrastructure.storage.native import HERE, LIBRARY

SOURCE = HERE / "cjk_tokens.c"
HEADERS = HERE.parents[3] / "third_party" / "sqlite"  # the source tree's, vendored
COMPILE_TIMEOUT_S = 120


def compiler() -> list[str] | None:
    """`$CC`, else the compiler Python was built with, else `cc`: None when none is found."""
    named = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    command = shlex.split(named)
    if not command or shutil.which(command[0]) is None:
        return None if shutil.which("cc") is None else ["cc"]
    return command


def compile_library(target: Path = LIBRARY) -> str | None:
    """Build the extension at `target` (under a name of its own beside it, then moved into
    place); None once built, else why it was not."""
    if sys.platform == "win32":
        return "not built on Windows"
    command = compiler()
    if command is None:
        return "no C compiler (cc) was found"
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=".cjk_tokens-", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run(
            [*command, "-O2", "-fPIC", "-shared", "-I", str(HEADERS), str(SOURCE), "-o", partial],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            return f"{command[0]} failed: {done.stderr.strip()[-500:]}"
        os.chmod(partial, 0o755)  # an install for every user: each loads it
        os.replace(partial, target)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{command[0]} could not run: {exc}"
    finally:
        Path(partial).unlink(missing_ok=True)
    return None


if __name__ == "__main__":
    why = compile_library()
    print(why or f"built {LIBRARY}")
    sys.exit(1 if why else 0)
