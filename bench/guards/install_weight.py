"""What `make run` installs: time, venv size, the packages over 20 MB, and no torch.

Clones the committed HEAD into a scratch folder, runs `make .venv/.run` there (exactly what
`make run` does before it starts the daemon), and measures the venv it made. With
`--tool pipx` or `--tool uv` it installs the clone as a tool instead and checks that
`cofferctl --version` runs from it.

    python -m bench.guards.install_weight [--tool make|pipx|uv] [--commit REV] [--keep]

Fails (exit 1) when the venv is over LIMIT_MB or holds a package that drags in torch.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, machine

LIMIT_MB = 700  # issue 36: the bundled models and their runtime, in all
REPORT_OVER_MB = 20
FORBIDDEN = ("torch", "triton", "transformers", "sentence-transformers", "nvidia-")

# Run inside the measured venv: each distribution's installed size from its RECORD.
SIZES = """
import importlib.metadata as m, json, os
sizes = {}
for dist in m.distributions():
    total = 0
    for f in dist.files or ():
        p = dist.locate_file(f)
        if os.path.isfile(p):
            total += os.path.getsize(p)
    sizes[dist.metadata["Name"]] = total
print(json.dumps(sizes))
"""


def tree_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) / 2**20


def install_with_make(clone: Path) -> tuple[Path, str]:
    # `.venv/bin/.installed` was the one install target before `make run` and `make test` split.
    makefile = (clone / "Makefile").read_text()
    target = ".venv/.run" if "(VENV)/.run:" in makefile else ".venv/bin/.installed"
    proc = subprocess.run(["make", target], cwd=clone, capture_output=True, text=True, check=True)
    return clone / ".venv", proc.stdout + proc.stderr


def install_as_tool(clone: Path, tool: str, scratch: Path) -> tuple[Path, str]:
    """`pipx install` / `uv tool install` of the clone, with everything kept in `scratch`."""
    program = shutil.which(tool)
    if program is None:
        raise SystemExit(f"{tool} is not on PATH")
    env = dict(os.environ, HOME=str(scratch))
    if tool == "pipx":
        env |= {"PIPX_HOME": str(scratch / "tool"), "PIPX_BIN_DIR": str(scratch / "bin")}
        command = [program, "install", f"{clone}[local]"]
    else:
        env |= {"UV_TOOL_DIR": str(scratch / "tool"), "UV_TOOL_BIN_DIR": str(scratch / "bin")}
        command = [program, "tool", "install", f"coffer[local] @ {clone}"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stdout}{proc.stderr}")
    version = subprocess.run(
        [str(scratch / "bin" / "cofferctl"), "--version"], capture_output=True, text=True
    )
    print(f"cofferctl --version from the {tool} install: {version.stdout.strip()!r}")
    venv = next(p.parent.parent for p in (scratch / "tool").glob("**/bin/cofferd"))
    return venv, proc.stdout + proc.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tool", choices=["make", "pipx", "uv"], default="make")
    parser.add_argument("--commit", default="HEAD", help="install this commit (a baseline)")
    parser.add_argument("--keep", action="store_true", help="leave the scratch folder")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="coffer-install-"))
    clone = scratch / "coffer"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", args.commit], check=True)
    started = time.monotonic()
    if args.tool == "make":
        venv, log = install_with_make(clone)
    else:
        venv, log = install_as_tool(clone, args.tool, scratch)
    seconds = time.monotonic() - started
    python = venv / "bin" / "python"
    sizes: dict[str, int] = json.loads(
        subprocess.run([str(python), "-c", SIZES], capture_output=True, text=True).stdout
    )
    total = tree_mb(venv)
    print(f"machine: {machine()}")
    print(f"install ({args.tool}): {seconds:.0f} s; venv {total:.0f} MB (limit {LIMIT_MB} MB)")
    print(f"packages over {REPORT_OVER_MB} MB:")
    for name, size in sorted(sizes.items(), key=lambda item: -item[1]):
        if size > REPORT_OVER_MB * 2**20:
            print(f"  {name:<24} {size / 2**20:6.0f} MB")
    heavy = sorted(n for n in sizes if n.lower().startswith(FORBIDDEN))
    warnings = [line for line in log.splitlines() if "Deprecat" in line]
    print(f"forbidden packages: {heavy or 'none'}; deprecation warnings: {len(warnings)}")
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if heavy or total > LIMIT_MB or warnings else 0


if __name__ == "__main__":
    sys.exit(main())
