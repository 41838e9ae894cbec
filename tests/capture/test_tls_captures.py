"""Real TLS captures (tests/data/capture/tls, made by scripts/capture/tls_captures.py): Kafka
clients over TLS 1.2 and 1.3 through a TLS proxy in front of librdkafka's mock cluster, with the
key logs the clients wrote. Decrypted, their frames are what tshark counts with the same key log;
without a key, a connection is `encrypted` rows, never frames read from ciphertext.
(Records against what the clients produced and consumed: tests/records/test_real_captures.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kwire import capture
from kwire.capture.tls import KeyLog
from capture_helpers import (
    counts,
    data_packets,
    flow,
    read_packets,
    remove_segment,
    resegment,
    write_pcap,
)

ROOT = Path(__file__).resolve().parents[2]
TLS = ROOT / "tests" / "data" / "capture" / "tls"
METAS = [json.loads(p.read_text()) for p in sorted(TLS.glob("*.json"))]
IDS = [m["capture"] for m in METAS]
# OpenSSL's names of the TLS 1.2 suites (what Python's ssl reports) -> the IANA names kwire uses.
OPENSSL_NAMES = {
    "ECDHE-RSA-AES128-GCM-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "ECDHE-RSA-AES256-GCM-SHA384": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "ECDHE-RSA-CHACHA20-POLY1305": "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
}


def _keylog(meta: dict[str, Any]) -> KeyLog:
    return KeyLog.load([str(TLS / meta["keylog"])])


def _read(meta: dict[str, Any], keylog: KeyLog | None, ports: Any = None) -> tuple[Any, Any]:
    summary = capture.Summary()
    ports = meta["broker_ports"] if ports is None else ports
    table = capture.frames_table(TLS / meta["capture"], ports, summary=summary, keylog=keylog)
    return table, summary


@pytest.fixture(scope="module", params=METAS, ids=IDS)
def decrypted(request: pytest.FixtureRequest) -> tuple[dict[str, Any], Any, Any]:
    meta = request.param
    table, summary = _read(meta, _keylog(meta))
    return meta, table, summary


def test_the_tls_captures_are_committed() -> None:
    assert {m["scenario"] for m in METAS} >= {"tls13-records", "tls12-group", "tls-partial-keys"}
    versions = {t["version"] for m in METAS for t in m["tls"]}
    suites = {t["cipher"] for m in METAS for t in m["tls"]}
    assert versions == {"TLSv1.2", "TLSv1.3"}
    assert suites >= {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384"}
    assert suites >= {"TLS_CHACHA20_POLY1305_SHA256", *OPENSSL_NAMES}
    assert any(t["session_reused"] for m in METAS for t in m["tls"])
    assert any(not t["keys_logged"] for m in METAS for t in m["tls"])
    for m in METAS:
        assert (TLS / m["capture"]).stat().st_size < 300_000


def test_counts_match_tshark_with_the_same_key_log(decrypted: Any) -> None:
    meta, table, _ = decrypted
    keyed = table.filter(table["api_key"].is_valid())
    assert counts(keyed) == meta["counts"]
    assert keyed.num_rows > 10


def test_only_connections_without_keys_are_encrypted(decrypted: Any) -> None:
    meta, table, summary = decrypted
    without = {t["client_port"] for t in meta["tls"] if not t["keys_logged"]}
    encrypted: dict[int, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        error = row["error"] or ""
        if error.startswith("encrypted"):
            assert row["frame"] is None and row["api_key"] is None
            assert "no key for client random" in error, error
            encrypted.setdefault(row["client_port"], []).append(row)
        else:
            # A clean capture: every decrypted frame complete; only requests in flight when a
            # client closed its connection lack a response.
            assert row["frame"] is not None, row
            assert error in ("", capture.E_NO_RESPONSE + " (connection closed)"), error
    assert set(encrypted) == without
    for rows in encrypted.values():
        assert sorted(r["direction"] for r in rows) == ["request", "response"]
    assert summary.errors["encrypted"] == 2 * len(without)


def test_summary_counts_tls_connections_by_suite(decrypted: Any) -> None:
    meta, _, summary = decrypted
    expected: Counter[str] = Counter()
    for t in meta["tls"]:
        version = t["version"].replace("TLSv", "TLS ")
        suite = OPENSSL_NAMES.get(t["cipher"], t["cipher"])
        expected[f"{'decrypted' if t['keys_logged'] else 'encrypted'}: {version} {suite}"] += 1
    assert summary.tls == expected


def test_without_a_key_log_every_tls_connection_is_encrypted_rows() -> None:
    meta = next(m for m in METAS if m["scenario"] == "tls13-records")
    table, summary = _read(meta, None)
    rows = table.to_pylist()
    assert rows and all(r["frame"] is None and r["api_key"] is None for r in rows)
    assert all(r["error"].startswith("encrypted: no key log given (--keylog FILE) (") for r in rows)
    assert len(rows) == 2 * len(meta["tls"]) == 2 * summary.connections
    assert set(summary.tls.elements()) == {f"encrypted: TLS 1.3 {t['cipher']}" for t in meta["tls"]}


def test_off_the_broker_ports_undecrypted_tls_is_ignored_decrypted_tls_is_inferred() -> None:
    meta = next(m for m in METAS if m["scenario"] == "tls13-records")
    table, summary = _read(meta, None, ports=[9092])
    assert table.num_rows == 0
    (reason,) = summary.connections_ignored
    assert reason.startswith("TLS not decrypted, not on a broker port")
    assert summary.connections_ignored[reason] == len(meta["tls"])
    # Decrypted, the plaintext shows which side is the client, as on plaintext connections.
    table, summary = _read(meta, _keylog(meta), ports=[9092])
    keyed = table.filter(table["api_key"].is_valid())
    assert counts(keyed) == meta["counts"]
    assert set(summary.direction_decided_by) == {"frames"}


def test_a_key_log_of_other_sessions_reads_nothing(tmp_path: Path) -> None:
    meta = next(m for m in METAS if m["scenario"] == "tls12-group")
    other = next(m for m in METAS if m["scenario"] == "tls13-records")
    table, summary = _read(meta, _keylog(other))
    errors = {r["error"].split(" (")[0] for r in table.to_pylist()}
    assert all(e.startswith("encrypted: no key for client random ") for e in errors)
    assert summary.frames["request"] == len(meta["tls"])


def test_the_cli_reads_key_logs_and_names_a_bad_line(tmp_path: Path) -> None:
    meta = next(m for m in METAS if m["scenario"] == "tls13-keyupdate")
    secrets = [
        line.split()[2]
        for line in (TLS / meta["keylog"]).read_text().splitlines()
        if line and not line.startswith("#")
    ]
    base = [sys.executable, "-m", "kwire", "capture", str(TLS / meta["capture"])]
    base += ["-p", ",".join(map(str, meta["broker_ports"]))]
    out = tmp_path / "frames.parquet"
    done = subprocess.run(
        [*base, "--keylog", str(TLS / meta["keylog"]), "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "decrypted: TLS 1.3" in done.stdout
    text = done.stdout + done.stderr
    assert not [s for s in secrets if s in text]
    bad = tmp_path / "bad.keys"
    bad.write_text("# a comment\nCLIENT_RANDOM 00 11\n")
    done = subprocess.run(
        [*base, "--keylog", str(bad), "-o", str(tmp_path / "b.parquet")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert f"{bad} line 2" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run(
        [*base, "--keylog", str(tmp_path / "absent.keys"), "-o", str(tmp_path / "c.parquet")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2 and "absent.keys" in done.stderr
    assert "Traceback" not in done.stderr


def _frames(path: Path, meta: dict[str, Any]) -> Counter[tuple[Any, ...]]:
    table = capture.frames_table(path, meta["broker_ports"], keylog=_keylog(meta))
    return Counter(
        (r["connection_id"], r["direction"], r["frame"], r["api_key"], r["correlation_id"])
        for r in table.to_pylist()
    )


@pytest.mark.parametrize("size", [5, 300, 1448])
def test_tls_records_split_over_many_segments_read_the_same(tmp_path: Path, size: int) -> None:
    """Every TCP payload cut into segments of `size` bytes: TLS records and their headers
    straddle segments (5 bytes: every record header in a segment of its own), and the
    plaintext's frames are the same."""
    meta = next(m for m in METAS if m["scenario"] == "tls13-records")
    linktype, packets = read_packets(TLS / meta["capture"])
    assert linktype == 1
    cut = write_pcap(tmp_path / "cut.pcap", linktype, resegment(packets, size))
    assert _frames(cut, meta) == _frames(TLS / meta["capture"], meta)


