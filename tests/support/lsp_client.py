"""Driving `cofferctl lsp` with pytest-lsp's client (pygls and lsprotocol's types): a note
opened and the diagnostics published for it, completion at a position."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient


async def opened(client: LanguageClient, path: Path, text: str, version: int = 1) -> list[Any]:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "markdown", version, text))
    )
    return await diagnostics_of(client, uri)


async def diagnostics_of(client: LanguageClient, uri: str) -> list[Any]:
    await asyncio.wait_for(client.wait_for_notification("textDocument/publishDiagnostics"), 10)
    return list(client.diagnostics[uri])


async def complete_at(client: LanguageClient, path: Path, line_no: int, character: int) -> Any:
    params = types.CompletionParams(
        types.TextDocumentIdentifier(path.as_uri()), types.Position(line_no, character)
    )
    return await asyncio.wait_for(client.text_document_completion_async(params), 10)
