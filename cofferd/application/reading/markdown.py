"""Markdown files as people write them: decoding, frontmatter, title, document ids.

Bad input is indexed as well as it can be: a BOM is dropped, CRLF becomes LF, invalid
UTF-8 is read as Windows-1252, NUL bytes are removed; frontmatter that does not parse is treated as
text (a `---` letterhead is common). Only files that are mostly binary are skipped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from coffer_kernel.markdown_grammar import first_h1
from cofferd import safe_yaml
from cofferd.domain.budgets import DEFAULT, Budget
from cofferd.domain.conflicts import has_merge_markers
from cofferd.domain.links import Link, links_of
from cofferd.domain.tags import aliases_of, tags_of

ULID_NAME = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}\.md$")
_FRONTMATTER_END = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)
# Frontmatter is a few lines of metadata. Anything beyond these bounds (YAML aliases can
# make 300 bytes expand into hundreds of MB once shown as JSON) is treated as text.
FRONTMATTER_MAX_BYTES = 64 * 1024
FRONTMATTER_MAX_NODES = 10_000  # values, counting every expansion of an alias
FRONTMATTER_MAX_DEPTH = 32
BINARY_NUL_RATIO = 0.01
BINARY_CONTROL_RATIO = 0.05
_CONTROL = re.compile(r"[\x01-\x08\x0b\x0e-\x1f\x7f]")

# Frontmatter keys Coffer reads into document metadata (seed: KB metadata keys).
METADATA_KEYS = {
    "source_filename": "original_filename",
    "source_format": "original_format",
    "source_sha256": "source_sha256",
    "converter": "conversion_engine",
    "converted_at": "converted_at",
    "source_path": "source_path",
}


class NotText(ValueError):
    """The file is not text; it is skipped with this reason."""


PLAIN_TITLE_MAX_CHARS = 120  # a longer first line of a text file is no title


@dataclass(frozen=True)
class ParsedMarkdown:
    title: str
    description: str | None
    body: str
    frontmatter: dict[str, Any]
    source_mode: str
    metadata: dict[str, Any] = field(default_factory=dict)
    body_line: int = 1  # the line of the file the body starts on
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    links: tuple[Link, ...] = ()
    degraded: tuple[str, ...] = ()  # the budgets that bound what was read of it


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def body_hash(body: str) -> str:
    return content_hash(body.encode("utf-8"))


def compose(frontmatter: dict[str, Any], body: str) -> str:
    """A Markdown file: YAML frontmatter, then the body (as split_frontmatter returns it)."""
    head = yaml.safe_dump(frontmatter, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{head}---\n{body.lstrip(chr(10))}"


def document_id(relpath: str) -> str:
    """Stable without touching the file: `<ULID>.md` at the top of docs/ is that ULID; any
    other file's id derives from its path (lowercase, so it never equals a ULID)."""
    if ULID_NAME.match(relpath):
        return relpath[:-3]
    return "p" + hashlib.sha256(relpath.encode()).hexdigest()[:25]


# byte order marks, the longest first (UTF-32 LE begins as UTF-16 LE does)
BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def decode(data: bytes) -> tuple[str, list[str]]:
    """Text from bytes, best effort: as its byte order mark says (UTF-8, UTF-16, UTF-32, as
    Windows' editors save), else UTF-8, else Windows-1252/Latin-1 (old notes)."""
    notes: list[str] = []
    for bom, encoding in BOMS:
        if data.startswith(bom):
            try:
                return _tidy(data[len(bom) :].decode(encoding), notes)
            except UnicodeDecodeError:
                break  # no text in that encoding after all: judged as any other bytes
    if data.count(b"\0") > max(1, len(data) * BINARY_NUL_RATIO):
        raise NotText("binary content")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        try:
            text = data.decode("cp1252")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
        notes.append("not_utf8")
    return _tidy(text, notes)


def _tidy(text: str, notes: list[str]) -> tuple[str, list[str]]:
    if len(_CONTROL.findall(text)) > len(text) * BINARY_CONTROL_RATIO:
        raise NotText("binary content")
    if "\0" in text:
        text = text.replace("\0", "")
        notes.append("nul_bytes")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, notes


def split_frontmatter(text: str) -> tuple[dict[str, Any], str, bool]:
    """(frontmatter, body, malformed). Only a leading `---` block that parses as a YAML
    mapping is frontmatter; anything else stays part of the body."""
    if not text.startswith("---"):
        return {}, text, False
    first_nl = text.find("\n")
    if first_nl < 0 or text[:first_nl].strip() != "---":
        return {}, text, False
    end = _FRONTMATTER_END.search(text, first_nl + 1, first_nl + 1 + FRONTMATTER_MAX_BYTES)
    if end is None:
        return {}, text, True
    try:
        data = safe_yaml.load(
            text[first_nl + 1 : end.start()],
            max_nodes=FRONTMATTER_MAX_NODES,
            max_depth=FRONTMATTER_MAX_DEPTH,
        )
    except (yaml.YAMLError, safe_yaml.YamlTooLarge):
        return {}, text, True
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return {}, text, True
    return data, text[end.end() :].lstrip("\n"), False


def _text_value(value: Any) -> str | None:
    if isinstance(value, str | int | float) and str(value).strip():
        return str(value).strip()[:500]
    return None


def parse_plain(data: bytes, relpath: str) -> ParsedMarkdown:
    """A plain text file: all of it is the body, named by its first line when that is
    short enough to be a title (as plain-text note apps write them), else its file name."""
    text, notes = decode(data)
    metadata: dict[str, Any] = {"problems": notes} if notes else {}
    first = text.lstrip().split("\n", 1)[0].strip()
    return ParsedMarkdown(
        title=first if 0 < len(first) <= PLAIN_TITLE_MAX_CHARS else PurePosixPath(relpath).stem,
        description=None,
        body=text,
        frontmatter={},
        source_mode="edited",
        metadata=metadata,
    )


def parse(data: bytes, relpath: str, budget: Budget = DEFAULT) -> ParsedMarkdown:
    text, notes = decode(data)
    frontmatter, body, malformed = split_frontmatter(text)
    if malformed:
        notes.append("malformed_frontmatter")
    title = _text_value(frontmatter.get("title")) or first_h1(body) or PurePosixPath(relpath).stem
    mode = frontmatter.get("source_mode")
    recorded = frontmatter.get("body_sha256")
    if mode == "converted" and isinstance(recorded, str) and recorded != body_hash(body):
        mode = "edited"  # changed in an editor since conversion: never overwrite it
    body_line = text.count("\n", 0, len(text) - len(body)) + 1
    metadata: dict[str, Any] = {
        out: frontmatter[key]
        for key, out in METADATA_KEYS.items()
        if isinstance(frontmatter.get(key), str | int | float)
    }
    if notes:
        metadata["problems"] = notes
    if has_merge_markers(body):
        metadata["conflict"] = "merge_markers"
    tags = tags_of(frontmatter, body)
    links = tuple(links_of(body, relpath, body_line))
    degraded = [
        f"only the first {limit:,} {what} read"
        for what, found, limit in (("tags", tags, budget.tags), ("links", links, budget.links))
        if len(found) >= limit
    ]
    return ParsedMarkdown(
        title=title,
        description=_text_value(frontmatter.get("description")),
        body=body,
        frontmatter=frontmatter,
        source_mode=mode if mode in ("converted", "edited") else "edited",
        metadata=metadata,
        body_line=body_line,
        tags=tags,
        aliases=aliases_of(frontmatter),
        links=links,
        degraded=tuple(degraded),
    )