@pytest.mark.parametrize(
    "how, reason",
    [
        # Not captured (a gap in the sequence numbers: TCP reassembly sees the hole).
        ("gap", "bytes of the TLS stream were not captured"),
        # Never sent as far as TCP can tell (later sequence numbers move back): the next
        # record is read where the lost one was, and does not authenticate.
        ("removed", "failed authentication"),
    ],
)
def test_a_lost_segment_stops_one_side_of_one_connection(
    tmp_path: Path, how: str, reason: str
) -> None:
    """A lost TCP segment in the middle of a TLS stream: what came before it on that side is
    decrypted, the rest of that side is one `encrypted` row saying why; every other
    connection is unaffected."""
    meta = next(m for m in METAS if m["scenario"] == "tls12-group")
    linktype, packets = read_packets(TLS / meta["capture"])
    payloads = data_packets(linktype, packets)
    # The middle payload packet of the capture's busiest connection.
    by_flow: dict[tuple[Any, ...], list[int]] = {}
    for i in payloads:
        by_flow.setdefault(flow(linktype, packets[i][1]), []).append(i)
    victim = max(by_flow.values(), key=len)
    index = victim[len(victim) // 2]
    kept = (
        packets[:index] + packets[index + 1 :] if how == "gap" else remove_segment(packets, index)
    )
    cut = write_pcap(tmp_path / "lost.pcap", linktype, kept)
    table = capture.frames_table(cut, meta["broker_ports"], keylog=_keylog(meta))
    enc = [r for r in table.to_pylist() if (r["error"] or "").startswith("encrypted")]
    assert len(enc) == 1
    assert reason in enc[0]["error"], enc[0]["error"]
    whole = _frames(TLS / meta["capture"], meta)
    got = _frames(cut, meta)
    others = {k: n for k, n in whole.items() if k[0] != enc[0]["connection_id"]}
    assert {k: n for k, n in got.items() if k[0] != enc[0]["connection_id"]} == others
    mine = sum(n for k, n in got.items() if k[0] == enc[0]["connection_id"] and k[2] is not None)
    assert 0 < mine < sum(n for k, n in whole.items() if k[0] == enc[0]["connection_id"])
