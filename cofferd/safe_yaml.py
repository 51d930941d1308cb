"""The one way Coffer reads YAML someone else wrote: a KB folder's `kb.yaml`, this machine's
settings of a KB, a document's frontmatter.

YAML's aliases let 500 bytes stand for billions of values (`&a [x,x,...]`, `&b [*a,*a,...]`,
...): PyYAML shares them while reading, but anything that walks the value afterwards (a
validator, a JSON encoder, an error message) pays for every one. So the document is first
composed (in time linear in its text), then measured as it would be once every alias is
expanded: a value over `max_nodes` values or `max_depth` levels deep, or one that holds
itself, is refused with its reason before any Python value is built from it.
"""

from __future__ import annotations

from typing import Any

import yaml

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlTooLarge(ValueError):
    """The YAML is well formed but, expanded, beyond its budget; the message says which."""


def load(text: str, *, max_nodes: int, max_depth: int) -> Any:
    """The value of a one-document YAML text, as yaml.safe_load gives it, or YamlTooLarge
    (a yaml.YAMLError when it does not parse)."""
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise YamlTooLarge(f"it is nested more than {max_depth} levels deep") from None
        if node is None:
            return None
        _measure(node, max_nodes, max_depth)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _measure(root: yaml.Node, max_nodes: int, max_depth: int) -> None:
    """Refuses the node if, with every alias expanded, it holds more than max_nodes values
    or more than max_depth levels, or holds itself; each node shared by aliases is measured
    once, so this takes time linear in the text."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth) expanded
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes and not children_done:
            continue
        children = _children(node)
        if not children_done:
            if key in open_nodes:
                raise YamlTooLarge("it holds itself (a recursive alias)")
            open_nodes.add(key)
            stack.append((node, True))
            for child in children:
                if id(child) in open_nodes:
                    raise YamlTooLarge("it holds itself (a recursive alias)")
                if id(child) not in sizes:
                    stack.append((child, False))
            continue
        open_nodes.discard(key)
        values, depth = 1, 1
        for child in children:
            child_values, child_depth = sizes[id(child)]
            values += child_values
            depth = max(depth, child_depth + 1)
        if values > max_nodes:
            raise YamlTooLarge(
                f"it holds over {max_nodes:,} values once its aliases (&name, *name) are expanded"
            )
        if depth > max_depth:
            raise YamlTooLarge(f"it is nested more than {max_depth} levels deep")
        sizes[key] = (values, depth)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
