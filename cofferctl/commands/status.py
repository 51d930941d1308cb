"""`status`, `skipped`, `metrics`, `log`: what the daemon and its knowledge bases are doing."""

from __future__ import annotations

import argparse
from typing import Any

from coffer_kernel.durations import rate, time_left
from cofferctl import api
from cofferctl.client import Client
from cofferctl.commands.kbs import model_choice_line
from cofferctl.output import Output
from cofferctl.paging import page_line


def cmd_status(c: Client, a: argparse.Namespace, out: Output) -> Any:
    s = api.status(c)
    if out.as_json:
        return s
    w = s["watcher"]
    out.line(f"cofferd {s.get('version', '?')} (pid {s['pid']}, up {s['uptime_s']} s)")
    out.line(f"data home  {s['data_home']}")
    out.line(f"socket     {s['socket']}")
    out.line(f"database   {s['database']} (SQLite {s['sqlite_version']})")
    web = s.get("web") or {}
    out.line(
        f"web page   {web['address'] + ' (cofferctl web opens it)' if web.get('on') else 'off'}"
    )
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
        ["KB", "enabled", "state", "documents", "degraded", "skipped", "vectors", "docs folder"],
        [
            [k["name"], "yes" if k["enabled"] else "no", k["state"], k["documents"],
             k["documents_degraded"], k.get("skipped", "-"), _vectors(k.get("vectors")),
             k["docs_path"] + (" (attached)" if k.get("attached") else "")]
            for k in s["knowledge_bases"]
        ],
    )  # fmt: skip
    for k in s["knowledge_bases"]:
        for note in kb_notes(k):
            out.line(f"{k['name']}: {note}")
    for refused in s.get("refused_folders", []):
        out.line(f"refused folder {refused['name']}: {refused['reason']}")
    if s.get("vector_search", "available") != "available":
        out.line(f"vector search: {s['vector_search']}")
    if s.get("cjk_tokenizer", "native") != "native":
        out.line(f"CJK tokenizer: {s['cjk_tokenizer']}")
    return None


def kb_notes(k: dict[str, Any]) -> list[str]:
    """What a knowledge base's status entry says beyond the table: work, problems, skips."""
    notes = []
    if progress := k.get("progress"):
        notes.append(describe_progress(progress))
    problems = list(k.get("problems") or [])
    if k.get("problem") and k["problem"] not in problems:
        problems.insert(0, k["problem"])
    notes += [f"problem: {p}" for p in problems]
    if said := model_choice_line((k.get("vectors") or {}).get("model_choice")):
        notes.append(said)
    if k.get("skipped"):
        notes.append(f"{k['skipped']} files skipped (cofferctl skipped {k['name']})")
    if k.get("conflicts"):
        notes.append(f"{k['conflicts']} sync conflicts (cofferctl conflicts {k['name']})")
    if k.get("settings_error"):
        notes.append(f"settings cannot be read: {k['settings_error']}")
    return notes


def describe_progress(p: dict[str, Any]) -> str:
    percent = 100 * p["done"] / p["total"] if p["total"] else 0.0
    eta = p.get("eta_s")
    left = f", {time_left(eta)} left" if eta is not None and p["done"] < p["total"] else ""
    unit = f" {p['unit']}" if p.get("unit") else ""
    return (
        f"{p['phase']} {p['done']:,}/{p['total']:,}{unit} ({percent:.0f}%), "
        f"{rate(p['rate_per_s'])}/s{left}, since {p['started_at'][:19]}"
    )


def _vectors(state: dict[str, Any] | None) -> str:
    if not state:
        return "-"
    pending = f", {state['embed_pending']} to embed" if state["embed_pending"] else ""
    return f"{state['model']}{pending}"


def cmd_skipped(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = api.skipped(c, a.kb, limit=a.limit, offset=a.offset)
    if out.as_json:
        return data
    degraded = [item for item in data["items"] if item.get("degraded")]
    for item in data["items"]:
        how = " (indexed in a bounded form)" if item.get("degraded") else ""
        out.line(f"{out.link(item['relative_path'], item['path'])}: {item['reason']}{how}")
    out.line(f"{len(data['items']) - len(degraded)} files skipped")
    if degraded:
        out.line(f"{len(degraded)} documents indexed in a bounded form")
    if data["offset"] or len(data["items"]) < data["total"]:  # a page of them
        out.line(page_line(data, len(data["items"]), "listed", ["skipped", a.kb], a.limit))
    return None


def cmd_metrics(c: Client, a: argparse.Namespace, out: Output) -> Any:
    m = api.metrics(c, a.kb)
    if out.as_json:
        return m
    for key in ("documents", "chunks", "documents_degraded", "disk_bytes"):
        out.line(f"{key:<20}{m[key]:>12,}")
    out.line(f"{'modes':<20}{','.join(m['modes']):>12}")
    return None


def cmd_log(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = api.audit(c, kb=a.kb, limit=a.limit)
    calls = api.mcp_invocations(c, limit=a.limit)
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
