"""cofferctl: control cofferd, the Coffer daemon, over its Unix socket.

Exit codes: 0 success, 1 the daemon reported an error (or the command failed: an editor,
grep finding nothing), 2 usage error, 3 the daemon is not reachable. `--json` prints the
API's JSON body unchanged. Colour only on a terminal and never when NO_COLOR is set.
Control characters in names and text are shown escaped (cofferctl.output).
Environment: COFFER_SOCKET (socket path).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from cofferctl.client import ApiError, Client, DaemonUnreachable
from cofferctl.command import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    RESULT_FAILED,
    Command,
    CommandFailed,
    UsageError,
)
from cofferctl.commands import (
    adding,
    documents,
    indexing,
    kbs,
    searching,
    services,
    status,
    trash,
)
from cofferctl.output import Output, complain
from cofferctl.parser_help import COMPLETE_DIR, COMPLETE_FILE, COMPLETE_KB, Parser, completes
from cofferd import __version__
from cofferd.locations import socket_from_env

EXIT_INTERRUPTED = 130  # as shells report a Ctrl-C
START_HINT = "start it with `cofferd` (or `make run` in a checkout)"
KB_HELP = "the knowledge base"
DOC_HELP = "the document: its id, an id prefix, or its path in the KB"


def build_parser() -> argparse.ArgumentParser:
    # Accepted before or after the command: separate dests, so a subcommand's defaults
    # cannot reset what was given before it (merged in main()).
    def options(prefix: str) -> argparse.ArgumentParser:
        parser = Parser(add_help=False)
        parser.add_argument(
            "--json", action="store_true", dest=f"{prefix}json", help="print the API's JSON"
        )
        completes(
            parser.add_argument(
                "--socket",
                dest=f"{prefix}socket",
                metavar="PATH",
                help="daemon socket (env COFFER_SOCKET)",
            ),
            COMPLETE_FILE,
        )
        return parser

    common = options("sub_")

    p = Parser(
        prog="cofferctl",
        description="Control cofferd, the Coffer daemon.",
        epilog="Exit codes: 0 ok, 1 error from the daemon, 2 usage, 3 daemon not reachable.",
        parents=[options("")],
    )
    p.add_argument(
        "--version",
        action="version",
        version=f"cofferctl {__version__}",
        help="print cofferctl's version",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, fn: Command, help: str, parent: Any = sub) -> argparse.ArgumentParser:
        sp: argparse.ArgumentParser = parent.add_parser(
            name, help=help, description=help, parents=[common]
        )
        sp.set_defaults(fn=fn)
        return sp

    def kb_arg(sp: argparse.ArgumentParser, dest: str = "kb", help: str = KB_HELP) -> None:
        completes(sp.add_argument(dest, metavar=dest.upper(), help=help), COMPLETE_KB)

    def group(name: str, help: str, dest: str) -> Any:
        parser = sub.add_parser(name, help=help, description=help)
        return parser.add_subparsers(dest=dest, metavar="ACTION", required=True)

    add("status", status.cmd_status, "show the daemon, its knowledge bases and the watcher")

    kb = group("kb", "manage knowledge bases", "kb_command")
    sp = add("list", kbs.cmd_kb_list, "list knowledge bases", kb)
    sp.add_argument("--names", action="store_true", help="only the names, one a line")
    sp = add("create", kbs.cmd_kb_create, "create a knowledge base", kb)
    sp.add_argument("name", metavar="NAME", help="its name: lowercase letters, digits, - and _")
    sp.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE",
        help="settings (lists as a,b; sizes as 10MiB)",
    )  # fmt: skip
    completes(
        sp.add_argument(
            "--path", metavar="DIR", help="attach this folder of yours, indexed where it is"
        ),
        COMPLETE_DIR,
    )
    sp = add(
        "attach", kbs.cmd_kb_attach,
        "trust a knowledge base's folder on this machine (its docs link came by a sync, or "
        "the folder was replaced or moved)", kb,
    )  # fmt: skip
    kb_arg(sp, "name")
    completes(
        sp.add_argument(
            "path", nargs="?", metavar="DIR", help="the folder (default: where its link leads)"
        ),
        COMPLETE_DIR,
    )
    sp = add("show", kbs.cmd_kb_show, "show a knowledge base and its settings", kb)
    kb_arg(sp, "name")
    sp = add("set", kbs.cmd_kb_set, "change settings (KEY=VALUE, e.g. chunk_size=256)", kb)
    kb_arg(sp, "name")
    sp.add_argument(
        "settings", nargs="+", metavar="KEY=VALUE",
        help="a setting and its value (lists as a,b; sizes as 10MiB or '25 MB')",
    )  # fmt: skip
    sp = add(
        "delete", kbs.cmd_kb_delete,
        "delete a knowledge base and its files (an attached folder is never touched)", kb,
    )  # fmt: skip
    kb_arg(sp, "name")
    sp.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    for verb, enabled in (("enable", True), ("disable", False)):
        sp = add(verb, kbs.enable(enabled), f"{verb} a knowledge base", kb)
        kb_arg(sp, "name")

    sp = add("docs", documents.cmd_docs, "list the documents of a knowledge base")
    kb_arg(sp)
    sp.add_argument("-q", "--q", help="only titles containing this text")
    sp.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    sp.add_argument("--offset", type=int, default=0, help="skip this many first")
    document_commands: tuple[tuple[str, Command, str], ...] = (
        ("show", documents.cmd_show, "print a document's Markdown"),
        (
            "edit",
            documents.cmd_edit,
            "open a document in $VISUAL/$EDITOR (saved edits are indexed)",
        ),
        ("rm", documents.cmd_rm, "delete a document: its file (and original) go to the trash"),
        (
            "reconvert",
            adding.ingest_command("reconvert"),
            "convert a document's kept original again",
        ),
        (
            "update-source",
            adding.ingest_command("update-source"),
            "ingest a tracked source file again",
        ),
    )
    for name, fn, text in document_commands:
        sp = add(name, fn, text)
        kb_arg(sp)
        sp.add_argument("doc", metavar="DOC", help=DOC_HELP)
        if name == "rm":
            sp.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    sp = add("trash", trash.cmd_trash, "list the deleted documents kept in the trash")
    kb_arg(sp)
    sp = add("restore", trash.cmd_restore, "bring a deleted document back from the trash")
    kb_arg(sp)
    sp.add_argument("trash_id", metavar="TRASH_ID", help="its id in `cofferctl trash KB`")
    sp = add("links", documents.cmd_links, "a document's links and backlinks, or every broken link")
    kb_arg(sp)
    sp.add_argument("doc", metavar="DOC", nargs="?", help=DOC_HELP)
    sp.add_argument("--broken", action="store_true", help="every link that leads nowhere")
    sp = add("tags", documents.cmd_tags, "the tags of a knowledge base and how often each is used")
    kb_arg(sp)
    sp = add(
        "conflicts", documents.cmd_conflicts, "sync conflict copies and files with merge markers"
    )
    kb_arg(sp)
    sp = add("add", adding.cmd_add, "add files (any supported format; folders recursively, globs)")
    kb_arg(sp)
    completes(
        sp.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or globs"),
        COMPLETE_FILE,
    )
    sp.add_argument("--replace", action="store_true", help="update documents of the same name")
    sp = add(
        "check-sources", adding.cmd_check_sources, "compare tracked originals with their files"
    )
    kb_arg(sp)
    _search_parser(
        add("search", searching.cmd_search, "search a knowledge base (or several: --all, --kb)")
    )
    sp = add("grep", searching.cmd_grep, "search the Markdown files with a regular expression")
    kb_arg(sp)
    sp.add_argument("pattern", help="a regular expression (ripgrep's syntax)")
    sp.add_argument("-m", "--max-matches", type=int, default=100, help="at most this many lines")
    sp.add_argument("-i", "--ignore-case", action="store_true", help="match upper and lower case")
    sp = add("reindex", indexing.cmd_reindex, "rescan a knowledge base's files now")
    kb_arg(sp)
    sp = add("skipped", status.cmd_skipped, "the files a knowledge base skips, and why")
    kb_arg(sp)
    sp = add("metrics", status.cmd_metrics, "counts and sizes of a knowledge base")
    kb_arg(sp)
    add("mcp", services.cmd_mcp, "serve MCP on stdio: AI agents search and write through cofferd")
    service = group("service", "start cofferd with the OS", "action")
    for action, text in (
        ("install", "write and enable the systemd user units (launchd agent on macOS)"),
        ("uninstall", "stop, disable and remove them"),
        ("status", "show the service's state"),
    ):
        sp = add(action, services.cmd_service, text, service)
        sp.add_argument("--dry-run", action="store_true", help="print, do nothing")
    sp = add("log", status.cmd_log, "show the audit trail and the MCP tool calls")
    completes(sp.add_argument("--kb", help="only this knowledge base"), COMPLETE_KB)
    sp.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    sp = add("completion", services.completion(p), "print a shell completion script")
    sp.add_argument("shell", choices=services.SHELLS, help="bash, zsh or fish")
    return p


def _search_parser(sp: argparse.ArgumentParser) -> None:
    completes(
        sp.add_argument(
            "kb",
            metavar="KB",
            help="the knowledge base (with --all or --kb: the query's first word)",
        ),
        COMPLETE_KB,
    )
    sp.add_argument("query", nargs="*", help="what to look for")
    sp.add_argument("--all", action="store_true", help="search every enabled knowledge base")
    completes(
        sp.add_argument(
            "--kb", dest="kbs", action="append", default=[], metavar="KB",
            help="search this knowledge base too (repeatable)",
        ),
        COMPLETE_KB,
    )  # fmt: skip
    sp.add_argument("-k", "--top-k", type=int, default=10, help="this many passages (default 10)")
    sp.add_argument("--folder", help="only documents in this folder of docs/ (or below it)")
    sp.add_argument(
        "--tag", dest="tags", action="append", default=[], metavar="TAG",
        help="only documents with this tag (repeatable: all of them; nested tags count)",
    )  # fmt: skip
    sp.add_argument("--since", metavar="WHEN", help="updated since: 2026-11-30, 3d, 12h, 2w")
    sp.add_argument("--until", metavar="WHEN", help="updated until (the whole day for a date)")
    sp.add_argument(
        "--source-mode", choices=["converted", "edited"],
        help="only converted documents, or only those edited since",
    )  # fmt: skip


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if not argv:  # as git does: the help, and a usage exit
        parser.print_help(stdout)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    args.json = args.json or args.sub_json
    args.socket = args.sub_socket or args.socket
    out = Output(stdout, args.json)
    socket_path = socket_from_env({"COFFER_SOCKET": args.socket} if args.socket else None)
    client = Client(socket_path)
    try:
        result = args.fn(client, args, out)
        if result is RESULT_FAILED:
            return EXIT_FAILED
        if result is not None and out.as_json:
            out.json(result)
        return EXIT_OK
    except DaemonUnreachable:
        complain(f"cofferd is not running on {socket_path}; {START_HINT}")
        return EXIT_UNREACHABLE
    except ApiError as exc:
        if out.as_json:
            out.json({"error": {"code": exc.code, "message": exc.message, "details": exc.details}})
        complain(f"{exc.message} ({exc.code})")
        return EXIT_FAILED
    except CommandFailed as exc:
        complain(str(exc))
        return EXIT_FAILED
    except UsageError as exc:
        complain(str(exc))
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except (KeyboardInterrupt, EOFError):  # Ctrl-C or Ctrl-D at a question
        print(file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
