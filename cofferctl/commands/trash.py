"""`trash KB` and `restore KB TRASH_ID`: deleted documents, kept for the retention period."""

from __future__ import annotations

import argparse
from typing import Any

from cofferctl import api
from cofferctl.client import Client
from cofferctl.output import Output
from cofferctl.paging import page_line


def cmd_trash(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = api.trash(c, a.kb, limit=a.limit, offset=a.offset)
    if out.as_json:
        return data
    out.table(
        ["trash id", "deleted", "expires", "path", "title"],
        [[i["id"], i["deleted_at"][:19], i["expires_at"][:10], i["relative_path"],
          i["title"][:40] + (" (+ original)" if i.get("has_original") else "")]
         for i in data["items"]],
    )  # fmt: skip
    out.line(page_line(data, len(data["items"]), "in the trash", ["trash", a.kb], a.limit))
    out.line(
        f"each kept {data['retention_days']} days; "
        f"cofferctl restore {a.kb} TRASH_ID brings one back"
    )
    return None


def cmd_restore(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = api.restore(c, a.kb, a.trash_id)
    if out.as_json:
        return data
    doc = data["restored"]
    out.line(f"restored {doc['relative_path']} ({doc['title']}), id {doc['id']}")
    return None
