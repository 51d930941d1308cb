"""Every MCP tool `cofferctl mcp` offers, readers first."""

from __future__ import annotations

from cofferctl.mcp_read_tools import READ
from cofferctl.mcp_tool import Tool
from cofferctl.mcp_write_tools import WRITE

TOOLS: dict[str, Tool] = {**READ.tools, **WRITE.tools}
