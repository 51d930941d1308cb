"""JSON-RPC 2.0 messages, as both stdio servers of cofferctl read and write them (MCP: one
message a line; LSP: each after a `Content-Length` header): parsing bounded in depth and
refusing what is not Unicode, answers always valid UTF-8, and errors by code."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a message may have (a tool call needs 4)."""
SHOWN = 200  # characters of a client's value quoted back in an error message
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class Refused(RpcError):
    """A message that is neither a request we serve nor a notification: answered with the
    id it gave when that is usable, else null."""

    def __init__(self, request_id: Any, code: int, message: str) -> None:
        super().__init__(code, message)
        self.request_id = request_id


def shown(value: Any) -> str:
    """A client's value, quoted back in an error message at a bounded length."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def decode(data: bytes, batches: str) -> dict[str, Any]:
    """One JSON-RPC 2.0 message (a request, a notification or an answer), or Refused;
    `batches` says why a batch (a JSON array) is refused."""
    try:
        text = data.decode()
        message = json.loads(text, parse_constant=_not_json)
    except UnicodeDecodeError as exc:
        raise Refused(None, PARSE_ERROR, f"not UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise Refused(None, PARSE_ERROR, f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise Refused(None, PARSE_ERROR, f"not JSON: {exc}") from None
    if isinstance(message, list):
        raise Refused(None, INVALID_REQUEST, batches)
    if not isinstance(message, dict):
        raise Refused(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message (an object)")
    request_id = message.get("id")
    answer_to = request_id if usable_id(request_id) else None
    problem = _shape_problem(message, strings=_SURROGATE_ESCAPE.search(text) is not None)
    if problem:
        raise Refused(answer_to, INVALID_REQUEST, problem)
    if message.get("jsonrpc") != "2.0":
        message_ = 'not a JSON-RPC 2.0 message: `jsonrpc` must be "2.0"'
        raise Refused(answer_to, INVALID_REQUEST, message_)
    return message


def usable_id(value: Any) -> bool:
    """A request id (a string or an integer) that can be sent back as it came."""
    if isinstance(value, str):
        return not _has_surrogate(value)
    return isinstance(value, int) and not isinstance(value, bool)


def encode(message: dict[str, Any], log: Any = None) -> bytes:
    """A message as UTF-8 JSON; a lone surrogate in what we answer (a file name that is not
    UTF-8 reaches Python as one) becomes U+FFFD, since clients refuse its `\\ud800` escape.
    A message that is not JSON (a bug of ours) becomes an error answer, logged by `log`."""
    try:
        text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except Exception as exc:  # noqa: BLE001 - a bug of ours: the client gets an error instead
        (log or _stderr)(f"an answer is not JSON: {exc!r}")
        failed = error(message.get("id"), INTERNAL_ERROR, f"the answer is not JSON: {exc}")
        text = json.dumps(failed, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _shape_problem(message: Any, *, strings: bool) -> str | None:
    """Why a parsed message cannot be served, found without recursion: too deep, or (when
    `strings`: the text has a surrogate escape) a lone surrogate, which is not Unicode, so
    no file, database or client takes it."""
    stack: list[tuple[Any, int]] = [(message, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if strings and _has_surrogate(value):
                return "a string holds a lone surrogate (\\ud800-\\udfff): not valid Unicode"
        elif isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            if isinstance(value, dict):
                if strings:
                    stack.extend((key, depth) for key in value)
                value = value.values()
            stack.extend((item, depth + 1) for item in value)
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False
