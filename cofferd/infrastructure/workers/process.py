"""One worker process and its pipes: started (`python -m <entry point> *args`, at a
niceness, with an environment) until it says READY, sent requests and read replies as
frames (workers.frames), stopped or killed. The pool (workers.pool) decides when."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from cofferd.domain.errors import EngineUnavailable
from cofferd.infrastructure.workers import frames

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
LARGE_REPLY = 1024 * 1024  # replies larger than this are unpickled off the serving loop
READ_BLOCK = 256 * 1024
READY = frames.READY


class WorkerGone(Exception):
    pass


class Worker:
    """One worker process and its pipes."""

    def __init__(
        self, transport: asyncio.SubprocessTransport, proc: asyncio.subprocess.Process
    ) -> None:
        self.transport = transport  # closed with the process, so no pipe outlives it
        self.proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        self.stdin = proc.stdin
        self.stdout = proc.stdout
        self._buffer = bytearray()  # what has arrived of the next replies
        # a frame that could not be read after good ones of the same read: raised at the
        # next receive, so that the replies before it keep their items
        self._broken: frames.BrokenStream | None = None

    @classmethod
    async def start(
        cls,
        module: str,
        nice: int = 0,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> Worker:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: asyncio.subprocess.SubprocessStreamProtocol(limit=2**16, loop=loop),
            sys.executable, "-m", module, *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None,
            env=env,
        )  # fmt: skip
        worker = cls(transport, asyncio.subprocess.Process(transport, protocol, loop))
        if nice:
            with contextlib.suppress(OSError, AttributeError):  # a lower priority: always allowed
                os.setpriority(os.PRIO_PROCESS, worker.pid, nice)
        try:
            ready = (await worker.receive(START_TIMEOUT_S))[0]
        except BaseException as exc:  # the pool closing, too: never leave a process behind
            await worker.kill()
            if isinstance(exc, TimeoutError | WorkerGone | frames.BrokenStream):
                raise EngineUnavailable(
                    f"a worker process ({module}) could not start: {type(exc).__name__}",
                    engine="workers",
                ) from None
            raise
        if ready != READY:
            await worker.kill()
            raise EngineUnavailable(f"a worker process ({module}) answered {ready!r}")
        return worker

    def lower(self, nice: int) -> None:
        """Lower the priority of every thread of the process to `nice` (each thread has
        its own on Linux; threads it starts later take their creator's)."""
        try:
            threads = [int(tid) for tid in os.listdir(f"/proc/{self.pid}/task")]
        except (OSError, ValueError):  # no /proc (macOS): the process's own
            threads = [self.pid]
        for tid in threads:
            with contextlib.suppress(OSError, AttributeError):  # gone meanwhile
                os.setpriority(os.PRIO_PROCESS, tid, nice)

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def send(self, message: Any) -> None:
        try:
            self.stdin.write(frames.encode(message))
            await self.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise WorkerGone from exc

    async def receive(self, timeout: float) -> list[Any]:
        """The replies that have arrived, at least one, within `timeout`. Replies are read
        in bulk (a unit's small ones arrive together): one wake of the loop for many."""
        if self._broken is not None:
            broken, self._broken = self._broken, None
            raise broken
        try:
            async with asyncio.timeout(timeout):
                while not (complete := self._complete()):
                    block = await self.stdout.read(READ_BLOCK)
                    if not block:
                        raise WorkerGone
                    self._buffer += block
        except ConnectionResetError as exc:
            raise WorkerGone from exc
        if sum(map(len, complete)) > LARGE_REPLY:
            return await asyncio.to_thread(self._decoded, complete)
        return self._decoded(complete)

    def _decoded(self, complete: list[bytes]) -> list[Any]:
        """The replies of these frames, up to the first that cannot be read: that one is
        raised now when it is the first, else at the next receive."""
        replies: list[Any] = []
        for frame in complete:
            try:
                replies.append(frames.decode(frame))
            except frames.BrokenStream as exc:
                if not replies:
                    raise
                self._broken = exc
                break
        return replies

    def _complete(self) -> list[bytes]:
        """The whole frames in the buffer, taken out of it."""
        found: list[bytes] = []
        at = 0
        buffer = self._buffer
        while len(buffer) - at >= frames.HEADER.size:
            try:
                length = frames.frame_length(bytes(buffer[at : at + frames.HEADER.size]))
            except frames.BrokenStream:
                if not found:
                    raise
                break  # the frames before it are replies; it is raised at the next receive
            end = at + frames.HEADER.size + length
            if len(buffer) < end:
                break
            found.append(bytes(buffer[at + frames.HEADER.size : end]))
            at = end
        if at:
            del buffer[:at]
        return found

    async def stop(self) -> None:
        """Let it finish and exit (end of its input), or kill it."""
        with contextlib.suppress(OSError):
            self.stdin.close()
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await self.proc.wait()
        except TimeoutError:
            await self.kill()
        finally:  # cancelled too (the pool closing): closing kills a process still running
            self.transport.close()

    async def kill(self) -> int | None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        try:  # a process stuck in the kernel (a dead network mount) dies when it returns
            async with asyncio.timeout(STOP_TIMEOUT_S):
                return await self.proc.wait()
        except TimeoutError:
            log.warning("worker %d does not exit; left to the kernel", self.pid)
            return None
        finally:  # its pipes closed now, not by the garbage collector after the loop ends
            self.transport.close()
