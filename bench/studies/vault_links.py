"""A real Obsidian vault through Coffer (issue 34): Obsidian's public help vault attached as a
knowledge base of a daemon in a scratch data home, and measured as a user of it would:

* every link of every note as `GET .../documents/{doc}/links` resolves it: to a note, to
  another file (an image, a PDF, a canvas), ambiguous, broken, outside the vault's folder
  (by type: wiki, Markdown, reference definition); and `links --broken`
  (`GET .../links/broken`) by problem (no file, a heading or block the note lacks);
* every note's title against what the vault says (frontmatter `title`, else the first H1,
  else the file name);
* the editor's diagnostics on every note (a real `cofferctl lsp`, each note opened);
* for the `--renames` most-linked notes, `workspace/willRenameFiles` (into another folder,
  or onto the name of another much-linked note), and for the `--file-renames` most-linked
  other files (images: another name in another folder): its edits applied, every link of the vault
  resolved before and after by the daemon's own rules (`cofferd.domain.links`, the code the
  language server uses): each must lead to the same file (the renamed one at its new place);
* completion after `[[zzz` (nothing matches) and `[[sett`, p50/p95 over `--rounds`.

The vault is never written: renames are applied to the notes' text in memory.

    # the search tool's `fetch` of github:obsidianmd/obsidian-help gives a bare git folder;
    # its stored snapshot lacks the largest blobs (68 videos), so `git archive` stops:
    # --extract writes every blob there is, and each missing one as an empty file
    .venv/bin/python -m bench.studies.vault_links --extract GIT_DIR --vault /tmp/helpvault/en
    .venv/bin/python -m bench.studies.vault_links --vault /tmp/helpvault/en [--repo PATH]
    .venv/bin/python -m bench.studies.vault_links --vault /tmp/helpvault --whole   # every language
    # Foam's documentation, a Foam vault (issue 45): github:foambubble/foam's docs/ folder
    .venv/bin/python -m bench.studies.vault_links --extract GIT_DIR --vault /tmp/foam/docs --whole
    .venv/bin/python -m bench.studies.vault_links --vault /tmp/foam/docs --whole [--repo PATH]
    # a GitHub wiki (github:mhadam/snowplow.wiki-fork) and a VS Code Markdown repository
    # (github:microsoft/code-with-engineering-playbook's docs/), issue 45
    .venv/bin/python -m bench.studies.vault_links --extract GIT_DIR --vault /tmp/snowplow
    .venv/bin/python -m bench.studies.vault_links --extract GIT_DIR --vault /tmp/playbook/docs
    .venv/bin/python -m bench.studies.vault_links --vault VAULT [--hostile] [--repo PATH]
"""

from __future__ import annotations

import argparse
import os
import posixpath
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from bench.common import (
    add_repo_argument,
    code_env,
    describe_code,
    indexer_idle,
    machine,
    percentile,
    run_in_repo,
    scratch_home,
    start_daemon,
    stop_daemon,
    wait,
)
from cofferctl import api as ctl_api
from cofferctl.client import Client
from tests.support.helpers import applied
from tests.support.lsp_pipe import RawClient

KB = "vault"
WITHIN_S = 120.0  # a slow answer is a figure, not a failure


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vault", type=Path, default=Path("/tmp/helpvault/en"))
    parser.add_argument("--whole", action="store_true", help="counts and completion only")
    parser.add_argument("--renames", type=int, default=20, help="of the most-linked notes")
    parser.add_argument("--file-renames", type=int, default=5, help="of the most-linked files")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument(
        "--hostile", action="store_true", help="renames to names no wiki link holds, and folders"
    )
    add_repo_argument(parser)
    parser.add_argument("--extract", type=Path, help="a bare git folder to write the vault from")
    args = parser.parse_args()
    run_in_repo(args.repo)
    if args.extract:
        # the help vault's en/, Foam's docs/: a folder of the repository written whole
        into = args.vault.parent if args.vault.name in ("en", "docs") else args.vault
        print(f"{extract(args.extract, into)} blobs missing from {args.extract}: empty files")
    vault = args.vault.resolve()
    home = scratch_home("vault")
    socket_path = Path(f"/tmp/coffer-bench-vault-{os.getpid()}.sock")
    env = code_env(args.repo, COFFER_HOME=str(home), COFFER_SOCKET=str(socket_path))
    print(f"machine: {machine()}; load {Path('/proc/loadavg').read_text().split()[:3]}")
    print(f"code: {describe_code(args.repo)}; vault: {vault}", flush=True)
    api = Client(socket_path, timeout=120)
    daemon = start_daemon(args.repo, home, socket_path)
    try:
        wait(lambda: api.get("/api/v1/status"), daemon, 60, 0.1)
        started = time.perf_counter()
        api.post("/api/v1/knowledge_bases", {"name": KB, "path": str(vault)})
        wait(lambda: idle(api), daemon, 1800, 0.5)
        count = api.get(api.kb(KB, "/metrics"))["documents"]
        print(f"{count:,} notes indexed in {time.perf_counter() - started:.1f} s", flush=True)
        listed = ctl_api.paths(api, KB)
        paths, files = listed["paths"], listed.get("files", [])
        print(f"{len(paths):,} documents, {len(files):,} other files held as link targets")
        outgoing = links_of_every_note(api, paths)
        count_links(outgoing)
        count_broken(api)
        if not args.whole:
            count_titles(api, vault)
        client = RawClient(env, daemon_bound_s=None)  # as a user runs it
        client.ask("initialize", {"capabilities": {}, "rootUri": vault.as_uri()}, WITHIN_S)
        client.notify("initialized", {})
        if not args.whole:
            count_diagnostics(client, vault, paths)
            check_renames(
                client, vault, paths, files, outgoing, args.renames, args.file_renames, args.hostile
            )
        measure_completion(client, vault, paths, args.rounds)
        client.end()
    finally:
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)
        socket_path.unlink(missing_ok=True)


