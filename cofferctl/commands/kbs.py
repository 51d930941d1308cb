"""`kb list | create | attach | show | set | delete | enable | disable`: knowledge bases."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from cofferctl import api
from cofferctl.client import Client
from cofferctl.command import Command, UsageError, ask
from cofferctl.output import Output
from cofferctl.settings_args import parse_settings


def cmd_kb_list(c: Client, a: argparse.Namespace, out: Output) -> Any:
    data = api.knowledge_bases(c)
    if out.as_json:
        return data
    kbs = data["knowledge_bases"]
    if a.names:  # for shell completion: one name a line, nothing else
        for kb in kbs:
            out.line(kb["name"])
        return None
    rows = [
        [kb["name"], "yes" if kb["enabled"] else "no", ",".join(kb["config"]["enabled_modes"]),
         kb["config"]["chunk_size"], kb["created_at"]]
        for kb in kbs
    ]  # fmt: skip
    out.table(["name", "enabled", "modes", "chunk", "created"], rows)
    return None


def cmd_kb_create(c: Client, a: argparse.Namespace, out: Output) -> Any:
    body: dict[str, Any] = {"name": a.name, "config": parse_settings(a.set)}
    if a.formats is not None and "index_formats" in body["config"]:
        raise UsageError("index_formats is set twice (--formats and --set): give it once")
    if a.formats is not None:
        body["config"]["index_formats"] = [f for f in a.formats.split(",") if f.strip()]
    if a.path is not None:
        body["path"] = os.path.abspath(os.path.expanduser(a.path))
    kb = api.create_knowledge_base(c, body)
    if out.as_json:
        return kb
    if kb.get("attached"):
        out.line(
            f"attached {kb['attached']} as {kb['name']}; indexing it now (nothing is written there)"
        )
        refresh_service(out)
        return None
    out.line(f"created {kb['name']}")
    folder = docs_folder(c, kb["name"])
    if folder:
        out.line(f"drop Markdown files into {folder} (or: cofferctl add {kb['name']} FILE...)")
    return None


def cmd_kb_attach(c: Client, a: argparse.Namespace, out: Output) -> Any:
    body: dict[str, Any] = {}
    if a.path is not None:
        body["path"] = os.path.abspath(os.path.expanduser(a.path))
    kb = api.attach_knowledge_base(c, a.name, body)
    if out.as_json:
        return kb
    out.line(f"attached {kb['attached']} as {kb['name']} on this machine; indexing it now")
    refresh_service(out)
    return None


def docs_folder(c: Client, name: str) -> str | None:
    for entry in api.status(c)["knowledge_bases"]:
        if entry["name"] == name:
            folder: str = entry["docs_path"]
            return folder
    return None


def cmd_kb_show(c: Client, a: argparse.Namespace, out: Output) -> Any:
    kb = api.knowledge_base(c, a.name)
    if out.as_json:
        return kb
    out.line(
        f"{kb['name']} ({'enabled' if kb['enabled'] else 'disabled'}), created {kb['created_at']}"
    )
    if kb.get("attached"):
        out.line(f"  attached: {kb['attached']}")
    for key, setting in kb["effective"].items():
        source = SOURCES.get(setting["source"], setting["source"])
        out.line(f"  {key}: {json.dumps(setting['value'], ensure_ascii=False)}  ({source})")
    if said := model_choice_line(kb.get("model_choice")):
        out.line(f"  {said}")
    return None


# where a setting in use comes from (GET knowledge base's `effective`)
SOURCES = {
    "default": "default",
    "kb_yaml": "kb.yaml",
    "machine": "this machine's settings",
    "model": "the model's default",
    "text": "chosen by its text",
}


def cmd_kb_set(c: Client, a: argparse.Namespace, out: Output) -> Any:
    current = api.knowledge_base(c, a.name)["config"]
    kb = api.change_knowledge_base(c, a.name, {"config": parse_settings(a.settings, current)})
    if out.as_json:
        return kb
    out.line(f"updated {kb['name']}")
    for warning in kb.get("warnings") or []:
        out.line(f"{out.style('warning', '33')}: {warning}")
    for notice in kb.get("notices") or []:
        out.line(f"{out.style('note', '33')}: {notice['message']}; to turn it on:")
        out.line(f"  {notice['command']}")
    if said := model_choice_line(kb.get("model_choice")):
        out.line(said)
    if languages := kb.get("model_languages"):
        out.line(model_languages_line(languages))
    if kb.get("reindexing"):
        out.line(
            f"{kb['reindexing']}: every document is indexed again in the background; "
            f"`cofferctl status` shows how far, and search says its results may be "
            f"incomplete meanwhile"
        )
    return None


def model_choice_line(choice: dict[str, Any] | None) -> str | None:
    """How the embedding model was chosen, when its text chose it (`kb set`, `kb show`,
    `status`): why, and what share of the text each bundled model reads."""
    if not choice or choice.get("chosen_by") != "text":
        return None
    said = f"embedding model {choice['model']}, chosen by its text: {choice['why']}"
    return f"{said} ({choice['reads_said']})" if choice.get("reads_said") else said


def model_languages_line(languages: dict[str, Any]) -> str:
    """What the embedding model reads, and how much of the KB it does not."""
    said = f"embedding model {languages['model']} reads {languages['languages']}"
    share = float(languages.get("not_read_share") or 0)
    if share == 0:
        return f"{said}; all of this knowledge base's text is in scripts it reads"
    return (
        f"{said}; {share:.1%} of this knowledge base's text is in scripts it does not read: "
        "that text gets no vectors (keyword search and grep find it)"
        + (
            "; for Chinese, Japanese or Korean choose embedding.model=multilingual-e5-small"
            if "Chinese" not in languages["languages"]
            else ""
        )
    )


def cmd_kb_delete(c: Client, a: argparse.Namespace, out: Output) -> Any:
    attached = api.knowledge_base(c, a.name).get("attached")  # a missing KB is named before asking
    what = (
        f"its index and settings; your folder {attached} and its files are not touched"
        if attached
        else "its folder and ALL its files"
    )
    if not a.yes:
        if not sys.stdin.isatty():
            raise UsageError(f"deleting {a.name!r} removes {what}; pass --yes")
        if not ask(f"Delete knowledge base {a.name!r}: {what}?"):
            out.line("kept")
            return None
    data = api.delete_knowledge_base(c, a.name)
    if out.as_json:
        return data
    out.line(f"deleted {a.name}; {attached} is untouched" if attached else f"deleted {a.name}")
    if attached:
        refresh_service(out)
    return None


def refresh_service(out: Output) -> None:
    """An installed service may write only in attached folders it lists: list them again."""
    from cofferctl import service_units as service

    service.refresh(out.line)


def enable(enabled: bool) -> Command:
    def run(c: Client, a: argparse.Namespace, out: Output) -> Any:
        verb = "enable" if enabled else "disable"
        data = api.set_enabled(c, a.name, enabled)
        return data if out.as_json else out.line(f"{verb}d {a.name}")

    return run


cmd_kb_enable = enable(True)
cmd_kb_disable = enable(False)
