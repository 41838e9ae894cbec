"""Counters for one capture run: what was read, what became rows, what went wrong and why."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .kafka import api_name


@dataclass
class Summary:
    files: list[dict[str, Any]] = field(default_factory=list)
    file_bytes: int = 0
    packets: int = 0
    tcp_segments: int = 0
    # Packets that carried no usable TCP segment, by reason (not IP, fragments, ...).
    skipped_packets: Counter[str] = field(default_factory=Counter)
    # Kafka connections with at least one row; and TCP connections given up on, by reason.
    connections: int = 0
    connections_ignored: Counter[str] = field(default_factory=Counter)
    direction_decided_by: Counter[str] = field(default_factory=Counter)
    frames: Counter[str] = field(default_factory=Counter)
    frame_bytes: Counter[str] = field(default_factory=Counter)
    # (direction, api_key, api_version) -> rows
    api: Counter[tuple[str, int, int]] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    retransmitted_bytes: int = 0
    missing_bytes: int = 0
    snaplen_bytes: int = 0
    bytes_before_capture_start: int = 0
    late_packets: int = 0
    # Connections dropped before they carried a byte, to bound the state (engine.MAX_QUIET).
    quiet_connections_dropped: int = 0
    # TLS connections by outcome, version and suite ("decrypted: TLS 1.3 TLS_AES_128_GCM_SHA256").
    tls: Counter[str] = field(default_factory=Counter)

    # -- for runs split over processes (the capture on Spark): state out, state in, merge --------

    _COUNTERS = (
        "skipped_packets",
        "connections_ignored",
        "direction_decided_by",
        "frames",
        "frame_bytes",
        "errors",
        "tls",
    )
    _INTS = (
        "file_bytes",
        "packets",
        "tcp_segments",
        "connections",
        "retransmitted_bytes",
        "missing_bytes",
        "snaplen_bytes",
        "bytes_before_capture_start",
        "late_packets",
        "quiet_connections_dropped",
    )

    def state(self) -> dict[str, Any]:
        """Everything, as JSON-friendly data that `from_state` reads back."""
        out: dict[str, Any] = {name: getattr(self, name) for name in self._INTS}
        out.update({name: dict(getattr(self, name)) for name in self._COUNTERS})
        out["api"] = [[d, k, v, n] for (d, k, v), n in sorted(self.api.items())]
        out["files"] = self.files
        return out

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Summary":
        s = cls()
        for name in cls._INTS:
            setattr(s, name, int(state.get(name, 0)))
        for name in cls._COUNTERS:
            getattr(s, name).update(state.get(name, {}))
        s.api.update({(d, k, v): n for d, k, v, n in state.get("api", [])})
        s.files = list(state.get("files", []))
        return s

    def merge(self, other: "Summary") -> None:
        """Adds another part of the same run (files are appended in the order given)."""
        for name in self._INTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in self._COUNTERS:
            getattr(self, name).update(getattr(other, name))
        self.api.update(other.api)
        self.files.extend(other.files)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly data."""
        per_api: dict[str, dict[str, Any]] = {}
        for (direction, key, version), n in sorted(self.api.items(), key=lambda kv: kv[0][1:]):
            entry = per_api.setdefault(
                str(key), {"name": api_name(key), "request": 0, "response": 0, "versions": {}}
            )
            entry[direction] += n
            v = entry["versions"].setdefault(str(version), {"request": 0, "response": 0})
            v[direction] += n
        return {
            "files": self.files,
            "file_bytes": self.file_bytes,
            "packets": self.packets,
            "tcp_segments": self.tcp_segments,
            "skipped_packets": dict(self.skipped_packets),
            "connections": self.connections,
            "connections_ignored": dict(self.connections_ignored),
            "direction_decided_by": dict(self.direction_decided_by),
            "frames": {d: self.frames[d] for d in ("request", "response")},
            "frame_bytes": {d: self.frame_bytes[d] for d in ("request", "response")},
            "api_keys": per_api,
            "errors": dict(sorted(self.errors.items())),
            "tls": dict(sorted(self.tls.items())),
            "tcp": {
                "retransmitted_bytes": self.retransmitted_bytes,
                "missing_bytes": self.missing_bytes,
                "snaplen_truncated_bytes": self.snaplen_bytes,
                "bytes_before_capture_start": self.bytes_before_capture_start,
                "late_packets": self.late_packets,
                "quiet_connections_dropped": self.quiet_connections_dropped,
            },
        }

    def format(self) -> str:
        """A short human-readable report (what the CLI prints)."""
        d = self.as_dict()
        lines = [
            f"files: {sum(1 for f in self.files if 'skipped' not in f)} ({self.file_bytes} bytes), "
            f"packets: {self.packets}, "
            f"TCP segments: {self.tcp_segments}",
            f"Kafka connections: {self.connections}"
            + (f" (direction by {dict(self.direction_decided_by)})" if self.connections else ""),
            f"frames: {self.frames['request']} requests ({self.frame_bytes['request']} bytes), "
            f"{self.frames['response']} responses ({self.frame_bytes['response']} bytes)",
        ]
        for f in self.files:
            note = f.get("error") or f.get("warning") or f.get("skipped")
            if note:
                lines.append(f"  {f['path']}: {note}")
        if d["api_keys"]:
            lines.append("per api key (requests/responses, versions):")
            for key, e in d["api_keys"].items():
                versions = ", ".join(
                    f"v{v}: {c['request']}/{c['response']}" for v, c in e["versions"].items()
                )
                lines.append(
                    f"  {key:>3} {e['name']:<28} {e['request']:>7} {e['response']:>7}  {versions}"
                )
        if self.errors:
            lines.append("rows with errors, by reason:")
            for reason, n in sorted(self.errors.items()):
                lines.append(f"  {n:>7}  {reason}")
        else:
            lines.append("rows with errors: none")
        if self.tls:
            lines.append("TLS connections:")
            for what, n in sorted(self.tls.items()):
                lines.append(f"  {n:>7}  {what}")
        if self.connections_ignored:
            lines.append(f"TCP connections ignored: {dict(self.connections_ignored)}")
        if self.skipped_packets:
            lines.append(f"packets without a usable TCP segment: {dict(self.skipped_packets)}")
        tcp = d["tcp"]
        if any(tcp.values()):
            lines.append("TCP: " + ", ".join(f"{k} {v}" for k, v in tcp.items() if v))
        return "\n".join(lines)
