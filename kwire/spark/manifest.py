"""OUT/manifest.json: what a decode job wrote, written last, so an OUT without it is incomplete.

A job removes the manifest before it writes anything (an --overwrite run into an old OUT, too)
and writes it after its last table: a job killed anywhere in between leaves an OUT without one.
Spark commits each table on its own (a table's `_SUCCESS`), so a killed job's finished tables
look like a complete run's; the manifest is what says the run finished. `kwire groups` and
`kwire report` refuse an OUT without it.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from kwire.capture import distributed

NAME = "manifest.json"
# What a decode job writes under OUT: any of them without a manifest is a job that did not finish.
TABLE_DIRS = (
    "frames.parquet",
    "requests",
    "responses",
    "records",
    "groups",
    "delivery",
    "delivery_summary",
)


class IncompleteOutput(Exception):
    """An OUT whose job did not finish, or that lacks a table a reader needs."""


def remove(out: str) -> None:
    """Removes OUT's manifest, if any, before a job writes into OUT."""
    filesystem, path = distributed.filesystem(out)
    target = f"{path.rstrip('/')}/{NAME}"
    from pyarrow import fs

    if filesystem.get_file_info(target).type != fs.FileType.NotFound:
        filesystem.delete_file(target)


def write(out: str, tables: dict[str, str], **info: Any) -> None:
    """Writes OUT/manifest.json: when, the tables (name -> path relative to OUT) and whatever
    `info` says of the run (the job gives kwire's version, inputs and options). Through a
    temporary file and a rename, so a reader never sees half a manifest."""
    filesystem, path = distributed.filesystem(out)
    body = {
        "complete": True,
        "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "tables": tables,
        **info,
    }
    text = json.dumps(body, indent=2, sort_keys=True, default=str) + "\n"
    base = path.rstrip("/")
    temporary = f"{base}/.{NAME}.tmp"
    with filesystem.open_output_stream(temporary) as f:
        f.write(text.encode())
    filesystem.move(temporary, f"{base}/{NAME}")


def read(out: str) -> dict[str, Any]:
    """OUT's manifest; IncompleteOutput with a one-line reason when there is none."""
    filesystem, path = distributed.filesystem(out)
    target = f"{path.rstrip('/')}/{NAME}"
    try:
        with filesystem.open_input_stream(target) as f:
            body: dict[str, Any] = json.loads(f.read())
    except FileNotFoundError:
        from pyarrow import fs

        if filesystem.get_file_info(path).type == fs.FileType.NotFound:
            raise IncompleteOutput(f"{out}: no such directory") from None
        written = [
            name
            for name in TABLE_DIRS
            if filesystem.get_file_info(f"{path.rstrip('/')}/{name}").type != fs.FileType.NotFound
        ]
        if not written:
            raise IncompleteOutput(
                f"{out} is not the output of kwire decode (no {NAME}, no tables); run "
                f"kwire decode CAPTURES -o {out} first"
            ) from None
        raise IncompleteOutput(
            f"{out} is incomplete: it has no {NAME}, which kwire decode writes after its last "
            "table, so the job that wrote it did not finish; run kwire decode again with "
            "--overwrite"
        ) from None
    except (OSError, ValueError) as e:
        raise IncompleteOutput(f"{target}: unreadable ({e})") from None
    return body


def require(out: str, table: str, how: str = "") -> dict[str, Any]:
    """The manifest of a complete OUT that holds `table` (e.g. 'groups/generations')."""
    body = read(out)
    if table not in body.get("tables", {}):
        raise IncompleteOutput(
            f"{out} has no {table}: the job that wrote it ran {how or 'without it'}".rstrip()
        )
    return body
