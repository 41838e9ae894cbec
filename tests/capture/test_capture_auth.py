"""SASL frames carry credentials: by default their bytes never leave capture, but their rows do."""

from __future__ import annotations

from pathlib import Path

from capture_helpers import by_name, capture_path, read_packets, rows, write_pcap


def _as_sasl(tmp_path: Path) -> Path:
    """A real capture whose first ApiVersions v0 request is relabelled SaslHandshake (17) v0."""
    linktype, packets = read_packets(capture_path(by_name("mock_group_classic.pcap")))
    needle = bytes.fromhex("0012 0000")  # api key 18, version 0, right after the length prefix
    for i, (ts, data) in enumerate(packets):
        at = data.find(needle)
        if at >= 4 and data[at - 4 : at - 2] == b"\x00\x00":
            packets[i] = (ts, data[:at] + bytes.fromhex("0011") + data[at + 2 :])
            break
    else:
        raise AssertionError("no ApiVersions v0 request in the capture")
    return write_pcap(tmp_path / "sasl.pcap", linktype, packets)


def test_sasl_rows_are_kept_without_their_bytes(tmp_path: Path) -> None:
    path = _as_sasl(tmp_path)
    everything = rows(path)
    sasl = [r for r in everything if r["api_key"] == 17]
    assert {r["direction"] for r in sasl} == {"request", "response"}
    for r in sasl:
        assert r["frame"] is None and r["frame_length"] > 0
        assert "redacted: SASL frame bytes dropped" in r["error"]
    assert len(everything) == len(rows(capture_path(by_name("mock_group_classic.pcap"))))


def test_keep_auth_bytes_keeps_them(tmp_path: Path) -> None:
    sasl = [r for r in rows(_as_sasl(tmp_path), keep_auth_bytes=True) if r["api_key"] == 17]
    assert sasl and all(r["frame"] is not None and not r["error"] for r in sasl)


def test_cli_redacts_unless_asked(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from kwire.cli import main

    source = str(_as_sasl(tmp_path))
    for flags, kept in (([], False), (["--keep-auth-bytes"], True)):
        out = tmp_path / f"f{len(flags)}.parquet"
        assert main(["capture", source, "-o", str(out), "-q", *flags]) == 0
        sasl = [r for r in pq.read_table(out).to_pylist() if r["api_key"] == 17]
        assert sasl and all((r["frame"] is not None) == kept for r in sasl)
