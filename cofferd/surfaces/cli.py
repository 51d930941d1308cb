"""cofferd: keeps the search index of every Coffer knowledge base current.

Runs in the foreground (service managers and `make run` start it that way) and serves
the API on a Unix socket. Settings come from flags, else from the environment:

* ``COFFER_HOME``: data home (default: the platform's user data directory).
* ``COFFER_SOCKET``: socket path (default: ``cofferd.sock`` in the user runtime directory).
* ``COFFER_LOG_LEVEL``: DEBUG, INFO (default), WARNING, ERROR.
* ``COFFER_RECONCILE_INTERVAL``: seconds between full safety reconciles (default 600).
* ``COFFER_AGENT_ROOTS``: folders (separated by ``:``) AI agents may add files from by
  path; none by default.
* ``COFFER_ACTIVITY_KEEP``: how many of the newest audit events, and of the newest MCP
  tool calls, are kept (default 100000; older ones are trimmed as new ones arrive).
* ``COFFER_TRASH_RETENTION_DAYS``: days a deleted document stays in its knowledge base's
  trash before it is purged (default 30; 0 purges at the next look).
* ``COFFER_WORKERS``: worker processes that prepare documents for the index (default: one
  per core, at a lower CPU priority; one more, kept for saves, serves interactive work only).
* ``COFFER_WEB_PORT``: keep the web page (``cofferctl web``) on from the start, on this
  port of 127.0.0.1; off by default.
* ``COFFER_PREPARE_TIMEOUT``: seconds one document may take to prepare (default 30); a
  worker over it is replaced and the document skipped with its reason.
* ``NOTIFY_SOCKET``, ``LISTEN_FDS``/``LISTEN_PID``: set by systemd for readiness and
  socket activation.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from coffer_kernel import __version__
from coffer_kernel.locations import Locations
from cofferd.application.documents.trash import RETENTION_DAYS
from cofferd.domain.budgets import DEFAULT as DEFAULT_BUDGET
from cofferd.surfaces.core import Tuning, default_workers
from cofferd.surfaces.daemon import AlreadyRunning, run
from cofferd.surfaces.http.unix_socket import SocketInUse, UnsafeSocketFolder
from cofferd.surfaces.progress_bar import BarAwareHandler

# syslog priorities: under systemd, journald reads a `<N>` prefix as the line's level.
_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3}


LOG_MESSAGE_MAX = 2000  # a message is cut here (a 5,000-character path stays readable)


class CappedFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:
        message = record.message
        if len(message) > LOG_MESSAGE_MAX:
            record.message = f"{message[:LOG_MESSAGE_MAX]}… ({len(message):,} characters)"
        return super().formatMessage(record)


class JournalFormatter(CappedFormatter):
    def format(self, record: logging.LogRecord) -> str:
        priority = _PRIORITY.get(record.levelno, 2 if record.levelno > logging.ERROR else 6)
        return f"<{priority}>{super().format(record)}"


def setup_logging(level: str) -> None:
    """Coffer's own loggers at `level`. Libraries log at INFO what is no event here
    (watchfiles every save, httpx every request): they are heard from at WARNING, and at
    every level only when the daemon runs at DEBUG."""
    handler = BarAwareHandler(sys.stderr)
    if os.environ.get("JOURNAL_STREAM"):  # stderr goes to the journal, which adds the time
        handler.setFormatter(JournalFormatter("%(name)s: %(message)s"))
    else:
        handler.setFormatter(CappedFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    own = logging.getLevelName(level.upper())
    libraries = own if own == logging.DEBUG else max(own, logging.WARNING)
    logging.basicConfig(level=libraries, handlers=[handler], force=True)
    logging.getLogger("cofferd").setLevel(own)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cofferd",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"cofferd {__version__}")
    p.add_argument("--home", help="data home (env COFFER_HOME)")
    p.add_argument("--socket", help="Unix socket path (env COFFER_SOCKET)")
    p.add_argument(
        "--log-level",
        default=os.environ.get("COFFER_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "debug", "info", "warning", "error"],
        help="log level (env COFFER_LOG_LEVEL; default INFO)",
    )
    p.add_argument(
        "--reconcile-interval",
        type=float,
        default=float(os.environ.get("COFFER_RECONCILE_INTERVAL", "600")),
        help="seconds between full safety reconciles (env COFFER_RECONCILE_INTERVAL)",
    )
    p.add_argument(
        "--agent-root",
        action="append",
        default=[r for r in os.environ.get("COFFER_AGENT_ROOTS", "").split(os.pathsep) if r],
        metavar="DIR",
        help="a folder AI agents may add files from (repeatable; env COFFER_AGENT_ROOTS)",
    )
    p.add_argument(
        "--activity-keep",
        type=int,
        default=int(os.environ.get("COFFER_ACTIVITY_KEEP", "100000")),
        help="newest audit events and MCP calls kept (env COFFER_ACTIVITY_KEEP)",
    )
    p.add_argument(
        "--trash-retention-days",
        type=int,
        default=int(os.environ.get("COFFER_TRASH_RETENTION_DAYS", str(RETENTION_DAYS))),
        metavar="DAYS",
        help="days deleted documents stay restorable (env COFFER_TRASH_RETENTION_DAYS; "
        f"default {RETENTION_DAYS})",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("COFFER_WORKERS") or default_workers()),
        metavar="N",
        help="worker processes preparing documents (env COFFER_WORKERS; default: one per core)",
    )
    p.add_argument(
        "--prepare-timeout",
        type=float,
        default=float(os.environ.get("COFFER_PREPARE_TIMEOUT") or DEFAULT_BUDGET.prepare_s),
        metavar="SECONDS",
        help="time one document may take to prepare (env COFFER_PREPARE_TIMEOUT; "
        f"default {DEFAULT_BUDGET.prepare_s:g})",
    )
    p.add_argument(
        "--web-port",
        type=int,
        default=int(os.environ["COFFER_WEB_PORT"]) if os.environ.get("COFFER_WEB_PORT") else None,
        metavar="PORT",
        help="keep the web page on from the start, on this port of 127.0.0.1 "
        "(env COFFER_WEB_PORT; default: off until `cofferctl web`)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    os.umask(0o077)  # the index and everything else in the data home: this user's only
    setup_logging(args.log_level)
    locations = Locations.from_env()
    if args.home:
        locations = locations.replace(home=Path(args.home).expanduser().absolute())
    if args.socket:
        locations = locations.replace(socket=Path(args.socket).expanduser().absolute())
    if args.reconcile_interval <= 0 or args.activity_keep < 1:
        print("cofferd: --reconcile-interval and --activity-keep must be positive", file=sys.stderr)
        return 2
    if args.trash_retention_days < 0:
        print("cofferd: --trash-retention-days must not be negative", file=sys.stderr)
        return 2
    if args.workers < 1 or args.prepare_timeout <= 0:
        print("cofferd: --workers and --prepare-timeout must be positive", file=sys.stderr)
        return 2
    if args.web_port is not None and not 1 <= args.web_port <= 65535:
        print("cofferd: --web-port must be between 1 and 65535", file=sys.stderr)
        return 2
    tuning = Tuning(
        reconcile_interval_s=args.reconcile_interval,
        activity_keep=args.activity_keep,
        agent_roots=tuple(Path(r).expanduser().absolute() for r in args.agent_root),
        trash_retention_days=args.trash_retention_days,
        workers=args.workers,
        prepare_timeout_s=args.prepare_timeout,
        web_port=args.web_port,
    )
    try:
        asyncio.run(run(locations, tuning))
    except (AlreadyRunning, SocketInUse, UnsafeSocketFolder) as exc:
        print(f"cofferd: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
