"""A real HTTP server on loopback that speaks the OpenAI embeddings API.

Its vectors are deterministic: each word adds to a few hashed dimensions, so texts that
share words are near each other. `mode` makes it misbehave the ways providers do."""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from aiohttp import web

Mode = Literal["ok", "down", "wrong_dim", "nan", "zeros", "slow"]
WORD = re.compile(r"\w+")


def embed_text(text: str, dims: int) -> list[float]:
    vector = [0.0] * dims
    for word in WORD.findall(text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        for i in range(3):
            vector[digest[i] % dims] += 1.0 if digest[i + 3] % 2 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector] if any(vector) else [1.0 / math.sqrt(dims)] * dims


class FakeEmbeddings:
    def __init__(self, dims: int = 64) -> None:
        self.dims = dims
        self.mode: Mode = "ok"
        self.requests = 0
        self.slow_after: int | None = None  # requests past this many are "slow"
        self.inputs: list[str] = []  # every text it was asked to embed
        self.keys: set[str] = set()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        self.keys.add(request.headers.get("Authorization", ""))
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if self.mode == "down":
            return web.json_response({"error": {"message": "overloaded"}}, status=503)
        if self.mode == "slow" or (self.slow_after is not None and self.requests > self.slow_after):
            await asyncio.sleep(5)
        self.inputs += texts
        dims = self.dims + 1 if self.mode == "wrong_dim" else self.dims
        data: list[dict[str, Any]] = []
        for i, text in enumerate(texts):
            vector = embed_text(text, dims)
            if self.mode == "nan":
                vector[0] = math.nan
            if self.mode == "zeros":
                vector = [0.0] * dims
            data.append({"object": "embedding", "index": i, "embedding": vector})
        payload = {"object": "list", "data": data, "model": body["model"],
                   "usage": {"prompt_tokens": 1, "total_tokens": 1}}  # fmt: skip
        # NaN is not JSON; providers that emit it send the bare token, as json.dumps does
        return web.Response(text=__import__("json").dumps(payload), content_type="application/json")

    async def start(self) -> FakeEmbeddings:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def config(self, **extra: Any) -> dict[str, Any]:
        """KB settings that use this server through the real openai client."""
        return {
            "enabled_modes": ["keyword", "grep", "vector"],
            "embedding": {
                "provider": "openai",
                "model": "fake-embedding",
                "base_url": self.url,
                "credential_ref": "env:COFFER_TEST_EMBED_KEY",
                "dimensions": self.dims,
                "timeout_s": 2,
                **extra,
            },
        }


@contextmanager
def serving(dims: int = 64) -> Iterator[FakeEmbeddings]:
    """The server on a loop of its own thread, for callers that wait on a daemon meanwhile."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(FakeEmbeddings(dims).start(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
