"""The language server: `cofferctl lsp`. It holds one object per feature and dispatches
the protocol's methods to them:

    workspace.py    the open notes and the knowledge bases that hold them
    daemon.py       every call to cofferd, each bounded by a short timeout
    diagnostics.py  links inspected and published, on a thread of their own, debounced
    navigation.py   definition, hover, references
    completion.py   notes, headings, aliases, paths and tags as they are typed
    renames.py      a heading renamed, links rewritten before notes are renamed
    code_actions.py a note made for a broken link, a mention made a link
    symbols.py      a note's headings; a Coffer search as workspace symbols
    stdio.py        the transport, and the loop that reads messages on its own thread
    text.py         positions, URIs, what is being typed, links rewritten

Here: initialization, and the editor's text as it opens, changes and closes notes (the
reading thread records it and schedules diagnostics; nothing here waits on the daemon).
"""

from __future__ import annotations

import sys
from typing import Any

from coffer_kernel import __version__
from cofferctl.client import Client
from cofferctl.jsonrpc import RpcError
from cofferctl.lsp import text
from cofferctl.lsp.code_actions import CodeActions
from cofferctl.lsp.completion import Completion
from cofferctl.lsp.daemon import Daemon
from cofferctl.lsp.diagnostics import Diagnostics
from cofferctl.lsp.navigation import Navigation
from cofferctl.lsp.renames import Renames
from cofferctl.lsp.stdio import Handler, Transport, log, serve
from cofferctl.lsp.symbols import Symbols
from cofferctl.lsp.workspace import Workspace, checked_uri, param


class CofferLanguageServer:
    def __init__(self, client: Client, transport: Transport) -> None:
        self.transport = transport
        self.daemon = Daemon(client, transport)
        self.workspace = Workspace(self.daemon)
        self.diagnostics = Diagnostics(self.workspace, self.daemon, transport)
        self.navigation = Navigation(self.workspace, self.daemon)
        self.completion = Completion(self.workspace, self.daemon)
        self.renames = Renames(self.workspace, self.daemon)
        self.code_actions = CodeActions(self.workspace, self.daemon)
        self.symbols = Symbols(self.workspace, self.daemon)

    def requests(self) -> dict[str, Handler]:
        return {
            "textDocument/definition": self.navigation.definition,
            "textDocument/hover": self.navigation.hover,
            "textDocument/references": self.navigation.references,
            "textDocument/completion": self.completion.completion,
            "textDocument/documentSymbol": self.symbols.document_symbols,
            "workspace/symbol": self.symbols.workspace_symbols,
            "textDocument/codeAction": self.code_actions.code_actions,
            "workspace/willRenameFiles": self.renames.will_rename_files,
            "textDocument/rename": self.renames.rename,
        }

    def notifications(self) -> dict[str, Handler]:
        return {
            "initialized": self.initialized,
            "textDocument/didOpen": self.did_open,
            "textDocument/didChange": self.did_change,
            "textDocument/didClose": self.did_close,
        }

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        folders = params.get("workspaceFolders") or []
        uris = [f.get("uri") for f in folders if isinstance(f, dict)] or [params.get("rootUri")]
        self.workspace.roots = [p for u in uris if isinstance(u, str) and (p := text.path_of(u))]
        general = (params.get("capabilities") or {}).get("general") or {}
        offered = general.get("positionEncodings") or []
        encoding = text.UTF32 if text.UTF32 in offered else text.UTF16
        self.workspace.encoding = encoding
        return {
            "capabilities": {
                "positionEncoding": encoding,
                "textDocumentSync": {"openClose": True, "change": 1},  # whole text each time
                "definitionProvider": True,
                "codeActionProvider": {"codeActionKinds": ["quickfix"]},
                "renameProvider": True,
                "workspace": {
                    "fileOperations": {
                        "willRename": {
                            "filters": [{"pattern": {"glob": "**/*"}}]  # files and folders
                        }
                    }
                },
                "completionProvider": {"triggerCharacters": ["["]},
                "hoverProvider": True,
                "referencesProvider": True,
                "documentSymbolProvider": True,
                "workspaceSymbolProvider": True,
            },
            "serverInfo": {"name": "coffer", "version": __version__},
        }

    def initialized(self, params: dict[str, Any]) -> None:
        """Diagnostics follow the other notes too: the daemon's index is watched for
        writes (a note made, removed or renamed elsewhere), and the open notes are looked
        at again after each."""
        self.diagnostics.follow_the_daemon()

    def did_open(self, params: dict[str, Any]) -> None:
        document = param(params, "textDocument", dict)
        uri = self._uri(param(document, "uri", str))
        if uri is not None:
            note = self.workspace.open(uri, param(document, "text", str))
            self._warn(note.too_large)
            self.diagnostics.schedule(uri, delay=0)

    def did_change(self, params: dict[str, Any]) -> None:
        uri = self._uri(param(param(params, "textDocument", dict), "uri", str))
        changes = param(params, "contentChanges", list)
        if uri is None or not changes or not isinstance(changes[-1], dict):
            return
        # full sync: the last change is the whole text
        note = self.workspace.change(uri, param(changes[-1], "text", str))
        if note is not None:
            self.diagnostics.schedule(uri)

    def did_close(self, params: dict[str, Any]) -> None:
        uri = self._uri(param(param(params, "textDocument", dict), "uri", str))
        if uri is not None and self.workspace.close(uri) is not None:
            self.diagnostics.schedule(uri, delay=0)  # withdraws what was published

    def _uri(self, uri: str) -> str | None:
        try:
            return checked_uri(uri)
        except RpcError:  # a notification has no answer: said in the log
            log(f"a note's URI holds NUL (%00): not followed ({uri[:200]!r})")
            return None

    def _warn(self, why: str | None) -> None:
        if why is not None:
            log(why)


def run(client: Client) -> int:
    transport = Transport(sys.stdin.buffer, sys.stdout.buffer)
    server = CofferLanguageServer(client, transport)
    return serve(transport, server.requests(), server.notifications(), server.initialize)
