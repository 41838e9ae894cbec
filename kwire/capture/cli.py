"""`kwire capture IN.pcap [more files or directories] -o frames.parquet`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .distributed import load_keylog
from .pcapfile import CaptureFileError
from .reader import DEFAULT_BROKER_PORTS, read_frames, write_parquet
from .summary import Summary
from .tls import KeyLogError


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


class _Progress:
    def __init__(self) -> None:
        self.shown = False

    def __call__(self, p: dict[str, Any]) -> None:
        if p["final"] and not self.shown:
            return
        self.shown = True
        name = os.path.basename(p["path"])
        line = (
            f"capture: file {p['file_index'] + 1}/{p['files']} {name} "
            f"{_mb(p['file_done'])}/{_mb(p['file_size'])}, total {_mb(p['done'])}/"
            f"{_mb(p['total'])}, {p['frames']} frames"
        )
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The capture step's own options; the front door adds -p/--broker-ports, --overwrite and
    -q/--quiet, which mean the same in every kwire command."""
    parser.add_argument("inputs", nargs="+", help="capture files or directories of them")
    parser.add_argument("-o", "--output", help="the Parquet frames table to write")
    parser.add_argument(
        "--no-infer",
        action="store_true",
        help="only decode connections to a broker port (no direction inference from frames)",
    )
    parser.add_argument(
        "--keep-auth-bytes",
        action="store_true",
        help="keep SaslHandshake/SaslAuthenticate frame bytes (they carry credentials; "
        "dropped by default)",
    )
    parser.add_argument("--summary-json", metavar="FILE", help="also write the summary as JSON")


def run(args: argparse.Namespace) -> int:
    """`kwire capture`: 0 done, 1 some inputs could not be read (the rest was written), 2 bad
    usage or no input could be read."""
    if not args.output and not args.summary_json:
        print(
            "kwire capture: error: give -o FILE.parquet (and/or --summary-json FILE)",
            file=sys.stderr,
        )
        return 2
    if args.output:
        out_dir = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(out_dir):
            print(
                f"kwire capture: error: no such directory for the output: {out_dir}",
                file=sys.stderr,
            )
            return 2
    ports = args.broker_ports or list(DEFAULT_BROKER_PORTS)
    summary = Summary()
    try:
        keylog = load_keylog(getattr(args, "keylog", None) or [])
    except KeyLogError as e:
        print(f"kwire capture: error: {e}", file=sys.stderr)
        return 2

    def warn(message: str) -> None:
        print(f"kwire capture: warning: {message}", file=sys.stderr)

    options: dict[str, Any] = {
        "infer_direction": not args.no_infer,
        "keep_auth_bytes": args.keep_auth_bytes,
        "keylog": keylog,
        "errors": "report",
        "warn": warn,
        "progress": None if args.quiet else _Progress(),
    }
    try:
        if args.output:
            write_parquet(args.inputs, args.output, ports, summary=summary, **options)
        else:
            for _ in read_frames(args.inputs, ports, summary=summary, **options):
                pass
    except CaptureFileError as e:  # pragma: no cover - "report" mode records file errors
        print(f"kwire capture: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"kwire capture: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kwire capture: interrupted; no output written", file=sys.stderr)
        return 130
    failed = [f for f in summary.files if f.get("error")]
    for f in failed:
        print(f"kwire capture: error: {f['path']}: {f['error']}", file=sys.stderr)
    if args.summary_json:
        with open(args.summary_json, "w") as out:
            json.dump(summary.as_dict(), out, indent=2)
            out.write("\n")
    if not args.quiet:
        print(summary.format())
        if args.output:
            print(f"wrote {args.output}")
    if failed:
        read = [f for f in summary.files if "skipped" not in f]
        return 2 if len(failed) == len(read) else 1
    return 0
