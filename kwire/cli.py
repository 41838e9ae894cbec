"""The `kwire` command (and `python -m kwire`): one front door with a subcommand per job.

    kwire decode   CAPTURES_OR_FRAMES... -o OUT      the Spark job: requests, responses, records, groups
    kwire groups   OUT [--group G]                   each consumer group's story, in sentences
    kwire report   OUT [-o report.html]              the same as one HTML page with timelines
    kwire capture  CAPTURES... -o frames.parquet     the capture step alone, in one process
    kwire generate [SCHEMAS...] [-o DIR]             compile Kafka JSON schemas into codecs

Exit codes: 0 done, 1 the job failed, 2 bad usage or bad input. Errors are one line on stderr
(KWIRE_TRACEBACK=1 adds the traceback of an unexpected failure). `kwire INPUTS -o OUT` without a
subcommand is `kwire decode`.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from kwire import __version__
from kwire.options import add_broker_ports, add_keylog, add_overwrite, add_quiet, add_spark

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
COMMANDS = ("decode", "live", "spool", "groups", "report", "capture", "generate")
EPILOG = (
    "exit codes: 0 done, 1 the job failed, 2 bad usage or bad input. "
    "`kwire INPUTS -o OUT` is `kwire decode INPUTS -o OUT`. "
    "Tables, columns and statuses: docs/outputs.md in the source."
)


class UsageError(Exception):
    """Bad usage or bad input, reported in one line with exit code 2."""


def say(command: str, message: str) -> None:
    print(f"kwire {command}: {message}", file=sys.stderr, flush=True)


# -- the parser -----------------------------------------------------------------------------------


def _story_arguments(parser: argparse.ArgumentParser, output: str) -> None:
    """What `kwire groups` and `kwire report` both take: OUT, --group, -o FILE, --overwrite."""
    parser.add_argument("out", metavar="OUT", nargs="?", help="the decode job's output directory")
    parser.add_argument("--group", metavar="G", help="only the group with this id")
    parser.add_argument("-o", "--output", metavar="FILE", help=output)
    parser.add_argument(
        "--database",
        metavar="NAME",
        help="instead of OUT: the tables `kwire decode --database NAME` made in the catalog of "
        "the session --remote (or --master and --conf) opens; their files must be readable "
        "from here",
    )
    add_spark(parser)
    add_overwrite(parser, "FILE")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `kwire` parser. With `only`, only that subcommand's arguments are defined (the others
    keep their one-line help; "" defines none): each subcommand's arguments live beside its job,
    and `kwire decode`'s and `kwire live`'s import Spark and the codecs (a second or more), which
    `kwire groups`, `report` and `capture` never need."""

    def wanted(command: str) -> bool:
        return only is None or only == command

    parser = argparse.ArgumentParser(
        prog="kwire",
        description="Decode captured Kafka traffic into typed tables and tell what happened to "
        "each consumer group.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"kwire {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    decode = sub.add_parser(
        "decode",
        prog="kwire decode",
        help="decode captures (pcap/pcapng, ring directories) or frames tables on Spark into "
        "OUT/requests, responses, records and groups",
        epilog=EPILOG,
    )
    if wanted("decode"):
        from kwire import job

        decode.description = job.DESCRIPTION
        job.configure(decode)

    live = sub.add_parser(
        "live",
        prog="kwire live",
        help="follow a rotating capture ring (closed files) and keep OUT's tables current",
        description="Follow a rotating capture ring on Spark Structured Streaming: every closed "
        "file is decoded into OUT's tables (exactly once; connections, half-read frames and "
        "pending requests carry across files), and the group tables are kept current. Killed "
        "and started again, it goes on from its checkpoint (docs/live.md).",
        epilog=EPILOG,
    )
    if wanted("live"):
        from kwire.live import job as live_job

        live_job.configure(live)

    spool_cmd = sub.add_parser(
        "spool",
        prog="kwire spool",
        help="move closed ring files into a spool for `kwire live` (the tcpdump -z / dumpcap "
        "printname hook; also installed as kwire-spool)",
        description="Move closed capture files into a spool directory under arrival-ordered "
        "names, for `kwire live` (docs/live.md).",
        epilog=EPILOG,
    )
    if wanted("spool"):
        from kwire.live import spool

        spool.configure(spool_cmd)

    groups = sub.add_parser(
        "groups",
        prog="kwire groups",
        help="print each consumer group's story from a decode job's OUT",
        description="Tell what happened to each consumer group, in plain sentences, from the "
        "tables `kwire decode` wrote under OUT/groups/ (rules and limits: docs/groups.md).",
        epilog=EPILOG,
    )
    if wanted("groups"):
        _story_arguments(groups, "write the story to FILE instead of stdout")

    report = sub.add_parser(
        "report",
        prog="kwire report",
        help="write one self-contained HTML page of the groups, with timelines",
        description="Write one self-contained HTML report (a timeline per group: members as "
        "lanes, generations, evictions, commits; the tables below it) from a decode job's OUT.",
        epilog=EPILOG,
    )
    if wanted("report"):
        _story_arguments(report, "the page to write (default OUT/report.html)")

    cap = sub.add_parser(
        "capture",
        prog="kwire capture",
        help="turn pcap/pcapng captures into a frames table in one process (no Spark)",
        description="Turn pcap/pcapng captures of Kafka traffic into a Parquet frames table "
        "(one row per Kafka frame, requests paired with responses), in one process. "
        "`kwire decode` runs the same step on Spark.",
        epilog=EPILOG,
    )
    if wanted("capture"):
        from kwire.capture import cli as capture_cli

        capture_cli.add_arguments(cap)
        add_broker_ports(cap)
        add_keylog(cap)
        add_overwrite(cap, "the output file")
        add_quiet(cap)

    gen = sub.add_parser(
        "generate",
        prog="kwire generate",
        help="compile Kafka-dialect JSON message schemas into a Python codec package",
        description="Compile Kafka-dialect JSON message schemas (Apache Kafka's own message "
        "directory compiles unmodified) into a Python codec package and its Cython twins. "
        "In a kwire checkout, no arguments compile schemas/ into generated/.",
        epilog=EPILOG,
    )
    if wanted("generate"):
        gen.add_argument("inputs", nargs="*", type=Path, help="schema files or directories")
        gen.add_argument("-o", "--output", help="the package directory to write")
        gen.add_argument("--no-format", action="store_true", help="skip black (throwaway output)")
        gen.add_argument(
            "--no-native", action="store_true", help="skip the compiled target's Cython sources"
        )
        add_quiet(gen)
    return parser


# -- the subcommands ------------------------------------------------------------------------------


def _decode(args: argparse.Namespace) -> int:
    from kwire import job

    try:
        job.run(args)
    except job.JobError as e:
        raise UsageError(str(e)) from None
    return EXIT_OK


def _live(args: argparse.Namespace) -> int:
    from kwire.live import job as live_job

    try:
        live_job.run(args)
    except live_job.LiveError as e:
        raise UsageError(str(e)) from None
    return EXIT_OK


def _spool(args: argparse.Namespace) -> int:
    from kwire.live import spool

    return spool.run(args)


def _refuse_existing(path: Path, args: argparse.Namespace) -> None:
    if path.exists() and not args.overwrite:
        raise UsageError(f"{path} exists; give --overwrite to replace it")


def _story_out(args: argparse.Namespace) -> None:
    """args.out for `kwire groups` and `kwire report`: OUT as given, or where the catalog's
    tables of --database are (kwire.spark.catalog.out_of)."""
    if args.database is None:
        if args.out is None:
            raise UsageError("give OUT (the decode job's output) or --database NAME")
        return
    if args.out is not None:
        raise UsageError("give OUT or --database NAME, not both")
    from kwire.capture.distributed import local_path
    from kwire.spark.catalog import CatalogError, out_of
    from kwire.spark.session import ConnectError, build_session

    try:
        spark = build_session(args.master, "kwire-story", args.conf, remote=args.remote)
        out = out_of(spark, args.database)
    except (CatalogError, ConnectError) as e:
        raise UsageError(str(e)) from None
    local = local_path(out)
    if local is None or not os.path.isdir(local):
        raise UsageError(
            f"the tables of {args.database} are at {out}, which this machine cannot read as a "
            "directory: run kwire groups where OUT is, or copy it here"
        )
    args.out = local


def _groups(args: argparse.Namespace) -> int:
    from kwire.groups.story import tell

    _story_out(args)

    text = tell(args.out, args.group)
    if args.output:
        target = Path(args.output)
        _refuse_existing(target, args)
        target.write_text(text)
        print(f"story -> {target}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from kwire.groups.report import write_report

    _story_out(args)

    target = Path(args.output) if args.output else Path(args.out) / "report.html"
    if args.output:
        _refuse_existing(target, args)
    path = write_report(args.out, target, args.group)
    print(f"report -> {path}")
    return EXIT_OK


def _capture(args: argparse.Namespace) -> int:
    from kwire.capture import cli as capture_cli

    if args.output:
        _refuse_existing(Path(args.output), args)
    return capture_cli.run(args)


def _generate(args: argparse.Namespace) -> int:
    from generator.__main__ import run_compiler

    out = Path(args.output) if args.output else None
    return run_compiler(args.inputs, out, not args.no_format, not args.no_native, args.quiet)


RUNNERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "decode": _decode,
    "live": _live,
    "spool": _spool,
    "groups": _groups,
    "report": _report,
    "capture": _capture,
    "generate": _generate,
}


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Errors that are the input's fault: one line, exit 2."""
    from kwire.groups.story import StoryError

    return (UsageError, StoryError, FileNotFoundError, NotADirectoryError, IsADirectoryError)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    java = getattr(e, "java_exception", None)  # py4j's Py4JJavaError: "An error occurred while..."
    if java is not None:
        try:
            text = str(java.toString()).strip()
        except Exception:
            pass
    # A Spark failure's text is a Java stack trace: its first line says what went wrong.
    line = text.splitlines()[0] if text else type(e).__name__
    return line if len(line) <= 500 else line[:497] + "..."


def _jvm_gone(e: BaseException) -> str | None:
    """What to say when the failure is the Spark JVM's death (kwire.spark.session.jvm_exit);
    None when no JVM was started or it still runs."""
    if "pyspark" not in sys.modules:  # no session was started: nothing to ask
        return None
    from kwire.spark.session import jvm_exit

    return jvm_exit(e)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        argv.insert(0, "decode")  # `kwire INPUTS -o OUT`
    # Only the subcommand given gets its arguments (and imports what they need).
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else "")
    args = parser.parse_args(argv)  # bad usage: argparse prints it and exits 2
    command: str = args.command
    try:
        return RUNNERS[command](args)
    except KeyboardInterrupt:
        say(command, "interrupted")
        return 130
    except _expected_errors() as e:
        say(command, f"error: {_first_line(e)}")
        return EXIT_USAGE
    except Exception as e:  # the job failed: one line, the traceback on request
        shown = os.environ.get("KWIRE_TRACEBACK", "") not in ("", "0")
        if shown:
            traceback.print_exc()
        hint = "" if shown else " (KWIRE_TRACEBACK=1 shows the traceback)"
        # A JVM that died took the job with it: that, not py4j's lost connection, is the news.
        gone = _jvm_gone(e)
        what = gone if gone else f"{type(e).__name__}: {_first_line(e)}"
        say(command, f"failed: {what}{hint}")
        return EXIT_FAILED


def entry() -> None:
    """The console script: exits with main's code (BrokenPipe when piped into `head` is quiet)."""
    try:
        code = main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_FAILED
    sys.exit(code)
