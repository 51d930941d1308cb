"""cofferctl: control cofferd, the Coffer daemon, over its Unix socket.

Exit codes: 0 success, 1 the daemon reported an error, 2 usage error, 3 the daemon is not
reachable. `--json` prints the API's JSON body unchanged. Colour only on a terminal and
never when NO_COLOR is set. Environment: COFFER_SOCKET (socket path).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from cofferctl.client import ApiError, Client, DaemonUnreachable
from cofferctl.when import parse_when
from cofferd.locations import socket_from_env

EXIT_OK, EXIT_API, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
RESULT_FAILED = object()  # a command's result when it printed its own failures
SCORE_KINDS = {"keyword": "bm25", "vector": "cosine similarity", "hybrid": "reciprocal rank fusion"}
START_HINT = "start it with `cofferd` (or `make run` in a checkout)"


class Output:
    def __init__(self, stream: TextIO, as_json: bool) -> None:
        self.stream = stream
        self.as_json = as_json
        self.color = stream.isatty() and not os.environ.get("NO_COLOR")

    def line(self, text: str = "") -> None:
        print(text, file=self.stream)

    def json(self, data: Any) -> None:
        print(json.dumps(data, indent=2, ensure_ascii=False), file=self.stream)

    def style(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        cells = [[str(c) for c in row] for row in rows]
        widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
        self.line(
            self.style("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), "1")
        )
        for row in cells:
            self.line("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())

    def link(self, text: str, path: str) -> str:
        """`text` as a terminal hyperlink to the file (OSC 8) on a terminal."""
        if not self.color:
            return text
        return f"\x1b]8;;file://{urllib.parse.quote(path)}\x1b\\{text}\x1b]8;;\x1b\\"

    def highlight(self, text: str, spans: Sequence[Sequence[int]]) -> str:
        if not self.color or not spans:
            return text
        out, last = [], 0
        for start, end in spans:
            out += [text[last:start], self.style(text[start:end], "1;33")]
            last = end
        out.append(text[last:])
        return "".join(out)


Command = Callable[[Client, argparse.Namespace, Output], Any]


def _quote(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def parse_settings(pairs: Sequence[str]) -> dict[str, Any]:
    """`chunk_size=256 embedding.model=x` -> {"chunk_size": 256, "embedding": {"model": "x"}}."""
    config: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected KEY=VALUE, got {pair!r}")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        target = config
        *parents, leaf = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return config


class UsageError(Exception):
    pass


# -- commands -----------------------------------------------------------------------------


def cmd_status(c: Client, a: argparse.Namespace, out: Output) -> Any:
    s = c.get("/api/v1/status")
    if out.as_json:
        return s
    w = s["watcher"]
    out.line(f"cofferd {s['version']} (pid {s['pid']}, up {s['uptime_s']} s)")
    out.line(f"data home  {s['data_home']}")
    out.line(f"socket     {s['socket']}")
    out.line(f"database   {s['database']} (SQLite {s['sqlite_version']})")
    health = "healthy" if w["healthy"] else "NOT RUNNING"
    out.line(
        f"watcher    {health}, {w['restarts']} restarts, queue {w['queue_depth']}, "
        f"last event {w['last_event_at'] or '-'}"
    )
    if w["last_error"]:
        out.line(f"           last error: {w['last_error']}")
    out.line(
        f"reconcile  last full {w['last_full_reconcile_at'] or 'running'}"
        f" ({w['last_full_reconcile_s'] or '-'} s), every {w['reconcile_interval_s']:.0f} s"
    )
    out.line()
    out.table(
        ["KB", "enabled", "state", "documents", "degraded", "vectors", "docs folder"],
        [
            [k["name"], "yes" if k["enabled"] else "no", k["state"], k["documents"],
             k["documents_degraded"], _vectors(k.get("vectors")),
             k["docs_path"] + (" (attached)" if k.get("attached") else "")]
            for k in s["knowledge_bases"]
        ],
    )  # fmt: skip
    for k in s["knowledge_bases"]:
        if k.get("problem"):
            out.line(f"{k['name']}: {k['problem']}")
        if k.get("conflicts"):
            out.line(
                f"{k['name']}: {k['conflicts']} sync conflicts (cofferctl conflicts {k['name']})"
            )
        if k.get("settings_error"):
            out.line(f"{k['name']}: settings cannot be read: {k['settings_error']}")
    if s.get("vector_search", "available") != "available":
        out.line(f"vector search: {s['vector_search']}")
    return None


def _vectors(state: dict[str, Any] | None) -> str:
    if not state:
        return "-"
    pending = f", {state['embed_pending']} to embed" if state["embed_pending"] else ""
    return f"{state['model']}{pending}"


def _kb_rows(kbs: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for kb in kbs:
        cfg = kb["config"]
        rows.append([
            kb["name"], "yes" if kb["enabled"] else "no",
            ",".join(cfg["enabled_modes"]), cfg["chunk_size"], kb["created_at"],
        ])  # fmt: skip
    return rows


def cmd_kb_list(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = c.get("/api/v1/knowledge_bases")
    if out.as_json:
        return data
    out.table(["name", "enabled", "modes", "chunk", "created"], _kb_rows(data["knowledge_bases"]))
    return None


def cmd_kb_create(c: Client, a: argparse.Namespace, out: Output) -> Any:
    body: dict[str, Any] = {"name": a.name, "config": parse_settings(a.set)}
    if a.path is not None:
        body["path"] = os.path.abspath(os.path.expanduser(a.path))
    kb = c.post("/api/v1/knowledge_bases", body)
    if out.as_json:
        return kb
    if kb.get("attached"):
        out.line(
            f"attached {kb['attached']} as {kb['name']}; indexing it now (nothing is written there)"
        )
        _refresh_service(out)
    else:
        out.line(f"created {kb['name']}")
    return None


def cmd_kb_show(c: Client, a: argparse.Namespace, out: Output) -> Any:
    kb = c.get(c.kb(a.name))
    if out.as_json:
        return kb
    out.line(
        f"{kb['name']} ({'enabled' if kb['enabled'] else 'disabled'}), created {kb['created_at']}"
    )
    for key, value in kb["config"].items():
        out.line(f"  {key}: {json.dumps(value)}")
    return None


def cmd_kb_set(c: Client, a: argparse.Namespace, out: Output) -> Any:
    kb = c.request("PATCH", c.kb(a.name), {"config": parse_settings(a.settings)})
    if out.as_json:
        return kb
    out.line(f"updated {kb['name']}")
    if kb.get("reindex"):
        out.line(f"re-chunked: {kb['reindex']['documents_updated']} documents")
    return None


def cmd_kb_delete(c: Client, a: argparse.Namespace, out: Output) -> Any:
    attached = c.get(c.kb(a.name)).get("attached")
    what = (
        f"its index and settings; your folder {attached} and its files are not touched"
        if attached
        else "its folder and ALL its files"
    )
    if not a.yes:
        if not sys.stdin.isatty():
            raise UsageError(f"deleting {a.name!r} removes {what}; pass --yes")
        answer = input(f"Delete knowledge base {a.name!r}: {what}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            out.line("kept")
            return None
    data = c.request("DELETE", c.kb(a.name))
    if out.as_json:
        return data
    out.line(f"deleted {a.name}; {attached} is untouched" if attached else f"deleted {a.name}")
    if attached:
        _refresh_service(out)
    return None


def _refresh_service(out: Output) -> None:
    """An installed service may write only in attached folders it lists: list them again."""
    from cofferctl import service

    service.refresh(out.line)


def _enable(enabled: bool) -> Command:
    def run(c: Client, a: argparse.Namespace, out: Output) -> Any:
        verb = "enable" if enabled else "disable"
        data = c.post(f"/api/v1/resources/knowledge_base/{_quote(a.name)}/{verb}")
        return data if out.as_json else out.line(f"{verb}d {a.name}")

    return run


def cmd_docs(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = c.get(c.kb(a.kb, "/documents"), q=a.q, limit=a.limit, offset=a.offset)
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


def cmd_links(c: Client, a: argparse.Namespace, out: Output) -> Any:
    if a.broken == (a.doc is not None):
        raise UsageError("give a document, or --broken for every broken link")
    if a.broken:
        data = c.get(c.kb(a.kb, "/links/broken"))
        if out.as_json:
            return data
        for link in data["links"]:
            out.line(f"{link['relative_path']}:{link['line']}: {link['target']}  (broken)")
        out.line(f"{len(data['links'])} broken links")
        return None
    data = c.get(c.kb(a.kb, f"/documents/{_quote(a.doc)}/links"))
    if out.as_json:
        return data
    out.line(out.style(f"links from {a.doc}", "1"))
    for link in data["outgoing"]:
        to = link["relative_path"] or out.style("broken", "31")
        note = "  (ambiguous: the shortest path is taken)" if link["ambiguous"] else ""
        out.line(f"  line {link['line']}: {link['target']} -> {to}{note}")
    out.line(out.style("backlinks", "1"))
    for link in data["backlinks"]:
        where = out.link(f"{link['relative_path']}:{link['line']}", link["path"])
        out.line(f"  {where}  {link['document_id']}")
    return None


def cmd_conflicts(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = c.get(c.kb(a.kb, "/conflicts"))
    if out.as_json:
        return data
    for item in data["conflicts"]:
        where = out.link(item["relative_path"], item["path"])
        if item["kind"] == "merge_markers":
            out.line(f"{where}: holds git merge markers  {item['document_id']}")
        else:
            out.line(f"{where}: {item['tool']} copy of {item['conflicts_with']}")
    out.line(f"{len(data['conflicts'])} conflicts")
    return None


def cmd_tags(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = c.get(c.kb(a.kb, "/tags"))
    if out.as_json:
        return data
    out.table(["tag", "documents"], [[f"#{t['tag']}", t["count"]] for t in data["tags"]])
    return None


def cmd_show(c: Client, a: argparse.Namespace, out: Output) -> Any:
    doc = c.get(c.kb(a.kb, f"/documents/{_quote(a.doc)}"))
    if out.as_json:
        return doc
    out.line(out.style(doc["title"], "1") + f"  ({doc['path']})")
    if doc.get("tags"):
        out.line(out.style(" ".join(f"#{t}" for t in doc["tags"]), "36"))
    out.line()
    out.stream.write(doc["content"])
    return None


def cmd_edit(c: Client, a: argparse.Namespace, out: Output) -> Any:
    doc = c.get(c.kb(a.kb, f"/documents/{_quote(a.doc)}"))
    import shlex
    import subprocess

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    code = subprocess.call([*shlex.split(editor), doc["path"]])
    if code != 0:
        raise UsageError(f"{editor} exited with {code}")
    return None


def cmd_rm(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = c.request("DELETE", c.kb(a.kb, f"/documents/{_quote(a.doc)}"))
    return data if out.as_json else out.line(f"deleted {data['deleted']['relative_path']}")


def _filters(a: argparse.Namespace) -> dict[str, Any] | None:
    filters: dict[str, Any] = {
        "folder": a.folder,
        "tags": a.tags or None,
        "source_mode": a.source_mode,
    }
    for key, option, value in (
        ("updated_after", "--since", a.since),
        ("updated_before", "--until", a.until),
    ):
        if value is not None:
            try:
                filters[key] = parse_when(value, end_of_day=key == "updated_before")
            except ValueError:
                raise UsageError(
                    f"{option} takes a date (2026-11-30), a time (2026-11-30T18:00) "
                    f"or an age (3d, 12h, 2w); got {value!r}"
                ) from None
    return {k: v for k, v in filters.items() if v is not None} or None


def cmd_search(c: Client, a: argparse.Namespace, out: Output) -> Any:
    filters = _filters(a)
    if a.all or a.kbs:  # then the first word is part of the query, not a KB
        query = " ".join([a.kb, *a.query])
        body = {"query": query, "top_k": a.top_k, "knowledge_bases": a.kbs or None}
        body["filters"] = filters
        data = c.post("/api/v1/search", {k: v for k, v in body.items() if v is not None})
    elif not a.query:
        raise UsageError("give the words to search for after the knowledge base")
    else:
        body = {"query": " ".join(a.query), "top_k": a.top_k, "filters": filters}
        data = c.post(c.kb(a.kb, "/search"), {k: v for k, v in body.items() if v is not None})
    if out.as_json:
        return data
    mode = data.get("mode", "keyword")
    fallback = f" (fallback: {data['fallback'].replace('_', ' ')})" if data.get("fallback") else ""
    kind = SCORE_KINDS["hybrid"] if a.all or a.kbs else SCORE_KINDS.get(mode, mode)
    out.line(out.style(f"{mode} search{fallback}; score: {kind}", "2"))
    if not data["passages"]:
        out.line("no matches")
    for i, p in enumerate(data["passages"], 1):
        heading = " > ".join(p["heading"][1:])
        where = out.link(f"{p['path']}:{p['line_start']}", p["path"])
        kb = f"{p['knowledge_base']}  " if a.all or a.kbs else ""
        out.line(f"{i:>2}. {out.style(p['title'], '1')}  {p['score']:.3f}  {kb}{p['document_id']}")
        out.line(f"    {where}" + (out.style(f"  > {heading}", "2") if heading else ""))
        snippet = " ".join(out.highlight(p["snippet"], p["highlights"]).split())
        out.line(f"    {snippet}")
    return None


def cmd_grep(c: Client, a: argparse.Namespace, out: Output) -> Any:
    body = {"pattern": a.pattern, "max_matches": a.max_matches, "ignore_case": a.ignore_case}
    data = c.post(c.kb(a.kb, "/grep"), body)
    if out.as_json:
        return data
    current = None
    for h in data["hits"]:
        path = out.link(out.style(h["relative_path"], "35"), h["path"])
        number = out.style(str(h["line_number"]), "32")
        if not out.color:  # grep's own form, for pipes
            out.line(f"{path}:{number}:{h['line']}")
            continue
        if h["path"] != current:  # on a terminal, a heading per file with its document id
            out.line(
                ("\n" if current else "") + f"{path}  {out.style(h['document_id'] or '', '2')}"
            )
            current = h["path"]
        out.line(f"{number}:{h['line']}")
    if data["truncated"]:
        out.line(out.style("(more matches not shown: raise --max-matches)", "2"))
    return None


def cmd_reindex(c: Client, a: argparse.Namespace, out: Output) -> Any:
    r = c.post(c.kb(a.kb, "/reindex"))
    if out.as_json:
        return r
    out.line(
        f"{r['scanned']} files: {r['documents_added']} added, {r['documents_updated']} updated, "
        f"{r['documents_removed']} removed, {r['documents_unchanged']} unchanged, "
        f"{r['documents_skipped']} skipped"
    )
    for s in r["skipped"]:
        out.line(f"  skipped {s['path']}: {s['reason']}")
    return None


def cmd_metrics(c: Client, a: argparse.Namespace, out: Output) -> Any:
    m = c.get(c.kb(a.kb, "/metrics"))
    if out.as_json:
        return m
    for key in ("documents", "chunks", "documents_degraded", "disk_bytes"):
        out.line(f"{key:<20}{m[key]:>12,}")
    out.line(f"{'modes':<20}{','.join(m['modes']):>12}")
    return None


def expand_paths(patterns: Sequence[str], formats: set[str]) -> tuple[list[str], int]:
    """Files named, matched by a glob, or found under a directory (hidden ones skipped);
    files in directories whose type Coffer cannot read are counted, not sent."""
    import glob

    files: list[str] = []
    ignored = 0
    for pattern in patterns:
        matches = glob.glob(pattern, recursive=True) if glob.has_magic(pattern) else [pattern]
        for match in sorted(matches):
            if os.path.isdir(match):
                for root, dirs, names in os.walk(match):
                    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                    for name in sorted(names):
                        if name.startswith("."):
                            continue
                        if name.rpartition(".")[2].lower() in formats:
                            files.append(os.path.join(root, name))
                        else:
                            ignored += 1
            else:
                files.append(match)
    return [os.path.abspath(f) for f in files], ignored


def cmd_add(c: Client, a: argparse.Namespace, out: Output) -> Any:
    status = c.get("/api/v1/status")
    formats = set(status.get("extensions") or status["formats"])
    files, ignored = expand_paths(a.paths, formats)
    if not files:
        raise UsageError("no files to add")
    progress = sys.stderr.isatty() and not out.as_json and len(files) > 1
    results: list[dict[str, Any]] = []
    for i, path in enumerate(files, 1):
        if progress:
            done = int(30 * i / len(files))
            name = os.path.basename(path)[:40]
            print(f"\r[{'#' * done}{' ' * (30 - done)}] {i}/{len(files)} {name:<40}", end="",
                  file=sys.stderr, flush=True)  # fmt: skip
        try:
            # the bytes travel with the request: the daemon may not see this file (a
            # service with a private /tmp); it tracks the path for check-sources
            fields = {"replace": "true" if a.replace else "false", "source_path": path}
            reply = c.upload(c.kb(a.kb, "/documents"), Path(path), fields)
            results.append({"path": path, "status": reply["status"],
                            "document_id": reply["document"]["id"]})  # fmt: skip
        except ApiError as exc:
            if exc.code not in ("INGEST_REJECTED", "VALIDATION_ERROR"):
                raise
            reason = exc.details.get("reason", exc.code.lower())
            results.append({"path": path, "status": "rejected", "reason": reason,
                            "message": exc.message})  # fmt: skip
        except OSError as exc:  # the file itself cannot be read here
            results.append({"path": path, "status": "rejected", "reason": "unreadable",
                            "message": exc.strerror or str(exc)})  # fmt: skip
    if progress:
        print(file=sys.stderr)
    counts = {s: sum(r["status"] == s for r in results)
              for s in ("added", "updated", "unchanged", "rejected")}  # fmt: skip
    if out.as_json:
        out.json({"results": results, "counts": counts, "ignored": ignored})
    else:
        for r in results:
            if r["status"] == "rejected":
                out.line(f"{out.style('rejected', '31')} {r['path']}: {r['message']}")
        summary = ", ".join(f"{n} {s}" for s, n in counts.items())
        out.line(summary + (f"; {ignored} files of other types ignored" if ignored else ""))
    return RESULT_FAILED if counts["rejected"] else None


def _ingest_command(action: str) -> Command:
    def run(c: Client, a: argparse.Namespace, out: Output) -> Any:
        reply = c.post(c.kb(a.kb, f"/documents/{_quote(a.doc)}/{action}"))
        return reply if out.as_json else out.line(reply["message"])

    return run


def cmd_check_sources(c: Client, a: argparse.Namespace, out: Output) -> Any:
    report = c.post(c.kb(a.kb, "/check-sources"))
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


def cmd_mcp(c: Client, a: argparse.Namespace, out: Output) -> Any:
    from cofferctl import mcp_server  # only this command pays for importing mcp

    mcp_server.run(c.socket_path)
    return None


def cmd_service(c: Client, a: argparse.Namespace, out: Output) -> Any:
    from cofferctl import service

    try:
        code = service.execute(a.action, a.dry_run, out.line)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    return RESULT_FAILED if code else None


def cmd_log(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = c.get("/api/v1/audit", kb=a.kb, limit=a.limit)
    calls = c.get("/api/v1/mcp_invocations", limit=a.limit)
    if out.as_json:
        return {**data, **calls}
    out.table(
        ["time", "actor", "event", "kb", "document"],
        [[e["at"][:19], e["actor"], e["event"], e["resource_name"] or "-", e["document_id"] or "-"]
         for e in reversed(data["events"])],
    )  # fmt: skip
    if calls["invocations"]:
        out.line()
        out.table(
            ["time", "agent", "MCP tool", "ms", "outcome"],
            [[i["at"][:19], i["client"], i["tool"], f"{i['duration_ms']:.0f}", i["outcome"]]
             for i in reversed(calls["invocations"])],
        )  # fmt: skip
    return None


# -- parser -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    # Accepted before or after the command: separate dests, so a subcommand's defaults
    # cannot reset what was given before it (merged in main()).
    def options(prefix: str) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(add_help=False)
        parser.add_argument(
            "--json", action="store_true", dest=f"{prefix}json", help="print the API's JSON"
        )
        parser.add_argument(
            "--socket",
            dest=f"{prefix}socket",
            metavar="PATH",
            help="daemon socket (env COFFER_SOCKET)",
        )
        return parser

    common = options("sub_")

    p = argparse.ArgumentParser(
        prog="cofferctl",
        description="Control cofferd, the Coffer daemon.",
        epilog="Exit codes: 0 ok, 1 error from the daemon, 2 usage, 3 daemon not reachable.",
        parents=[options("")],
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, fn: Command, help: str, parent: Any = sub) -> argparse.ArgumentParser:
        sp: argparse.ArgumentParser = parent.add_parser(
            name, help=help, description=help, parents=[common]
        )
        sp.set_defaults(fn=fn)
        return sp

    add("status", cmd_status, "show the daemon, its knowledge bases and the watcher")

    kb = sub.add_parser("kb", help="manage knowledge bases", description="manage knowledge bases")
    kb_sub = kb.add_subparsers(dest="kb_command", metavar="ACTION", required=True)
    add("list", cmd_kb_list, "list knowledge bases", kb_sub)
    sp = add("create", cmd_kb_create, "create a knowledge base", kb_sub)
    sp.add_argument("name")
    sp.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="settings")
    sp.add_argument(
        "--path", metavar="DIR", help="attach this folder of yours, indexed where it is"
    )
    sp = add("show", cmd_kb_show, "show a knowledge base and its settings", kb_sub)
    sp.add_argument("name")
    sp = add("set", cmd_kb_set, "change settings (KEY=VALUE, e.g. chunk_size=256)", kb_sub)
    sp.add_argument("name")
    sp.add_argument("settings", nargs="+", metavar="KEY=VALUE")
    sp = add(
        "delete", cmd_kb_delete,
        "delete a knowledge base and its files (an attached folder is never touched)", kb_sub,
    )  # fmt: skip
    sp.add_argument("name")
    sp.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    for verb, enabled in (("enable", True), ("disable", False)):
        sp = add(verb, _enable(enabled), f"{verb} a knowledge base", kb_sub)
        sp.add_argument("name")

    sp = add("docs", cmd_docs, "list the documents of a knowledge base")
    sp.add_argument("kb")
    sp.add_argument("-q", "--q", help="only titles containing this text")
    sp.add_argument("--limit", type=int, default=50)
    sp.add_argument("--offset", type=int, default=0)
    document_commands: tuple[tuple[str, Command, str], ...] = (
        ("show", cmd_show, "print a document's Markdown"),
        ("edit", cmd_edit, "open a document in $VISUAL/$EDITOR (saved edits are indexed)"),
        ("rm", cmd_rm, "delete a document (its file and its original)"),
        ("reconvert", _ingest_command("reconvert"), "convert a document's kept original again"),
        ("update-source", _ingest_command("update-source"), "ingest a tracked source file again"),
    )
    for name, fn, text in document_commands:
        sp = add(name, fn, text)
        sp.add_argument("kb")
        sp.add_argument("doc", metavar="DOC", help="its id, an id prefix, or its path in the KB")
    sp = add("links", cmd_links, "a document's links and backlinks, or every broken link")
    sp.add_argument("kb")
    sp.add_argument("doc", metavar="DOC", nargs="?", help="its id, an id prefix, or its path")
    sp.add_argument("--broken", action="store_true", help="every link that leads nowhere")
    sp = add("tags", cmd_tags, "the tags of a knowledge base and how often each is used")
    sp.add_argument("kb")
    sp = add("conflicts", cmd_conflicts, "sync conflict copies and files with merge markers")
    sp.add_argument("kb")
    sp = add("add", cmd_add, "add files (any supported format; folders recursively, globs)")
    sp.add_argument("kb")
    sp.add_argument("paths", nargs="+", metavar="PATH")
    sp.add_argument("--replace", action="store_true", help="update documents of the same name")
    sp = add("check-sources", cmd_check_sources, "compare tracked originals with their files")
    sp.add_argument("kb")
    sp = add("search", cmd_search, "search a knowledge base (or several: --all, --kb)")
    sp.add_argument("kb", help="the knowledge base (with --all or --kb: the query's first word)")
    sp.add_argument("query", nargs="*", help="what to look for")
    sp.add_argument("--all", action="store_true", help="search every enabled knowledge base")
    sp.add_argument(
        "--kb", dest="kbs", action="append", default=[], metavar="KB",
        help="search this knowledge base too (repeatable)",
    )  # fmt: skip
    sp.add_argument("-k", "--top-k", type=int, default=10)
    sp.add_argument("--folder", help="only documents in this folder of docs/ (or below it)")
    sp.add_argument(
        "--tag", dest="tags", action="append", default=[], metavar="TAG",
        help="only documents with this tag (repeatable: all of them; nested tags count)",
    )  # fmt: skip
    sp.add_argument("--since", metavar="WHEN", help="updated since: 2026-11-30, 3d, 12h, 2w")
    sp.add_argument("--until", metavar="WHEN", help="updated until (the whole day for a date)")
    sp.add_argument("--source-mode", choices=["converted", "edited"])
    sp = add("grep", cmd_grep, "search the Markdown files with a regular expression")
    sp.add_argument("kb")
    sp.add_argument("pattern")
    sp.add_argument("-m", "--max-matches", type=int, default=100)
    sp.add_argument("-i", "--ignore-case", action="store_true")
    sp = add("reindex", cmd_reindex, "rescan a knowledge base's files now")
    sp.add_argument("kb")
    sp = add("metrics", cmd_metrics, "counts and sizes of a knowledge base")
    sp.add_argument("kb")
    add("mcp", cmd_mcp, "serve MCP on stdio: AI agents search and write through cofferd")
    service = sub.add_parser(
        "service", help="start cofferd with the OS", description="start cofferd with the OS"
    )
    service_sub = service.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, text in (
        ("install", "write and enable the systemd user units (launchd agent on macOS)"),
        ("uninstall", "stop, disable and remove them"),
        ("status", "show the service's state"),
    ):
        sp = add(action, cmd_service, text, service_sub)
        sp.add_argument("--dry-run", action="store_true", help="print, do nothing")
    sp = add("log", cmd_log, "show the audit trail and the MCP tool calls")
    sp.add_argument("--kb")
    sp.add_argument("--limit", type=int, default=50)
    return p


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    args = build_parser().parse_args(argv)
    args.json = args.json or args.sub_json
    args.socket = args.sub_socket or args.socket
    out = Output(stdout, args.json)
    socket_path = socket_from_env({"COFFER_SOCKET": args.socket} if args.socket else None)
    client = Client(socket_path)
    try:
        result = args.fn(client, args, out)
        if result is RESULT_FAILED:
            return EXIT_API
        if result is not None and out.as_json:
            out.json(result)
        return EXIT_OK
    except DaemonUnreachable:
        print(f"cofferctl: cofferd is not running on {socket_path}; {START_HINT}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except ApiError as exc:
        if out.as_json:
            out.json({"error": {"code": exc.code, "message": exc.message, "details": exc.details}})
        print(f"cofferctl: {exc.message} ({exc.code})", file=sys.stderr)
        return EXIT_API
    except UsageError as exc:
        print(f"cofferctl: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
