"""`add`, `check-sources`, `reconvert`, `update-source`: documents from files of any format."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from coffer_kernel.sources import IMAGE_FORMATS, IMAGE_SUFFIXES, SourceRefused, checked_source
from cofferctl import api
from cofferctl.client import ApiError, Client
from cofferctl.command import RESULT_FAILED, Command, UsageError
from cofferctl.output import Output


def expand_paths(
    patterns: Sequence[str], formats: set[str], images_off: str | None = None
) -> tuple[list[str], list[tuple[str, str]]]:
    """Files named, matched by a glob, or found under a directory; and the files under a
    directory that are not sent, each with why (hidden, a type Coffer cannot read, or an
    image where `images_off` says why the KB reads none). A glob that matches nothing is a
    usage error naming it."""
    import glob

    files: list[str] = []
    ignored: list[tuple[str, str]] = []
    for pattern in patterns:
        matches = glob.glob(pattern, recursive=True) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise UsageError(f"no files match {pattern!r}")
        for match in sorted(matches):
            if not os.path.isdir(match):
                files.append(match)
                continue
            for root, dirs, names in os.walk(match):
                ignored += [(os.path.join(root, d), "hidden folder") for d in dirs if d[0] == "."]
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(names):
                    path = os.path.join(root, name)
                    extension = name.rpartition(".")[2].lower() if "." in name else ""
                    if name.startswith("."):
                        ignored.append((path, "hidden file"))
                    elif images_off and extension in IMAGE_SUFFIXES:
                        ignored.append((path, images_off))
                    elif extension in formats:
                        files.append(path)
                    else:
                        ignored.append((path, f"not a supported format (.{extension or '?'})"))
    return [os.path.abspath(f) for f in files], [(os.path.abspath(p), why) for p, why in ignored]


def cmd_add(c: Client, a: argparse.Namespace, out: Output) -> Any:
    status = api.status(c)
    formats = set(status.get("extensions") or status["formats"])
    files, ignored = expand_paths(a.paths, formats, _images_off(c, a.kb))
    if not files:
        raise UsageError("no files to add" + (": every file found was ignored" if ignored else ""))
    progress = out.progress("adding")
    results: list[dict[str, Any]] = []
    for i, path in enumerate(files):
        progress.show(i, len(files), os.path.basename(path))
        results.append(_add_one(c, a, path, Path(status["data_home"])))
    progress.show(len(files), len(files))
    progress.close()
    counts = {s: sum(r["status"] == s for r in results)
              for s in ("added", "updated", "unchanged", "rejected")}  # fmt: skip
    if out.as_json:
        out.json(
            {
                "results": results,
                "counts": counts,
                "ignored": len(ignored),
                "ignored_files": [{"path": p, "reason": why} for p, why in ignored],
            }
        )
    else:
        _report(out, results, ignored, counts)
    return RESULT_FAILED if counts["rejected"] else None


def _images_off(c: Client, kb: str) -> str | None:
    """Why a folder's images are left out, when the KB reads none (its index_formats),
    with the command that turns them on."""
    import shlex

    listed = list(api.knowledge_base(c, kb)["config"].get("index_formats") or ())
    if set(listed) & set(IMAGE_SUFFIXES):
        return None
    formats = ",".join([*listed, *IMAGE_FORMATS])
    turn_on = f"cofferctl kb set {shlex.quote(kb)} index_formats={formats}"
    return f"an image: this KB reads images only when it lists them ({turn_on})"


def _add_one(c: Client, a: argparse.Namespace, path: str, data_home: Path) -> dict[str, Any]:
    try:  # the rules a path ingest applies (links, hidden and system folders, the data home)
        checked_source(path, data_home=data_home)
    except SourceRefused as exc:
        reason = "unreadable" if exc.not_a_file else "refused"
        return {"path": path, "status": "rejected", "reason": reason, "message": exc.message}
    try:
        # the bytes travel with the request: the daemon may not see this file (a
        # service with a private /tmp); it tracks the path for check-sources
        fields = {"replace": "true" if a.replace else "false", "source_path": path}
        if a.to is not None:
            fields["folder"] = a.to
        reply = api.upload_document(c, a.kb, Path(path), fields)
        doc = reply["document"]
        return {"path": path, "status": reply["status"], "document_id": doc["id"],
                "title": doc["title"], "document_path": doc["path"]}  # fmt: skip
    except ApiError as exc:
        if exc.code not in ("INGEST_REJECTED", "VALIDATION_ERROR"):
            raise
        # the API's field is `replace`; on the command line it is --replace
        message = exc.message.replace("pass replace to", "add --replace to")
        reason = exc.details.get("reason", exc.code.lower())
        return {"path": path, "status": "rejected", "reason": reason, "message": message}
    except OSError as exc:  # the file itself cannot be read here
        return {"path": path, "status": "rejected", "reason": "unreadable",
                "message": exc.strerror or str(exc)}  # fmt: skip


def _report(
    out: Output,
    results: list[dict[str, Any]],
    ignored: list[tuple[str, str]],
    counts: dict[str, int],
) -> None:
    for r in results:
        if r["status"] in ("added", "updated"):
            out.line(f"{r['status']} {out.style(r['title'], '1')}  {r['document_id']}")
            out.line(f"    {out.link(r['document_path'], r['document_path'])}  (from {r['path']})")
        elif r["status"] == "unchanged":
            out.line(f"unchanged {r['path']}: already here as {r['title']}  {r['document_id']}")
        elif r["status"] == "rejected":
            out.line(f"{out.style('rejected', '31')} {r['path']}: {r['message']}")
    for path, why in ignored:
        out.line(f"{out.style('ignored', '2')} {path}: {why}")
    summary = ", ".join(f"{n} {s}" for s, n in counts.items())
    out.line(summary + (f"; {len(ignored)} files ignored" if ignored else ""))


def ingest_command(action: Callable[[Client, str, str], dict[str, Any]]) -> Command:
    def run(c: Client, a: argparse.Namespace, out: Output) -> Any:
        reply = action(c, a.kb, a.doc)
        return reply if out.as_json else out.line(reply["message"])

    return run


cmd_reconvert = ingest_command(api.reconvert)
cmd_update_source = ingest_command(api.update_source)


def cmd_check_sources(c: Client, a: argparse.Namespace, out: Output) -> Any:
    report = api.check_sources(c, a.kb)
    if out.as_json:
        return report
    rows = [
        [state, e["document_id"], e["title"][:40], e["source_path"], e.get("note", "")]
        for state in ("changed", "missing", "unreachable", "updated", "unchanged")
        for e in report[state]
    ]
    if rows:
        out.table(["state", "id", "title", "source", "note"], rows)
    out.line(
        ", ".join(
            f"{len(report[k])} {k}"
            for k in ("unchanged", "changed", "missing", "unreachable", "updated")
        )
    )
    return None
