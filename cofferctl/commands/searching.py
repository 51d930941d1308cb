"""`search` (ranked passages) and `grep` (regular expression over the files)."""

from __future__ import annotations

import argparse
import re
import sys

from cofferctl import api
from cofferctl.client import Client
from cofferctl.command import RESULT_FAILED, UsageError
from cofferctl.output import Output, visible

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: ~3 ms of each start
if TYPE_CHECKING:
    from typing import Any

# What a passage's score is, by the mode that ranked it: the column's label, and what it
# means. Several KBs at once are merged by rank fusion.
SCORE_KINDS = {
    "keyword": ("bm25", "bm25"),
    "vector": ("cosine", "cosine similarity"),
    "hybrid": ("fused", "keyword and vector scores combined"),
    "several": ("rrf", "reciprocal rank fusion"),
}


def _filters(a: argparse.Namespace) -> dict[str, Any] | None:
    filters: dict[str, Any] = {
        "folder": a.folder,
        "tags": a.tags or None,
        "source_mode": a.source_mode,
        "format": [f for value in a.formats for f in value.split(",") if f] or None,
    }
    for key, option, value in (
        ("updated_after", "--since", a.since),
        ("updated_before", "--until", a.until),
    ):
        if value is not None:
            from cofferctl.when import parse_when  # datetime: ~2 ms, for these options only

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
    several = bool(a.all or a.kbs)
    if several:  # then the first word is part of the query, not a KB
        query = " ".join([a.kb, *a.query])
        body = {"query": query, "top_k": a.top_k, "knowledge_bases": a.kbs or None, "mode": a.mode}
        body["filters"] = filters
        data = api.search_all(c, {k: v for k, v in body.items() if v is not None})
    elif not a.query:
        raise UsageError("give the words to search for after the knowledge base")
    else:
        body = {"query": " ".join(a.query), "top_k": a.top_k, "filters": filters, "mode": a.mode}
        data = api.search(c, a.kb, {k: v for k, v in body.items() if v is not None})
    if out.as_json:
        return data
    _say_indexing(data["knowledge_bases"] if several else {a.kb: data})
    if data.get("query_cut"):
        print(visible(data["query_cut"]), file=sys.stderr)
    mode = data.get("mode", "keyword")
    fallback = f" (fallback: {data['fallback'].replace('_', ' ')})" if data.get("fallback") else ""
    label, meaning = SCORE_KINDS.get("several" if several else mode, (mode, mode))
    out.line(out.style(f"{mode} search{fallback}; score: {meaning}, higher is better", "2"))
    if not data["passages"]:
        out.line("no matches")
    for i, p in enumerate(data["passages"], 1):
        heading = " > ".join(p["heading"][1:])
        where = out.link(_place(p), p["path"])
        kb = f"{p['knowledge_base']}  " if several else ""
        score = out.style(f"{label} {p['score']:.4g}", "2")
        out.line(f"{i:>2}. {out.style(p['title'], '1')}  {score}  {kb}{p['document_id']}")
        out.line(f"    {where}" + (out.style(f"  > {heading}", "2") if heading else ""))
        snippet = " ".join(out.highlight(p["snippet"], p["highlights"]).split())
        out.line(f"    {snippet}")
    return None


def _place(p: dict[str, Any]) -> str:
    """Where a passage is, to open: its file and line; a PDF's page, a deck's slide, a
    workbook's sheet (a converted file's lines are those of its converted text, not of
    the file)."""
    path = str(p["path"])
    if p.get("page") is not None:
        return f"{path} ({p.get('location') or 'page ' + str(p['page'])})"
    if not path.lower().endswith((".md", ".markdown", ".txt", ".text")):
        return path
    return f"{path}:{p['line_start']}"


def _say_indexing(answers: dict[str, Any]) -> None:
    """A line on stderr for each knowledge base still being indexed: its answer may lack
    passages of the files not indexed yet."""
    for name, answer in answers.items():
        indexing = answer.get("indexing")
        if not indexing:
            continue
        total = indexing.get("total")
        files = "(counting files)" if total is None else f"{indexing['done']:,} of {total:,} files"
        because = f" ({indexing['because']})" if indexing.get("because") else ""
        line = f"{name}: still indexing {files}{because}; results may be incomplete"
        print(visible(line), file=sys.stderr)


def _local_pattern(pattern: str, ignore_case: bool) -> re.Pattern[str] | None:
    """The daemon's pattern (ripgrep's syntax) as Python reads it, to colour the matches;
    None where Python's syntax differs: the lines are still shown, uncoloured."""
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error:
        return None


def cmd_grep(c: Client, a: argparse.Namespace, out: Output) -> Any:
    body = {"pattern": a.pattern, "max_matches": a.max_matches, "ignore_case": a.ignore_case}
    data = api.grep(c, a.kb, body)
    if out.as_json:
        out.json(data)
        return RESULT_FAILED if not data["hits"] else None
    pattern = _local_pattern(a.pattern, a.ignore_case) if out.color else None
    current = None
    for h in data["hits"]:  # in the daemon's order: by path, then line
        path = out.link(out.style(h["relative_path"], "35"), h["path"])
        # a converted document's hit: its page (slide, sheet), then the line within it
        at = f"{h['location']}:" if h.get("location") else ""
        number = out.style(f"{at}{h['line_number']}", "32")
        line = out.highlight_pattern(h["line"], pattern)
        if not out.color:  # grep's own form, for pipes
            out.line(f"{path}:{number}:{line}")
            continue
        if h["path"] != current:  # on a terminal, a heading per file with its document id
            if current:
                out.line()
            out.line(f"{path}  {out.style(h['document_id'] or '', '2')}")
            current = h["path"]
        out.line(f"{number}:{line}")
    if data["truncated"]:
        out.line(out.style("(more matches not shown: raise --max-matches)", "2"))
    return RESULT_FAILED if not data["hits"] else None
