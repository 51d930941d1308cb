"""Where a vault's ambiguous links lead (issue 34 §2): with the linking note's folder (the
tie-break Obsidian's `getFirstLinkpathDest` uses: its own folder first) and without it
(the rule of a checkout before it, `--repo`), how many lead out of the linking note's top folder (on
Obsidian's help vault, another language's note or image). Resolved by the daemon's own
rules (`cofferd.domain.links`) outside a daemon; files and folders starting with `.`
skipped, as the daemon skips them.

    .venv/bin/python -m bench.studies.vault_tie_break --vault /tmp/helpvault [--repo CHECKOUT]
"""

from __future__ import annotations

import argparse
import inspect
import os
from collections import Counter
from pathlib import Path

from bench.common import add_repo_argument, describe_code, run_in_repo


def read_vault(vault: Path) -> tuple[dict[str, str], list[str]]:
    notes: dict[str, str] = {}
    files: list[str] = []
    for folder, subfolders, names in os.walk(vault):
        subfolders[:] = [s for s in subfolders if not s.startswith(".")]
        for name in names:
            if name.startswith("."):
                continue
            path = Path(folder) / name
            relpath = path.relative_to(vault).as_posix()
            if name.endswith(".md"):
                notes[relpath] = path.read_text("utf-8", "replace")
            else:
                files.append(relpath)
    return notes, files


def count(notes: dict[str, str], files: list[str]) -> Counter[str]:
    from coffer_kernel.link_targets import DocumentIndexOfPaths  # the checkout's own
    from cofferd.domain.links import links_of

    index = DocumentIndexOfPaths(notes, files)
    rules: list[tuple[str, str | None]] = [("without the note's folder", None)]
    if "source" in inspect.signature(index.resolve).parameters:  # before it, no folder
        rules.append(("with the note's folder", ""))
    counts: Counter[str] = Counter()
    for path, body in notes.items():
        top = path.split("/")[0] if "/" in path else None
        for link in links_of(body, path):
            for rule, source in rules:
                found = index.resolve(link, path) if source is not None else index.resolve(link)
                if not found.ambiguous or found.path is None:
                    continue
                counts[f"{rule}: ambiguous"] += 1
                if top is not None and found.path.split("/")[0] != top:
                    kind = "note" if found.document else "file"
                    counts[f"{rule}: out of its top folder, to a {kind}"] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", type=Path, required=True)
    add_repo_argument(parser)
    args = parser.parse_args()
    run_in_repo(args.repo)
    print(f"code: {describe_code(args.repo)}")
    notes, files = read_vault(args.vault.resolve())
    print(f"{len(notes):,} notes, {len(files):,} other files")
    for what, n in sorted(count(notes, files).items()):
        print(f"{what}: {n:,}")


if __name__ == "__main__":
    main()
