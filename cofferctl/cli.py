"""cofferctl: control cofferd, the Coffer daemon, over its Unix socket.

Exit codes: 0 success, 1 the daemon reported an error (or the command failed: an editor,
grep finding nothing), 2 usage error, 3 the daemon is not reachable or stopped answering,
130 interrupted. `--json` prints the API's JSON body unchanged. Colour only on a terminal
and never when NO_COLOR is set. Control characters in names and text are shown escaped
(cofferctl.output). Every failure is one line on stderr, never a traceback.
Environment: COFFER_SOCKET (socket path).

It starts fast: a run builds the parser of its own command only, and imports the module
of that command (`cofferctl.commands.*`) when it runs.

Long on purpose: it is the parser. Every command and flag is declared here, in one place
that a test holds against the README; what a command does is in `cofferctl.commands`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from coffer_kernel import __version__
from coffer_kernel.bounds import (
    AUDIT_LIMIT_MAX,
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    MAX_MATCHES_MAX,
    OFFSET_MAX,
    TOP_K_MAX,
)
from coffer_kernel.locations import socket_from_env
from cofferctl.client import ApiError, Client, DaemonUnreachable, ProtocolError
from cofferctl.command import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    RESULT_FAILED,
    CommandFailed,
    UsageError,
    load,
)
from cofferctl.output import Output, complain
from cofferctl.parser_help import (
    COMPLETE_DIR,
    COMPLETE_FILE,
    COMPLETE_KB,
    Bounded,
    Parser,
    completes,
    free_text,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: ~3 ms of each start
if TYPE_CHECKING:
    from typing import TextIO

START_HINT = "start it with `cofferd` (or `make run` in a checkout)"
STOPPED_HINT = "did cofferd stop? `cofferctl status` says whether it runs"
KB_HELP = "the knowledge base"
DOC_HELP = (
    "the document: its id or a start of it, its path in the KB (.md may be left out, or all "
    "but its end) or its title"
)
SUBCOMMAND_OPTIONS = "sub_"  # dest prefix of --json/--socket given after the command


def _options(prefix: str) -> Parser:
    """--json and --socket, accepted before or after the command: separate dests, so a
    command's defaults cannot reset what was given before it (merged in main())."""
    parser = Parser(add_help=False)
    parser.add_argument(
        "--json", action="store_true", dest=f"{prefix}json", help="print the API's JSON"
    )
    completes(
        parser.add_argument(
            "--socket", dest=f"{prefix}socket", metavar="PATH",
            help="daemon socket (env COFFER_SOCKET)",
        ),
        COMPLETE_FILE,
    )  # fmt: skip
    return parser


class Commands:
    """Adds commands under a parser: each runs `cofferctl.commands.<module>.<function>`."""

    def __init__(self, sub: argparse._SubParsersAction[Parser], common: Parser) -> None:
        self.sub = sub
        self.common = common

    def add(self, name: str, run: str, help: str) -> Parser:
        parser = self.sub.add_parser(name, help=help, description=help, parents=[self.common])
        parser.set_defaults(run=run)
        return parser

    def group(self, name: str, help: str, dest: str) -> Commands:
        parser = self.sub.add_parser(name, help=help, description=help)
        return Commands(
            parser.add_subparsers(dest=dest, metavar="ACTION", required=True), self.common
        )


def _kb(parser: argparse.ArgumentParser, dest: str = "kb", help: str = KB_HELP) -> None:
    completes(parser.add_argument(dest, metavar=dest.upper(), help=help), COMPLETE_KB)


def _doc(parser: argparse.ArgumentParser, nargs: str | None = None) -> None:
    free_text(parser.add_argument("doc", metavar="DOC", nargs=nargs, help=DOC_HELP))


def _status(c: Commands) -> None:
    c.add("status", "status.cmd_status", "show the daemon, its knowledge bases and the watcher")


