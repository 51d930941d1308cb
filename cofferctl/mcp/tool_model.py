"""What an MCP tool is: its strict input schema, the output schema its structured content
matches, the annotations that say what it may do, and the calls to cofferd behind it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cofferctl.client import Client
from cofferctl.mcp.schema import JSON

Run = Callable[[Client, dict[str, Any]], JSON]


@dataclass(frozen=True)
class Hints:
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool
    """here: the tool reads files on this machine outside the knowledge bases"""


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: JSON
    output_schema: JSON
    hints: Hints
    run: Run

    def listing(self) -> JSON:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.hints.read_only,
                "destructiveHint": self.hints.destructive,
                "idempotentHint": self.hints.idempotent,
                "openWorldHint": self.hints.open_world,
            },
        }


@dataclass
class Catalog:
    """A group of tools, filled by its `tool` decorator."""

    tools: dict[str, Tool] = field(default_factory=dict)

    def tool(
        self, name: str, title: str, description: str, inputs: JSON, output: JSON, hints: Hints
    ) -> Callable[[Run], Run]:
        def register(run: Run) -> Run:
            self.tools[name] = Tool(name, title, description, inputs, output, hints, run)
            return run

        return register
