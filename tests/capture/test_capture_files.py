"""Unreadable inputs give clean errors; the CLI writes Parquet and a summary."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kwire import capture
from capture_helpers import (
    DATA,
    by_name,
    capture_path,
    cut_by_kill,
    killed_a_client,
    read_packets,
    write_pcapng,
)

REPO = Path(__file__).resolve().parent.parent.parent
CLASSIC = by_name("mock_group_classic.pcap")
STATIC = by_name("mock_static_members.pcapng")


def run_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "kwire", "capture", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "too short"),
        (b"hello, this is not a capture file at all", "not a pcap or pcapng file"),
        (b"\x1f\x8b\x08\x00" + b"\x00" * 40, "not a pcap or pcapng file"),
        (b"\xd4\xc3\xb2\xa1\x02\x00", "pcap file header is cut short"),
        (b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00\x99\x99\x99\x99" + b"\x00" * 16, "byte-order"),
    ],
)
def test_not_a_capture(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.pcap"
    path.write_bytes(content)
    with pytest.raises(capture.CaptureFileError, match=message):
        capture.frames_table(path)
    summary = capture.Summary()
    table = capture.frames_table(path, errors="report", summary=summary)
    assert table.num_rows == 0
    assert message in summary.files[0]["error"]


@pytest.mark.parametrize("record", [CLASSIC, STATIC], ids=lambda r: r["capture"])
def test_truncated_file_keeps_what_was_read(tmp_path: Path, record: dict) -> None:
    data = capture_path(record).read_bytes()
    path = tmp_path / ("cut." + record["capture"].rsplit(".", 1)[1])
    path.write_bytes(data[: len(data) * 2 // 3 - 5])
    warnings: list[str] = []
    summary = capture.Summary()
    table = capture.frames_table(
        path, record["broker_ports"], summary=summary, warn=warnings.append
    )
    assert table.num_rows > 50
    assert "truncated: file ends inside" in summary.files[0]["warning"]
    assert warnings and "truncated" in warnings[0]
    # Whatever was in flight when the file ended is reported, not lost.
    assert set(summary.errors) <= {capture.E_NO_RESPONSE, capture.E_CAPTURE_END}


def test_cli_writes_parquet_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "frames.parquet"
    summary_json = tmp_path / "summary.json"
    port = str(CLASSIC["broker_ports"][0])
    proc = run_cli(
        str(capture_path(CLASSIC)),
        str(capture_path(STATIC)),
        "-o",
        str(out),
        "-p",
        port,
        "-p",
        str(STATIC["broker_ports"][0]),
        "--summary-json",
        str(summary_json),
    )
    assert proc.returncode == 0, proc.stderr
    table = pq.read_table(out)
    assert table.schema.equals(capture.SCHEMA, check_metadata=False)
    summary = json.loads(summary_json.read_text())
    assert summary["frames"]["request"] + summary["frames"]["response"] == table.num_rows
    assert summary["api_keys"]["11"]["name"] == "JoinGroup"
    assert "per api key" in proc.stdout and "Traceback" not in proc.stderr
    assert not list(tmp_path.glob(".*partial"))


def test_cli_directory_input_and_inference(tmp_path: Path) -> None:
    """The data directory: every capture read (brokers on ephemeral ports found from the
    frames), the JSON files beside them passed over and listed."""
    out = tmp_path / "all.parquet"
    summary_json = tmp_path / "summary.json"
    proc = run_cli(str(DATA), "-o", str(out), "--summary-json", str(summary_json))
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))]
    expected = sum(
        n for r in records for c in r["counts"].values() for v in c.values() for n in v.values()
    )
    table = pq.read_table(out)
    # Responses a SIGKILL cut are rows (tshark counts none) only in captures that killed a client.
    cut = table.num_rows - cut_by_kill(table).num_rows
    assert cut == 0 or any(killed_a_client(r) for r in records)
    assert table.num_rows - cut == expected
    summary = json.loads(summary_json.read_text())
    assert sum(1 for f in summary["files"] if "skipped" in f) == len(records)
    assert "not a capture file" in proc.stdout


def test_cli_bad_files_fail_cleanly(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not a capture\n")
    proc = run_cli(str(bad), "-o", str(tmp_path / "x.parquet"))
    assert proc.returncode == 2
    assert "not a pcap or pcapng file" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_cli(str(tmp_path / "missing.pcap"), "-o", str(tmp_path / "y.parquet"))
    assert proc.returncode == 2 and "cannot open" in proc.stderr
    assert "Traceback" not in proc.stderr
    # One bad file among good ones: the good ones are written, the exit code says so.
    proc = run_cli(str(bad), str(capture_path(CLASSIC)), "-o", str(tmp_path / "z.parquet"), "-q")
    assert proc.returncode == 1 and pq.read_table(tmp_path / "z.parquet").num_rows > 0


def test_cli_usage_errors() -> None:
    proc = run_cli("x.pcap")
    assert proc.returncode == 2 and "-o" in proc.stderr
    proc = run_cli("x.pcap", "-o", "y.parquet", "-p", "99999")
    assert proc.returncode == 2 and "port" in proc.stderr


def _pcapng_with(tmp_path: Path, block: bytes) -> Path:
    """A real pcapng capture's first packets, then one hand-made block."""
    linktype, packets = read_packets(capture_path(CLASSIC))
    path = write_pcapng(tmp_path / "x.pcapng", linktype, packets[:10])
    with open(path, "ab") as f:
        f.write(block)
    return path


@pytest.mark.parametrize(
    "block, warning",
    [
        # An enhanced packet block whose length (12) leaves no room for its fixed fields.
        (struct.pack("<III", 6, 12, 12), "too short"),
        # A timestamp beyond what the column (and datetime) can hold.
        (
            struct.pack("<IIIIIII", 6, 32, 0, 0xFFFFFFFF, 0, 0, 0) + struct.pack("<I", 32),
            "timestamp",
        ),
        # A simple packet block without room for its length field.
        (struct.pack("<III", 3, 12, 12), "too short"),
    ],
)
def test_corrupt_pcapng_blocks_stop_with_a_warning(
    tmp_path: Path, block: bytes, warning: str
) -> None:
    path = _pcapng_with(tmp_path, block)
    for mode in ("raise", "report"):
        summary = capture.Summary()
        capture.frames_table(path, CLASSIC["broker_ports"], summary=summary, errors=mode)
        assert warning in summary.files[0]["warning"]
        assert summary.packets == 10