def _kbs(commands: Commands) -> None:
    kb = commands.group("kb", "manage knowledge bases", "kb_command")
    sp = kb.add("list", "kbs.cmd_kb_list", "list knowledge bases")
    sp.add_argument("--names", action="store_true", help="only the names, one a line")
    sp = kb.add("create", "kbs.cmd_kb_create", "create a knowledge base")
    sp.add_argument("name", metavar="NAME", help="its name: lowercase letters, digits, - and _")
    sp.add_argument(
        "--set", nargs="*", action="extend", default=[], metavar="KEY=VALUE",
        help="settings (lists as a,b; sizes as 10MiB); --set may be given again",
    )  # fmt: skip
    completes(
        sp.add_argument(
            "--path", metavar="DIR", help="attach this folder of yours, indexed where it is"
        ),
        COMPLETE_DIR,
    )
    sp.add_argument(
        "--formats", metavar="LIST",
        help="files of these formats are documents where they lie, besides Markdown: "
        "pdf,docx,pptx,xlsx,html,epub,csv,json,xml,txt ('' for none; default "
        "pdf,docx,pptx,epub,txt)",
    )  # fmt: skip
    sp = kb.add(
        "attach", "kbs.cmd_kb_attach",
        "trust a knowledge base's folder on this machine (its docs link came by a sync, or "
        "the folder was replaced or moved)",
    )  # fmt: skip
    _kb(sp, "name")
    completes(
        sp.add_argument(
            "path", nargs="?", metavar="DIR", help="the folder (default: where its link leads)"
        ),
        COMPLETE_DIR,
    )
    _kb(kb.add("show", "kbs.cmd_kb_show", "show a knowledge base and its settings"), "name")
    sp = kb.add("set", "kbs.cmd_kb_set", "change settings (KEY=VALUE, e.g. chunk_size=256)")
    _kb(sp, "name")
    sp.add_argument(
        "settings", nargs="+", metavar="KEY=VALUE",
        help="a setting and its value (lists as a,b; sizes as 10MiB or '25 MB')",
    )  # fmt: skip
    sp = kb.add(
        "delete", "kbs.cmd_kb_delete",
        "delete a knowledge base and its files (an attached folder is never touched)",
    )  # fmt: skip
    _kb(sp, "name")
    sp.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    for verb in ("enable", "disable"):
        _kb(kb.add(verb, f"kbs.cmd_kb_{verb}", f"{verb} a knowledge base"), "name")


def _bounded(
    sp: argparse.ArgumentParser, name: str, bounds: Bounded, default: int, text: str, *more: str
) -> None:
    """A whole-number option whose help states its range and default."""
    help_text = f"{text}: {bounds.stated()} (default {default})"
    sp.add_argument(name, *more, type=bounds, default=default, help=help_text)


def _docs(c: Commands) -> None:
    sp = c.add("docs", "documents.cmd_docs", "list the documents of a knowledge base")
    _kb(sp)
    sp.add_argument("-q", "--q", help="only titles containing this text")
    _bounded(sp, "--limit", Bounded(1, LIST_LIMIT_MAX), 50, "at most this many")
    _bounded(sp, "--offset", Bounded(0, OFFSET_MAX), 0, "skip this many first")


