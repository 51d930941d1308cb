"""Every MCP tool `cofferctl mcp` offers, readers first."""

from __future__ import annotations

from cofferctl.mcp.read_tools import READ
from cofferctl.mcp.tool_model import Tool
from cofferctl.mcp.write_tools import WRITE

TOOLS: dict[str, Tool] = {**READ.tools, **WRITE.tools}