def extract(git_dir: Path, into: Path) -> int:
    """Write the files of `git_dir`'s HEAD under `into`; the count of blobs missing there
    (written as empty files)."""
    import subprocess

    listed = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", "HEAD"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    reader = subprocess.Popen(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert reader.stdin is not None and reader.stdout is not None
    missing = 0
    for entry in filter(None, listed.split(b"\0")):
        meta, path = entry.split(b"\t", 1)
        mode, kind, sha = meta.decode().split()
        if kind != "blob":
            continue
        target = into / os.fsdecode(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        reader.stdin.write(sha.encode() + b"\n")
        reader.stdin.flush()
        header = reader.stdout.readline().split()
        if header[-1] == b"missing":
            target.write_bytes(b"")
            missing += 1
            continue
        data = reader.stdout.read(int(header[2]))
        reader.stdout.read(1)
        if mode == "120000":
            target.symlink_to(os.fsdecode(data))
        else:
            target.write_bytes(data)
    reader.stdin.close()
    reader.wait()
    return missing


def idle(api: Client) -> bool:
    status = api.get("/api/v1/status")
    return indexer_idle(status) and api.get(api.kb(KB, "/metrics"))["documents"] > 0


def links_of_every_note(api: Client, paths: list[str]) -> dict[str, list[dict[str, Any]]]:
    return {path: api.get(api.document(KB, path, "/links"))["outgoing"] for path in paths}


def count_links(outgoing: dict[str, list[dict[str, Any]]]) -> None:
    counts: Counter[str] = Counter()
    to_files: Counter[str] = Counter()
    by_type: Counter[str] = Counter()
    for links in outgoing.values():
        for link in links:
            counts["links"] += 1
            by_type[link["type"]] += 1
            if link.get("kind") == "outside":
                counts["outside"] += 1
                continue
            if link["relative_path"] is None:
                counts["broken"] += 1
                continue
            counts["resolve"] += 1
            counts["ambiguous"] += link["ambiguous"]
            if link.get("kind") == "file":
                to_files[posixpath.splitext(link["relative_path"])[1].lower() or "(none)"] += 1
    kinds = ", ".join(f"{ext} {n}" for ext, n in to_files.most_common())
    print(
        f"links: {counts['links']:,}; resolve {counts['resolve']:,} (to other files "
        f"{sum(to_files.values()):,}: {kinds or 'none'}), ambiguous {counts['ambiguous']:,}, "
        f"broken {counts['broken']:,}, outside the vault {counts['outside']:,}; by type: "
        + ", ".join(f"{kind} {n:,}" for kind, n in by_type.most_common()),
        flush=True,
    )


def count_broken(api: Client) -> None:
    answer = ctl_api.broken_links(api, KB)
    problems = Counter(link.get("problem", "missing-file") for link in answer["links"])
    print(f"links --broken: {len(answer['links']):,} ({dict(problems)})")
    for link in answer["links"][:12]:
        said = link.get("message", "")
        print(f"  {link['relative_path']}:{link['line']}: {link['target']}  {said}")


def expected_title(text: str, path: str) -> tuple[str, str]:
    """(where the title comes from, the title) by the vault's own rules."""
    import yaml

    from coffer_kernel.markdown_grammar import headings
    from cofferd.safe_yaml import load

    if text.startswith("---\n") and (end := text.find("\n---", 4)) > 0:
        try:
            meta = load(text[4:end], max_nodes=10_000, max_depth=20)
        except (yaml.YAMLError, ValueError):  # a broken frontmatter: no title from it
            meta = None
        if isinstance(meta, dict) and isinstance(meta.get("title"), str) and meta["title"]:
            return "frontmatter", meta["title"].strip()
        text = text[end + 4 :]
    for _, level, name in headings(text):
        if level == 1:
            return "H1", name
    return "file name", posixpath.splitext(posixpath.basename(path))[0]


def count_titles(api: Client, vault: Path) -> None:
    found: Counter[str] = Counter()
    wrong = []
    offset = 0
    while True:
        page = api.get(api.kb(KB, "/documents"), limit=500, offset=offset)
        for doc in page["documents"]:
            path = doc["relative_path"]
            source, title = expected_title((vault / path).read_text("utf-8", "replace"), path)
            found[source] += 1
            if doc["title"] != title:
                wrong.append((path, doc["title"], title))
        offset += len(page["documents"])
        if not page["documents"] or offset >= page["total"]:
            break
    print(
        f"titles: {sum(found.values()) - len(wrong)} of {sum(found.values())} as the vault "
        f"says ({dict(found)}); different: {len(wrong)} {wrong[:5]}",
        flush=True,
    )


def count_diagnostics(client: RawClient, vault: Path, paths: list[str]) -> None:
    codes: Counter[str] = Counter()
    for n, path in enumerate(paths):
        uri = (vault / path).as_uri()
        text = (vault / path).read_text("utf-8", "replace")
        item = {"uri": uri, "languageId": "markdown", "version": 1, "text": text}
        client.notify("textDocument/didOpen", {"textDocument": item})
        codes.update(d.get("code", "?") for d in client.diagnostics(uri, within=WITHIN_S))
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        if n % 50 == 49:
            print(f"  ... {n + 1} notes opened", flush=True)
    print(f"editor diagnostics over {len(paths)} notes: {dict(codes)}", flush=True)


def targets(notes: dict[str, str], files: list[str]) -> dict[str, list[str | None]]:
    """Where each link of each note leads, by the daemon's rules (the checkout's own)."""
    import inspect

    from coffer_kernel.link_targets import DocumentIndexOfPaths
    from cofferd.domain import links

    try:
        index = DocumentIndexOfPaths(notes, files)
    except TypeError:  # a checkout where only documents are targets
        index = DocumentIndexOfPaths(notes)
    links_of = links.links_of
    as_read = getattr(links, "as_read", lambda link, index: link)  # a GitHub wiki's `[[t|P]]`
    if "source" in inspect.signature(index.resolve).parameters:  # the note's folder counts
        return {  # by line: a wiki link become a Markdown one is read after a line's wiki links
            path: [
                f"{link.line}:{_led(index.resolve(as_read(link, index), path))}"
                for link in links_of(body, path)
            ]
            for path, body in notes.items()
        }
    return {
        path: [index.resolve(link).path for link in links_of(body, path)]
        for path, body in notes.items()
    }


def _led(found: Any) -> str | None:
    """Where a link leads: a path, `outside:` and its key (out of the vault), None broken."""
    if found.path is None and getattr(found, "outside", False):
        return "outside:"
    return found.path  # type: ignore[no-any-return]


HOSTILE = ["a#b ", "x|y ", "q]]z ", "caret^ ", "spaced  out ", "ünï 日本 ", "lit%20eral "]


def hostile_plan(linked: list[str], paths: list[str], folders: int) -> list[tuple[str, str]]:
    """The most-linked notes renamed to names no wiki link can hold (`#`, `|`, `]]`, `^`),
    spaces, unicode, a literal `%20`; the `folders` folders holding most notes renamed."""
    plan = [
        (
            old,
            posixpath.join(posixpath.dirname(old), HOSTILE[n % len(HOSTILE)] + old.rsplit("/")[-1]),
        )
        for n, old in enumerate(linked)
    ]
    held = Counter(posixpath.dirname(p) for p in paths if "/" in p)
    for n, (folder, _) in enumerate(held.most_common(folders)):
        plan.append(
            (folder, posixpath.join(posixpath.dirname(folder), HOSTILE[n].strip() + " dir"))
        )
    return plan


def moved_to(path: str, old: str, new: str) -> str:
    """`path` once the file or folder `old` is named `new`."""
    if path == old:
        return new
    return new + path[len(old) :] if path.startswith(old + "/") else path


def relined(led: str | None, old: str, new: str) -> str | None:
    """`line:path` (as `targets` gives it with line numbers) once `old` is named `new`."""
    if led is None or ":" not in led:
        return led if led is None else moved_to(led, old, new)
    line, _, path = led.partition(":")
    return f"{line}:{moved_to(path, old, new)}"


def tally(led: dict[str, list[str | None]]) -> str:
    found = Counter(
        "broken" if t.endswith(":None") else "outside" if t.endswith(":outside:") else "resolved"
        for ts in led.values()
        for t in map(str, ts)
    )
    return (
        f"{found['resolved']:,} resolved, {found['broken']:,} broken, {found['outside']:,} outside"
    )


def check_renames(
    client: RawClient,
    vault: Path,
    paths: list[str],
    files: list[str],
    outgoing: dict[str, list[dict[str, Any]]],
    renames: int,
    file_renames: int,
    hostile: bool = False,
) -> None:
    incoming = Counter(
        link["relative_path"]
        for links in outgoing.values()
        for link in links
        if link["relative_path"] is not None
    )
    linked = [path for path, _ in incoming.most_common() if path in outgoing][:renames]
    images = [path for path, _ in incoming.most_common() if path in set(files)][:file_renames]
    notes = {path: (vault / path).read_text("utf-8", "replace") for path in paths}
    before = targets(notes, files)
    total_links = total_edits = same = 0
    wrong: list[str] = []
    took = []
    plan = []
    for n, old in enumerate(linked):
        folder = posixpath.dirname(old)
        if n % 2 == 0:  # into another folder, its name kept
            plan.append((old, posixpath.join("Renamed", old)))
        else:  # onto the name of another much-linked note, in a folder of its own
            other = linked[(n + 1) % len(linked)]
            plan.append((old, posixpath.join(folder, "Core", posixpath.basename(other))))
    for old in images:  # another name in another folder
        plan.append((old, posixpath.join("Pictures", "renamed " + posixpath.basename(old))))
    if hostile:
        plan = hostile_plan(linked, paths, file_renames)
    print(f"before the renames: {tally(before)}")
    tallies = []
    for old, new in plan:
        files_moved = [{"oldUri": (vault / old).as_uri(), "newUri": (vault / new).as_uri()}]
        started = time.perf_counter()
        answer = client.ask("workspace/willRenameFiles", {"files": files_moved}, WITHIN_S)
        took.append((time.perf_counter() - started) * 1000)
        if "error" in answer:
            wrong.append(f"{old} -> {new}: refused: {answer['error']['message']}")
            continue
        changes = (answer.get("result") or {}).get("changes", {})
        after = dict(notes)
        for uri, edits in changes.items():
            relpath = Path(unquote(uri.removeprefix("file://"))).relative_to(vault).as_posix()
            after[relpath] = applied(after[relpath], edits)
            total_edits += len(edits)
        after = {moved_to(p, old, new): body for p, body in after.items()}
        now = targets(after, [moved_to(f, old, new) for f in files])
        tallies.append(tally(now))
        for path, led in before.items():
            moved = moved_to(path, old, new)
            expected = sorted(map(str, (relined(t, old, new) for t in led)))
            total_links += len(led)
            if sorted(map(str, now[moved])) == expected:
                same += len(led)
            else:
                wrong.append(f"{old} -> {new}: {path}")
    print(
        f"{len(plan)} renames ({len(linked)} most-linked notes, then "
        f"{'folders' if hostile else 'most-linked other files'}): {total_edits} edits; "
        "every link of "
        f"the vault after each: {same:,} of {total_links:,} lead where they led; "
        f"willRenameFiles p50 {percentile(took, 50):.0f} ms, max {max(took):.0f} ms",
        flush=True,
    )
    print(f"after each rename: {' | '.join(sorted(set(tallies)))}")
    for line in wrong[:10]:
        print(f"  DIFFERENT: {line}")


def measure_completion(client: RawClient, vault: Path, paths: list[str], rounds: int) -> None:
    path = paths[0]
    uri = (vault / path).as_uri()
    text = (vault / path).read_text("utf-8", "replace")
    item = {"uri": uri, "languageId": "markdown", "version": 1, "text": text}
    client.notify("textDocument/didOpen", {"textDocument": item})
    for typed in ("zzz", "sett"):
        took, items = [], 0
        for n in range(rounds):
            edited = text + f"\nsee [[{typed}"
            change = {
                "textDocument": {"uri": uri, "version": n + 2},
                "contentChanges": [{"text": edited}],
            }
            client.notify("textDocument/didChange", change)
            lines = edited.split("\n")
            position = {
                "line": len(lines) - 1,
                "character": len(lines[-1].encode("utf-16-le")) // 2,
            }
            started = time.perf_counter()
            answer = client.ask(
                "textDocument/completion",
                {"textDocument": {"uri": uri}, "position": position},
                WITHIN_S,
            )
            took.append((time.perf_counter() - started) * 1000)
            result = answer.get("result") or {}
            items = len(result.get("items", result) if isinstance(result, dict) else result)
        print(
            f"completion after [[{typed}: {items} items; p50 {percentile(took, 50):.1f} ms, "
            f"p95 {percentile(took, 95):.1f} ms over {rounds}",
            flush=True,
        )


if __name__ == "__main__":
    main()
