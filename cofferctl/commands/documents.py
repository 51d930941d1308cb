"""`docs`, `show`, `edit`, `rm`, `links`, `tags`, `conflicts`: the documents of a KB."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from cofferctl import api
from cofferctl.client import Client
from cofferctl.command import CommandFailed, UsageError, ask
from cofferctl.output import Output
from cofferctl.paging import page_line


def cmd_docs(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = api.documents(c, a.kb, q=a.q, limit=a.limit, offset=a.offset)
    if out.as_json:
        return data
    out.table(
        ["id", "title", "mode", "updated", "path"],
        [[d["id"], d["title"][:50], d["source_mode"], d["updated_at"][:19], d["relative_path"]]
         for d in data["documents"]],
    )  # fmt: skip
    shown = len(data["documents"])
    out.line(f"{data['offset'] + 1 if shown else 0}-{data['offset'] + shown} of {data['total']}")
    return None


def cmd_show(c: Client, a: argparse.Namespace, out: Output) -> Any:
    """The file as it is, frontmatter included; with --header, a header (title, path,
    tags) and the text without its frontmatter. A PDF, a Word file and the like show the
    text converted from them, and say so (on stderr, without --header)."""
    doc = api.document(c, a.kb, a.doc, file_text=None if a.header else "true")
    if out.as_json:
        return doc
    derived = f"text converted from {doc['path']} (kept by Coffer; the file is unchanged)"
    if not a.header:
        if doc.get("derived"):
            print(derived, file=sys.stderr)
        out.document(doc["file_text"])
        return None
    out.line(out.style(doc["title"], "1") + f"  ({doc['path']})")
    if doc.get("derived"):
        out.line(out.style(derived, "2"))
    if doc.get("tags"):
        out.line(out.style(" ".join(f"#{t}" for t in doc["tags"]), "36"))
    out.line()
    out.document(doc["content"])
    return None


def cmd_edit(c: Client, a: argparse.Namespace, out: Output) -> Any:
    import shlex
    import subprocess

    doc = api.document(c, a.kb, a.doc)
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor or not editor.strip():
        raise CommandFailed("no editor set: export VISUAL or EDITOR (for example EDITOR=nano)")
    path = doc["path"]
    before = _sha256(path)
    try:
        code = subprocess.call([*shlex.split(editor), path])
    except OSError as exc:
        raise CommandFailed(f"cannot run the editor {editor!r}: {exc.strerror or exc}") from None
    if code != 0:
        raise CommandFailed(f"the editor {editor!r} exited with {code}; {path} is as it left it")
    after = _sha256(path)
    saved = {"path": path, "changed": after != before, "content_sha256": after}
    if out.as_json:
        return saved
    if after is None:
        out.line(f"{path} is gone: the editor removed it")
    elif after == before:
        out.line(f"no change: {path}")
    else:
        out.line(f"saved {path} (sha256 {after[:12]}); the watcher indexes it")
    return None


def _sha256(path: str) -> str | None:
    import hashlib  # for `edit` only: ~4 ms

    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except FileNotFoundError:
        return None


def cmd_rm(c: Client, a: argparse.Namespace, out: Output) -> Any:
    doc = api.document(c, a.kb, a.doc)  # a wrong id fails before asking
    if not a.yes:
        if not sys.stdin.isatty():
            raise UsageError(f"deleting {doc['relative_path']!r} needs --yes when not asked")
        if not ask(f"Delete {doc['relative_path']} ({doc['title']}) from {a.kb}?"):
            out.line("kept")
            return None
    data = api.delete_document(c, a.kb, doc["id"])
    if out.as_json:
        return data
    out.line(f"deleted {data['deleted']['relative_path']}")
    if trash := data.get("trash"):
        out.line(f"in the trash as {trash['id']} until {trash['expires_at'][:19]}")
        out.line(f"restore it with: {trash['restore']}")
    return None


def cmd_links(c: Client, a: argparse.Namespace, out: Output) -> Any:
    if a.broken == (a.doc is not None):
        raise UsageError("give a document, or --broken for every broken link")
    if a.broken:
        data = api.broken_links(c, a.kb, limit=a.limit, offset=a.offset)
        if out.as_json:
            return data
        for link in data["links"]:
            why = "broken" if link.get("problem", "missing-file") == "missing-file" else None
            said = why or link["message"]
            out.line(f"{link['relative_path']}:{link['line']}: {link['target']}  ({said})")
        words = ["links", a.kb, "--broken"]
        out.line(page_line(data, len(data["links"]), "broken links", words, a.limit))
        if data.get("fragments_unchecked"):
            out.line(f"{data['fragments_unchecked']} links to headings or blocks not checked")
        if data.get("files_not_held"):
            out.line(
                f"{data['files_not_held']} files beyond the {a.kb} scan's bound are not link "
                "targets: links to them are counted broken"
            )
        return None
    data = api.document_links(c, a.kb, a.doc, limit=a.limit, offset=a.offset)
    if out.as_json:
        return data
    out.line(out.style(f"links from {a.doc}", "1"))
    for link in data["outgoing"]:
        outside = link.get("kind") == "outside"
        to = link["relative_path"] or ("outside the knowledge base" if outside else None)
        to = to or out.style("broken", "31")
        if link.get("kind") == "file":
            to += "  (a file)"
        note = "  (ambiguous: taken as Obsidian takes it)" if link["ambiguous"] else ""
        out.line(f"  line {link['line']}: {link['target']} -> {to}{note}")
    out.line(out.style("backlinks", "1"))
    for link in data["backlinks"]:
        where = out.link(f"{link['relative_path']}:{link['line']}", link["path"])
        out.line(f"  {where}  {link['document_id']}")
    words = ["links", a.kb, a.doc]
    out.line(page_line(data, len(data["backlinks"]), "backlinks", words, a.limit))
    return None


def cmd_conflicts(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = api.conflicts(c, a.kb, limit=a.limit, offset=a.offset)
    if out.as_json:
        return data
    for item in data["conflicts"]:
        where = out.link(item["relative_path"], item["path"])
        if item["kind"] == "merge_markers":
            out.line(f"{where}: holds git merge markers  {item['document_id']}")
        else:
            out.line(f"{where}: {item['tool']} copy of {item['conflicts_with']}")
    out.line(page_line(data, len(data["conflicts"]), "conflicts", ["conflicts", a.kb], a.limit))
    return None


def cmd_tags(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = api.tags(c, a.kb, limit=a.limit, offset=a.offset)
    if out.as_json:
        return data
    out.table(["tag", "documents"], [[f"#{t['tag']}", t["count"]] for t in data["tags"]])
    if data["offset"] or len(data["tags"]) < data["total"]:  # a page of them: which
        out.line(page_line(data, len(data["tags"]), "tags", ["tags", a.kb], a.limit))
    return None
