"""`cofferctl mcp`: the MCP server on stdio (`server`) that bridges agents to cofferd: the
protocol, the tools and their schemas, resources and prompts."""
