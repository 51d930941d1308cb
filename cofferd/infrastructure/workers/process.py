"""One worker process and its pipes: started (`python -s -P -m <entry point> *args`, at a
niceness, with an environment, in a folder of its own) until it says READY, sent requests
and read replies as frames (workers.frames), stopped or killed. The pool (workers.pool)
decides when.

A worker runs the code the daemon runs, nothing else: `-P` puts no working directory on
its path (a `cofferd/` folder where the daemon was started is never imported), `-s` no
user site, and it starts in `cwd` (not the daemon's working directory). PYTHONPATH is
passed on only when the daemon was started with one (a checkout run in place, the tests:
it is how the daemon found its own code), each entry made absolute and an empty one (the
working directory) dropped. (`-I` would drop PYTHONPATH too, and with it that checkout.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cofferd.domain.errors import EngineUnavailable
from cofferd.infrastructure import child_processes
from cofferd.infrastructure.workers import frames

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0  # a start not READY by then is killed (and tried again by the pool)
STOP_TIMEOUT_S = 5.0
# replies this large are unpickled off the serving loop (a smaller one makes a bounded
# number of objects: frames.COUNTED_FROM)
LARGE_REPLY = frames.COUNTED_FROM
READ_BLOCK = 256 * 1024
READY = frames.READY
# how a process that died by itself ends: an exit status, or a signal of its own making
# (a crash); any other signal (SIGKILL, SIGTERM: the OOM killer, a kill by hand) came
# from outside, for the pool's own kills are known to it
CRASH_SIGNALS = frozenset(
    getattr(signal, name, 0)
    for name in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL", "SIGSYS")
) - {0}


class WorkerGone(Exception):
    pass


@dataclass(frozen=True)
class WorkerEntry:
    """What a pool starts: its entry point (`module`, run with `python -m`) and what its
    workers may answer (`replies`), both given by the pool's owner."""

    module: str
    replies: frames.Replies = field(default_factory=frames.Replies)


def crashed(returncode: int | None) -> bool:
    """Whether a process that ended so ended by its own doing (see CRASH_SIGNALS)."""
    return returncode is not None and (returncode > 0 or -returncode in CRASH_SIGNALS)


def worker_environment(env: Mapping[str, str] | None) -> dict[str, str]:
    """The environment a worker starts with: `env` (the daemon's when None), its
    PYTHONPATH's entries made absolute, an empty one dropped."""
    found = dict(os.environ if env is None else env)
    path = found.pop("PYTHONPATH", None)
    if path is not None:
        entries = [os.path.abspath(entry) for entry in path.split(os.pathsep) if entry]
        if entries:
            found["PYTHONPATH"] = os.pathsep.join(entries)
    return found


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
        self.replies = frames.Replies()
        self.served = 0  # replies it has sent (0: fresh, nothing done in it yet)
        self._watch: asyncio.Future[int] | None = None

    @classmethod
    async def start(
        cls,
        entry: WorkerEntry,
        nice: int = 0,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str = os.sep,
    ) -> Worker:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: asyncio.subprocess.SubprocessStreamProtocol(limit=2**16, loop=loop),
            sys.executable, "-s", "-P", "-m", entry.module, *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None,
            env=worker_environment(env), cwd=cwd,
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
                    f"a worker process ({entry.module}) could not start: {type(exc).__name__}",
                    engine="workers",
                ) from None
            raise
        if ready != READY:
            await worker.kill()
            raise EngineUnavailable(f"a worker process ({entry.module}) answered {ready!r}")
        worker.replies = entry.replies
        worker.served = 0
        return worker

    def exited(self) -> bool:
        """Whether the process has ended (reaped, or its replies' pipe closed)."""
        return self.proc.returncode is not None or self.stdout.at_eof()

    def when_exited(self, callback: Callable[[], object]) -> None:
        """Call `callback` once the process has ended, however it ends (its pool's slot,
        waiting for work, hears of a death at once, not when work comes)."""
        self._watch = asyncio.ensure_future(self.proc.wait())
        self._watch.add_done_callback(lambda _: callback())

    def stopped(self) -> bool:
        """Whether the process is stopped (SIGSTOP, a debugger): frozen by no doing of its
        own, so over its time through no fault of its item's (False where /proc is not)."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_bytes()
        except OSError:
            return False
        return stat.rsplit(b")", 1)[-1].split()[:1] in ([b"T"], [b"t"])

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
        if sum(map(len, complete)) >= LARGE_REPLY:
            replies = await asyncio.to_thread(self._decoded, complete)
        else:
            replies = self._decoded(complete)
        self.served += len(replies)
        return replies

    def _decoded(self, complete: list[bytes]) -> list[Any]:
        """The replies of these frames, up to the first that cannot be read: that one is
        raised now when it is the first, else at the next receive."""
        replies: list[Any] = []
        for frame in complete:
            try:
                replies.append(frames.decode(frame, self.replies))
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
                header = bytes(buffer[at : at + frames.HEADER.size])
                length = frames.frame_length(header, self.replies.max_bytes)
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

    def _kill_now(self) -> None:
        child_processes.kill(self.proc)

    async def kill(self) -> int | None:
        self._kill_now()
        try:  # a process stuck in the kernel (a dead network mount) dies when it returns
            async with asyncio.timeout(STOP_TIMEOUT_S):
                return await self.proc.wait()
        except TimeoutError:
            log.warning("worker %d does not exit; left to the kernel", self.pid)
            return None
        finally:  # its pipes closed now, not by the garbage collector after the loop ends
            self.transport.close()
