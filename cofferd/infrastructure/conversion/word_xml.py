"""A Word file's XML parts read by ElementTree into mammoth's own nodes.

mammoth (markitdown's Word converter) parses each part with minidom, then copies the DOM
into its nodes: for the 350 KB `styles.xml` a Word template carries, 140-230 ms of a
file's 240-300 ms (docs/benchmarks.md, issue 35 §6). ElementTree reads it with the same
expat parser several times faster and in less memory; the nodes are made here without
recursion, so no depth of nesting costs more than a loop. A part that declares a document
type (`<!DOCTYPE`, where entities are declared) is refused at that declaration: Word
never writes one (mammoth's minidom read it, expanding internal entities up to expat's
amplification limit and dropping external ones). A large part is kept by its SHA-256
(the last few, none past KEPT_MAX_BYTES): files made from one template carry the same
styles, read once. `use_in_mammoth` installs it in the converter's process.

The tree is mammoth's to the node (tests/unit/test_word_xml.py compares both on real files)
but for what Word does not write: the text on either side of a comment or processing
instruction is one node here (two in minidom's copy, which mammoth reads alike), and
CDATA text is kept (minidom's copy dropped it).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from typing import IO, Any
from xml.etree import ElementTree

KEPT_MIN_BYTES = 32 * 1024  # styles, their effects, a theme: what files of a template share
KEPT_MAX_BYTES = 1024 * 1024  # (Word's own are 50-400 KB): a tree holds ~10x its part
KEPT_PARTS = 4
DOCTYPE_REFUSED = "a Word part declares a document type (<!DOCTYPE>), which Word never writes"
_kept: OrderedDict[tuple[bytes, tuple[tuple[str, str], ...]], Any] = OrderedDict()


def parse_xml(
    fileobj: IO[bytes], namespace_mapping: Iterable[tuple[str, str]] | None = None
) -> Any:
    """mammoth.docx.xmlparser.parse_xml's answer: the root element as mammoth's XmlElement,
    a namespaced name written `prefix:local` where the mapping names its namespace, else
    `{uri}local`. A large part read before is answered from memory (mammoth only reads a
    tree, and folds its alternate content the same way again)."""
    mapping = tuple(namespace_mapping or ())
    data = fileobj.read()
    if not KEPT_MIN_BYTES <= len(data) <= KEPT_MAX_BYTES:
        return _parse(data, mapping)
    key = (hashlib.sha256(data).digest(), mapping)
    if key in _kept:
        _kept.move_to_end(key)
    else:
        _kept[key] = _parse(data, mapping)
        if len(_kept) > KEPT_PARTS:
            _kept.popitem(last=False)
    return _kept[key]


def _parse(data: bytes, mapping: tuple[tuple[str, str], ...]) -> Any:
    from mammoth.docx.xmlparser import XmlElement, XmlText

    prefixes = {uri: prefix for prefix, uri in mapping}
    names: dict[str, str] = {}

    def name(tag: str) -> str:
        found = names.get(tag)
        if found is None:
            uri, _, local = tag[1:].partition("}") if tag.startswith("{") else ("", "", tag)
            prefix = prefixes.get(uri) if uri else None
            found = names[tag] = f"{prefix}:{local}" if prefix else tag
        return found

    class Nodes:
        """expat's events made into mammoth's nodes as they come: one pass, no tree of
        ElementTree's own to walk again, no recursion."""

        def __init__(self) -> None:
            self.open: list[tuple[str, dict[str, str], list[Any]]] = []
            self.text: list[str] = []
            self.root: Any = None

        def start(self, tag: str, attrib: dict[str, str]) -> None:
            self.flush()
            self.open.append((name(tag), {name(k): v for k, v in attrib.items()}, []))

        def doctype(self, name: str, pubid: str | None, system: str | None) -> None:
            raise ValueError(DOCTYPE_REFUSED)

        def data(self, text: str) -> None:
            self.text.append(text)

        def end(self, tag: str) -> None:
            self.flush()
            element = XmlElement(*self.open.pop())
            if self.open:
                self.open[-1][2].append(element)
            else:
                self.root = element

        def flush(self) -> None:
            if self.text:
                if self.open:  # (text outside the root is no node, as in minidom)
                    self.open[-1][2].append(XmlText("".join(self.text)))
                self.text = []

        def close(self) -> Any:
            return self.root

    parser = ElementTree.XMLParser(target=Nodes())
    parser.feed(data)
    return parser.close()


def use_in_mammoth() -> None:
    """mammoth reads every part of a Word file through parse_xml above."""
    from mammoth.docx import office_xml

    office_xml.parse_xml = parse_xml
