"""The daemon as the language server asks it: every call bounded by `TIMEOUT_S`, so a
stopped or busy cofferd never freezes the editor. A call that finds nothing answering, or
no answer in time, gives None (the feature then answers the editor with an empty result)
and is said once in the editor; after a call that timed out, calls give None at once until
the next probe (the refresh of `diagnostics.py`, every half second) is answered.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from cofferctl import api
from cofferctl.client import ApiError, Client, DaemonUnreachable, ProtocolError
from cofferctl.lsp.stdio import Transport, log

TIMEOUT_S = float(os.environ.get("COFFER_LSP_TIMEOUT_S", "2"))  # each call to cofferd, at most

ERROR = 1  # window/showMessage type


class Daemon:
    """Bounded calls to cofferd, and the one place that says when it cannot answer."""

    def __init__(self, client: Client, transport: Transport, timeout: float = TIMEOUT_S) -> None:
        self.client = Client(client.socket_path, actor=client.actor, timeout=timeout)
        self.transport = transport
        self._stalled = False  # the last call timed out: none is sent until a probe answers
        self._said: set[str] = set()
        self._lock = threading.Lock()

    @property
    def stalled(self) -> bool:
        return self._stalled

    def ask(self, call: Callable[[Client], Any], probe: bool = False) -> Any:
        """What the daemon answers to `call(client)`; None (logged, said once) when it
        cannot answer in time. A `probe` is sent even while the daemon is stalled."""
        if self._stalled and not probe:
            return None
        started = time.monotonic()
        try:
            answer = call(self.client)
        except DaemonUnreachable as exc:
            self._say("unreachable", f"cofferd is not reachable: {exc}")
        except ProtocolError as exc:
            if time.monotonic() - started >= self.client.timeout * 0.9:
                self._stalled = True
                self._say(
                    "stalled",
                    f"cofferd did not answer within {self.client.timeout:g} s: Coffer's "
                    "answers are left out until it does",
                )
            else:
                log(f"cofferd's answer broke: {exc}")
        except ApiError as exc:
            log(f"cofferd refused: {exc}")
        else:
            if self._stalled:
                log("cofferd answers again")
            self._stalled = False
            return answer
        return None

    def _say(self, what: str, message: str) -> None:
        log(message)
        with self._lock:
            if what in self._said:
                return
            self._said.add(what)
        self.transport.notify("window/showMessage", {"type": ERROR, "message": message})

    def named(self, kb: str, typed: str) -> dict[str, Any]:
        """The daemon's notes for what was typed, best first, and the KB's link style."""
        found = self.ask(lambda c: api.note_names(c, kb, typed))
        return found if isinstance(found, dict) else {"names": [], "link_style": {}}

    def names(self, kb: str, typed: str) -> list[dict[str, Any]]:
        names: list[dict[str, Any]] = self.named(kb, typed)["names"]
        return names

    def inspect(self, kb: str, relpath: str, body: str) -> dict[str, Any] | None:
        """The links of `body` (a note at `relpath`, as unsaved) placed and resolved."""
        sent = {"relative_path": relpath, "text": body}
        found = self.ask(lambda c: api.inspect(c, kb, sent))
        return found if isinstance(found, dict) else None