def _page(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--limit and --offset of a paged list."""
    _bounded(sp, "--limit", Bounded(1, LIST_LIMIT_MAX), LIST_LIMIT_DEFAULT, "at most this many")
    _bounded(sp, "--offset", Bounded(0, OFFSET_MAX), 0, "skip this many first")
    return sp


def _paged_kb_command(name: str, run: str, help: str) -> Callable[[Commands], None]:
    """A command that takes a knowledge base and a page of its list."""

    def add(c: Commands) -> None:
        sp = c.add(name, run, help)
        _kb(sp)
        _page(sp)

    return add


def _conflicts(c: Commands) -> None:
    sp = c.add(
        "conflicts", "documents.cmd_conflicts", "sync conflict copies and files with merge markers"
    )
    _kb(sp)
    _page(sp)


def _show(c: Commands) -> None:
    sp = c.add("show", "documents.cmd_show", "print a document's file as it is")
    _kb(sp)
    _doc(sp)
    sp.add_argument(
        "--header", action="store_true",
        help="its title, path and tags, then its text without the frontmatter",
    )  # fmt: skip


def _document_command(name: str, run: str, help: str) -> Callable[[Commands], None]:
    def add(c: Commands) -> None:
        sp = c.add(name, run, help)
        _kb(sp)
        _doc(sp)
        if name == "rm":
            sp.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    return add


def _restore(c: Commands) -> None:
    sp = c.add("restore", "trash.cmd_restore", "bring a deleted document back from the trash")
    _kb(sp)
    sp.add_argument(
        "trash_id", metavar="TRASH_ID",
        help="its id in `cofferctl trash KB`, or a start of it no other entry's id shares",
    )  # fmt: skip


def _links(c: Commands) -> None:
    sp = c.add(
        "links", "documents.cmd_links", "a document's links and backlinks, or every broken link"
    )
    _kb(sp)
    _doc(sp, "?")
    sp.add_argument("--broken", action="store_true", help="every link that leads nowhere")
    _page(sp)  # the broken links, or the document's backlinks


def _kb_command(name: str, run: str, help: str) -> Callable[[Commands], None]:
    """A command that takes a knowledge base and nothing else."""
    return lambda c: _kb(c.add(name, run, help))


def _add(c: Commands) -> None:
    sp = c.add(
        "add", "adding.cmd_add", "add files (any supported format; folders recursively, globs)"
    )
    _kb(sp)
    completes(
        sp.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or globs"),
        COMPLETE_FILE,
    )
    sp.add_argument("--replace", action="store_true", help="update documents of the same name")
    sp.add_argument(
        "--to", metavar="DIR", help="the knowledge base's folder to add into (default: add_folder)"
    )


def _search(c: Commands) -> None:
    sp = c.add(
        "search", "searching.cmd_search", "search a knowledge base (or several: --all, --kb)"
    )
    completes(
        sp.add_argument(
            "kb",
            metavar="KB",
            help="the knowledge base (with --all or --kb: the query's first word)",
        ),
        COMPLETE_KB,
    )
    free_text(
        sp.add_argument(
            "query", nargs="*", help="what to look for (words starting with - after --)"
        )
    )
    sp.add_argument("--all", action="store_true", help="search every enabled knowledge base")
    completes(
        sp.add_argument(
            "--kb", dest="kbs", action="append", default=[], metavar="KB",
            help="search this knowledge base too (repeatable)",
        ),
        COMPLETE_KB,
    )  # fmt: skip
    _bounded(sp, "-k", Bounded(1, TOP_K_MAX), 10, "this many passages", "--top-k", "--limit")
    sp.add_argument(
        "--mode", choices=["keyword", "vector", "hybrid"],
        help="search so (one of the knowledge base's enabled modes), not in its default mode",
    )  # fmt: skip
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
    sp.add_argument(
        "--format", dest="formats", action="append", default=[], metavar="FORMAT",
        help="only documents of this format: md, pdf, docx, ... (repeatable: any of them)",
    )  # fmt: skip


def _grep(c: Commands) -> None:
    sp = c.add(
        "grep",
        "searching.cmd_grep",
        "search the files with a regular expression (converted text for PDFs and the like)",
    )
    _kb(sp)
    free_text(
        sp.add_argument(
            "pattern", help="a regular expression (ripgrep's syntax; one starting with - after --)"
        )
    )
    _bounded(sp, "-m", Bounded(1, MAX_MATCHES_MAX), 100, "at most this many lines", "--max-matches")
    sp.add_argument("-i", "--ignore-case", action="store_true", help="match upper and lower case")


def _mcp(c: Commands) -> None:
    c.add(
        "mcp", "services.cmd_mcp", "serve MCP on stdio: AI agents search and write through cofferd"
    )


def _lsp(c: Commands) -> None:
    c.add("lsp", "services.cmd_lsp", "serve the Language Server Protocol on stdio: editors")


def _web(c: Commands) -> None:
    sp = c.add(
        "web", "services.cmd_web",
        "open the web page in the browser: search as you type (served on 127.0.0.1 only)",
    )  # fmt: skip
    completes(
        sp.add_argument("kb", nargs="?", metavar="KB", help="the knowledge base it starts on"),
        COMPLETE_KB,
    )
    port = Bounded(1, 65535)
    sp.add_argument(
        "--port",
        type=port,
        help=f"on this port: {port.stated()} (default: the one it is on, or a free one)",
    )
    sp.add_argument("--no-open", action="store_true", help="print the URL, open no browser")
    sp.add_argument("--stop", action="store_true", help="stop serving the page")


def _service(commands: Commands) -> None:
    service = commands.group("service", "start cofferd with the OS", "action")
    for action, text in (
        ("install", "write and enable the systemd user units (launchd agent on macOS)"),
        ("uninstall", "stop, disable and remove them"),
        ("status", "show the service's state"),
    ):
        sp = service.add(action, "services.cmd_service", text)
        sp.add_argument("--dry-run", action="store_true", help="print, do nothing")


def _log(c: Commands) -> None:
    sp = c.add("log", "status.cmd_log", "show the audit trail and the MCP tool calls")
    completes(sp.add_argument("--kb", help="only this knowledge base"), COMPLETE_KB)
    _bounded(sp, "--limit", Bounded(1, AUDIT_LIMIT_MAX), 50, "at most this many")


def _completion(c: Commands) -> None:
    sp = c.add("completion", "services.cmd_completion", "print a shell completion script")
    sp.add_argument("shell", choices=("bash", "zsh", "fish"), help="bash, zsh or fish")
    sp.set_defaults(whole_parser=build_parser)  # the script covers every command


# Each command's first word, and what adds its parser (a group's: all of the group's), in
# the order of the help.
COMMANDS: dict[str, Callable[[Commands], None]] = {
    "status": _status,
    "kb": _kbs,
    "docs": _docs,
    "show": _show,
    "edit": _document_command(
        "edit", "documents.cmd_edit", "open a document in $VISUAL/$EDITOR (saved edits are indexed)"
    ),
    "rm": _document_command(
        "rm", "documents.cmd_rm", "delete a document: its file (and original) go to the trash"
    ),
    "reconvert": _document_command(
        "reconvert", "adding.cmd_reconvert", "convert a document's kept original again"
    ),
    "update-source": _document_command(
        "update-source", "adding.cmd_update_source", "ingest a tracked source file again"
    ),
    "trash": _paged_kb_command(
        "trash", "trash.cmd_trash", "list the deleted documents kept in the trash"
    ),
    "restore": _restore,
    "links": _links,
    "tags": _paged_kb_command(
        "tags", "documents.cmd_tags", "the tags of a knowledge base and how often each is used"
    ),
    "conflicts": _conflicts,
    "add": _add,
    "check-sources": _kb_command(
        "check-sources", "adding.cmd_check_sources", "compare tracked originals with their files"
    ),
    "search": _search,
    "grep": _grep,
    "reindex": _kb_command(
        "reindex", "indexing.cmd_reindex", "rescan a knowledge base's files now"
    ),
    "skipped": _paged_kb_command(
        "skipped", "status.cmd_skipped", "the files a knowledge base skips, and why"
    ),
    "metrics": _kb_command("metrics", "status.cmd_metrics", "counts and sizes of a knowledge base"),
    "web": _web,
    "mcp": _mcp,
    "lsp": _lsp,
    "service": _service,
    "log": _log,
    "completion": _completion,
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """cofferctl's parser; with `only` (a command's first word), that command's parser
    alone under it: each parser takes a fraction of a millisecond to build."""
    p = Parser(
        prog="cofferctl",
        description="Control cofferd, the Coffer daemon.",
        epilog="Exit codes: 0 ok, 1 error from the daemon, 2 usage, 3 daemon not reachable "
        "(or it stopped answering), 130 interrupted.",
        parents=[_options("")],
    )
    p.add_argument(
        "--version", action="version", version=f"cofferctl {__version__}",
        help="print cofferctl's version",
    )  # fmt: skip
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands = Commands(sub, _options(SUBCOMMAND_OPTIONS))
    for name, add in COMMANDS.items():
        if only in (None, name):
            add(commands)
    return p


def command_word(argv: Sequence[str]) -> str | None:
    """The command `argv` runs, found before parsing: past --json and --socket PATH (or any
    start of them, as argparse takes), the first word, when it names a command. None for
    anything else (help, a mistyped command): the whole parser is built to answer it."""
    value_next = False
    for word in argv:
        if value_next:
            value_next = False
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
        elif len(name := word.partition("=")[0]) > 2 and "--json".startswith(name):
            continue
        elif len(name) > 2 and "--socket".startswith(name):
            value_next = "=" not in word
        else:
            return None
    return None


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return _main(argv, stdout)
    except KeyboardInterrupt:  # Ctrl-C, at any moment
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `cofferctl docs KB | head -1`: the reader has what it wanted
        _discard(stdout)
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - a bug of ours: one line too, with what it was
        complain(f"unexpected error ({type(exc).__name__}: {exc}); this is a bug in cofferctl")
        return EXIT_FAILED
    finally:  # --help and usage errors (SystemExit) too
        _flush(stdout)


def _main(argv: list[str], stdout: TextIO) -> int:
    parser = build_parser(command_word(argv))
    if not argv:  # as git does: the help, and a usage exit
        parser.print_help(stdout)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    args.json = args.json or getattr(args, f"{SUBCOMMAND_OPTIONS}json")
    args.socket = getattr(args, f"{SUBCOMMAND_OPTIONS}socket") or args.socket
    out = Output(stdout, args.json)
    socket_path = socket_from_env({"COFFER_SOCKET": args.socket} if args.socket else None)
    try:
        result = load(args.run)(Client(socket_path), args, out)
    except DaemonUnreachable:
        complain(f"cofferd is not running on {socket_path}; {START_HINT}")
        return EXIT_UNREACHABLE
    except ProtocolError as exc:
        complain(f"{exc}; {STOPPED_HINT}")
        return EXIT_UNREACHABLE
    except ApiError as exc:
        if out.as_json:
            out.json({"error": {"code": exc.code, "message": exc.message, "details": exc.details}})
        complain(f"{exc.message} ({exc.code}){_retry_hint(exc)}")
        return EXIT_FAILED
    except CommandFailed as exc:
        complain(str(exc))
        return EXIT_FAILED
    except UsageError as exc:
        complain(str(exc))
        return EXIT_USAGE
    except EOFError:  # Ctrl-D at a question
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise  # main() ends quietly
    except OSError as exc:  # a file of this machine: a unit file, a document to add
        complain(f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""))
        return EXIT_FAILED
    if result is RESULT_FAILED:
        return EXIT_FAILED
    if result is not None and out.as_json:
        out.json(result)
    return EXIT_OK


def _retry_hint(exc: ApiError) -> str:
    """For an answer that says "try again" (503, as while the index is rebuilt): when, if
    its message does not say it already."""
    after = exc.details.get("retry_after_s") if isinstance(exc.details, dict) else None
    if exc.status != 503 or type(after) is not int or "try again" in exc.message:
        return ""
    return f"; try again in {after} s"


def _flush(stream: TextIO) -> None:
    """Write out what is buffered here, where a reader that went away is caught, not in
    Python's last flush at exit, which would complain about it on stderr."""
    try:
        stream.flush()
    except BrokenPipeError:
        _discard(stream)


def _discard(stream: TextIO) -> None:
    """Send what is left to write to /dev/null: the reader of `stream` went away."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # not a file (a test's StringIO)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
