"""The options the kwire commands share: one name, one meaning, one parser (-p/--broker-ports,
--master, --conf, -q/--quiet, --overwrite)."""

from __future__ import annotations

import argparse
import os


def ports(text: str) -> list[int]:
    """-p/--broker-ports: comma-separated TCP ports, each 1-65535."""
    try:
        found = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port list: {text!r}") from None
    if not found or any(not 0 < p < 65536 for p in found):
        raise argparse.ArgumentTypeError(f"ports are 1-65535: {text!r}")
    return found


def conf(text: str) -> tuple[str, str]:
    """--conf KEY=VALUE: a Spark setting."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add_broker_ports(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-p",
        "--broker-ports",
        type=ports,
        action="extend",
        metavar="PORT[,PORT...]",
        help="TCP ports the brokers listen on (default 9092; repeatable); connections on other "
        "ports are still read when their frames show which side is the broker",
    )


def add_keylog(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keylog",
        action="append",
        default=[],
        metavar="FILE",
        help="TLS key log (NSS format, as SSLKEYLOGFILE writes; repeatable; local or a URL): "
        "TLS connections are decrypted with its secrets, and without them become rows with "
        "status encrypted (docs/tls.md). Key logs are secrets: kwire keeps them in memory",
    )


# Spark's local master gives up on the first failed task (spark.task.maxFailures does not apply
# there); local[N,F] retries like a cluster's default of 4, so a Python worker killed mid-task
# (the OOM killer) costs a retry, not the job.
DEFAULT_MASTER = "local[*,4]"


def add_spark(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master",
        default=DEFAULT_MASTER,
        help=f"Spark master URL (default {DEFAULT_MASTER}: every core of this machine, a failed "
        "task tried up to 4 times as on a cluster; Spark's plain local[N] tries once)",
    )
    parser.add_argument(
        "--remote",
        default=os.environ.get("SPARK_REMOTE") or None,
        metavar="URL",
        help="a Spark Connect server (sc://host:port, as pyspark takes it; default: "
        "SPARK_REMOTE when set): the job runs there instead of in a Spark of its own, and "
        "--master is the server's. OUT and the inputs must be paths the server's executors "
        "can reach (docs/cluster.md)",
    )
    parser.add_argument(
        "--conf",
        type=conf,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, as spark-submit takes it (repeatable)",
    )


def add_database(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database",
        metavar="NAME",
        help="also make every table of OUT a table of the session's catalog, NAME.requests, "
        "NAME.responses, NAME.records, NAME.groups_members, ... (external tables at OUT's "
        "places, partitions recovered; kwire's own tables of those names are replaced; "
        "docs/outputs.md)",
    )


def add_quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines while it runs"
    )


def add_overwrite(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--overwrite", action="store_true", help=f"replace {what} if it exists")
