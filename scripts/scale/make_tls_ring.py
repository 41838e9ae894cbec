"""Make a TLS copy of a plaintext capture ring: the same Kafka traffic, each connection over TLS.

    .venv/bin/python scripts/scale/make_tls_ring.py out/ring_big          # -> out/ring_big_tls
    .venv/bin/python scripts/scale/make_tls_ring.py RING [--out DIR] [--tls {1.2,1.3}]
        [--suite NAME] [--max-files N] [--force]

RING is a ring made by scripts/scale/make_ring.py (RING/ring.pcap0, ring.pcap1, ... and
RING/ring.json, whose broker_ports say which end of a connection is the broker). It writes DIR
(default RING_tls) with:

- DIR/ring.pcap0, ...: one file per source file (the same packets cut at the same places, so
  similar sizes), the same link type, snaplen and timestamp resolution;
- DIR/keys.log: the NSS key log of every TLS session (what SSLKEYLOGFILE writes);
- DIR/ring.json: the source's, with capture.files and capture.bytes of the new files, read_with
  with --keylog, and "tls": the version and suite, what made it, the source ring and its files,
  and the counts below.

Read it with ``kwire capture DIR -p PORTS --keylog DIR/keys.log`` or ``kwire decode DIR -o OUT -p
PORTS --keylog DIR/keys.log``; ``python -m benchmarks.scale --ring DIR --keylog DIR/keys.log``
benchmarks it against the plaintext ring.

How: every TCP connection of the source to a broker port (by 4-tuple, in capture order; a SYN
starts a new one, a connection already open at the first packet starts at its first packet) gets
a real TLS session made with Python's ssl module over ssl.MemoryBIO pairs: the client context
logs its keys, the server has a self-signed certificate made at run time (RSA 2048, or P-256 for
an ECDSA suite). The end on a broker port is the server. The handshake's flights are inserted
as TCP segments right before the connection's first payload (timestamps a microsecond apart
just before it). Every source payload segment then goes through its side's SSLObject.write()
(so a segment becomes one or more TLS records) and the ciphertext replaces the payload:

- segmentation: each source segment carries up to its MSS of the side's pending ciphertext (the
  link's MTU from ring.json minus the IP and TCP headers: 1448 bytes on an MTU 1500 ring; 65535
  minus the headers on a coalesced one), and a segment with PSH, FIN or RST sends what is left
  in further segments of at most that size with the same timestamp (and so does the end of a
  file, so that each file carries exactly its source file's bytes). A coalesced ring thus keeps
  one segment per source segment but where the records' overhead pushes it past 64 kB; an MTU
  ring gets a few extra segments at the end of each write;
- TCP: sequence numbers are recomputed per direction for the new byte counts from the source's
  initial sequence numbers; an ack carries the peer's new position of the source byte it acked;
  IP total length and checksum and the TCP checksum are recomputed (valid, where a loopback
  capture's are not); Ethernet (or Linux cooked) headers, IP ids, TTLs, windows and TCP options
  are the source's;
- kept as they are: SYN and SYN-ACK segments, non-TCP packets, non-IPv4 packets and TCP
  connections between non-broker ports;
- dropped and counted: retransmitted bytes (only new bytes are encrypted; a segment with nothing
  new is dropped); refused and counted (the packet is not written): segments whose bytes the
  source lacks (snaplen-truncated, or after a gap in the stream).

TLS 1.3 (default) suites are set through an OpenSSL config file (Python's ssl module has no call
for them): the script re-runs itself with OPENSSL_CONF pointing at one. TLS 1.2 suites are set
with SSLContext.set_ciphers. Defaults: TLS_AES_256_GCM_SHA384 (1.3), ECDHE-RSA-AES256-GCM-SHA384
(1.2), what a Java broker with an RSA certificate prefers by default.

It streams: packets are read, rewritten and written one at a time; per connection only its two
SSL objects and a little TCP state are kept. out/ring_big (1.2 GB, coalesced, 56k packets) takes
about 5 s and 50 MB of memory; an MTU ring (20 times the packets) goes at about 40 MB/s.

Check a result: ``kwire capture RING -p PORTS --summary-json P`` and ``kwire capture DIR -p PORTS
--keylog DIR/keys.log --summary-json T`` give the same api_keys and errors, with every connection
"decrypted" under "tls" (a single later file read alone has connections whose handshake is in an
earlier file: those are `encrypted`, as they would be in any TLS capture cut that way). tshark:
``tshark -r DIR/ring.pcap0 -o tls.keylog_file:DIR/keys.log -d tcp.port==P,tls -d tls.port==P,kafka``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import struct
import sys
import tempfile
import time
from collections import Counter, deque
from pathlib import Path
from typing import IO, Any, Iterator

import dpkt

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scripts.tls_cert import self_signed  # noqa: E402

MASK = 0xFFFFFFFF
TH_FIN, TH_SYN, TH_RST, TH_PSH, TH_ACK = 0x01, 0x02, 0x04, 0x08, 0x10
DEFAULT_SUITES = {"1.3": "TLS_AES_256_GCM_SHA384", "1.2": "ECDHE-RSA-AES256-GCM-SHA384"}
TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")
CONF_ENV = "MAKE_TLS_RING_OPENSSL_CONF"  # set in the re-run: the config file to delete after use
CAPTURE_NAME = re.compile(r"\.(pcap|cap)\d*$")
LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL = 1, 113

# --- pcap files (read and written here: integer timestamps, the original record headers) ------

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 10**6),
    b"\xa1\xb2\xc3\xd4": (">", 10**6),
    b"\x4d\x3c\xb2\xa1": ("<", 10**9),
    b"\xa1\xb2\x3c\x4d": (">", 10**9),
}


class PcapIn:
    """A pcap file's records, one at a time: (timestamp in ticks, original length, data)."""

    def __init__(self, path: Path) -> None:
        self.f = open(path, "rb", buffering=1 << 20)
        head = self.f.read(24)
        if len(head) < 24 or head[:4] not in PCAP_MAGICS:
            raise SystemExit(f"{path}: not a pcap file (pcapng is not supported)")
        self.endian, self.scale = PCAP_MAGICS[head[:4]]
        self.header = head
        _, _, _, _, self.snaplen, self.linktype = struct.unpack(self.endian + "HHiIII", head[4:])
        self.rec = struct.Struct(self.endian + "IIII")

    def __iter__(self) -> Iterator[tuple[int, int, bytes]]:
        read, unpack, scale = self.f.read, self.rec.unpack, self.scale
        while True:
            h = read(16)
            if len(h) < 16:
                return
            sec, frac, caplen, wirelen = unpack(h)
            data = read(caplen)
            if len(data) < caplen:
                return  # a torn last record
            yield sec * scale + frac, wirelen, data

    def close(self) -> None:
        self.f.close()


class PcapOut:
    """Writes records with the source's global header (its snaplen raised to fit 64 kB)."""

    def __init__(self, path: Path, src: PcapIn) -> None:
        self.f: IO[bytes] = open(path, "wb", buffering=1 << 20)
        snaplen = max(src.snaplen, 262144)
        self.f.write(src.header[:16] + struct.pack(src.endian + "II", snaplen, src.linktype))
        self.rec = struct.Struct(src.endian + "IIII")
        self.scale = src.scale
        self.packets = 0
        self.last_ts = 0

    def write(self, ts: int, data: bytes, wirelen: int | None = None) -> None:
        ts = max(ts, self.last_ts)  # never out of order (inserted packets are clamped)
        self.last_ts = ts
        sec, frac = divmod(ts, self.scale)
        self.f.write(self.rec.pack(sec, frac, len(data), len(data) if wirelen is None else wirelen))
        self.f.write(data)
        self.packets += 1

    def close(self) -> None:
        self.f.close()


# --- TCP rewriting ----------------------------------------------------------------------------


def _csum_part(b: bytes) -> int:
    """Sum of the big-endian 16-bit words of `b` (even length), mod 0xffff."""
    return int.from_bytes(b, "big") % 0xFFFF


def tcp_checksum(ip: dpkt.ip.IP, tcp_head: bytes, payload: bytes) -> int:
    """The TCP checksum over the pseudo header, the header (its sum zero) and the payload."""
    n = len(tcp_head) + len(payload)
    pseudo = ip.src + ip.dst + struct.pack(">BBH", 0, 6, n)
    s = _csum_part(pseudo) + _csum_part(tcp_head)
    s += _csum_part(payload + b"\0" if len(payload) & 1 else payload)
    s %= 0xFFFF
    if s == 0 and (any(pseudo) or any(tcp_head) or any(payload)):
        s = 0xFFFF  # a one's complement sum of non-zero words is never +0
    return ~s & 0xFFFF


class Direction:
    """One direction of a connection: the source's and the new stream's positions."""

    __slots__ = (
        "base",
        "src_next",
        "wire",
        "written",
        "pending",
        "marks",
        "acked",
        "template",
        "fin",
        "last_ts",
    )

    def __init__(self) -> None:
        self.base: int | None = None  # initial sequence number (source and new alike)
        self.src_next = 0  # the source's next byte, relative to base (unwrapped)
        self.wire = 0  # the new stream's next byte on the wire, relative to base
        self.written = 0  # the new stream's bytes made so far (wire + pending)
        self.pending = bytearray()  # ciphertext made but not yet sent
        # (source position, new position) after each source segment, for mapping acks.
        self.marks: deque[tuple[int, int]] = deque()
        self.acked = 0  # the new position of the latest source ack mapped
        self.template: dpkt.Packet | None = None  # the last link-layer frame seen (parsed)
        self.fin = False
        self.last_ts = 0

    def start(self, base: int, consumed: int) -> None:
        self.base = base
        self.src_next = self.wire = self.written = self.acked = consumed
        self.marks.clear()

    def rel(self, seq: int) -> int:
        """A source sequence number relative to base, unwrapped around src_next."""
        assert self.base is not None
        d = (seq - self.base - self.src_next) & MASK
        return self.src_next + (d - (1 << 32) if d >= 1 << 31 else d)

    def new_ack(self, ack: int) -> int:
        """The new sequence number standing for the source's ack `ack` of this direction."""
        rel = self.rel(ack)
        marks = self.marks
        while marks and marks[0][0] <= rel:
            self.acked = marks.popleft()[1]
        assert self.base is not None
        return (self.base + min(self.acked, self.wire)) & MASK


class Conn:
    __slots__ = ("dirs", "server", "client_obj", "server_obj", "bios", "tls", "closed", "midstream")

    def __init__(self, server: int, midstream: bool) -> None:
        self.dirs = (Direction(), Direction())  # by the sending side: 0 = the key's first end
        self.server = server  # the side on a broker port
        self.tls = False  # handshake made
        self.closed = False
        self.midstream = midstream
        self.client_obj: Any = None
        self.server_obj: Any = None
        self.bios: Any = None


class Maker:
    def __init__(self, args: argparse.Namespace, ports: set[int], mtu: int, keylog: Path) -> None:
        import ssl

        self.ssl = ssl
        self.args = args
        self.ports = ports
        self.mtu = mtu
        self.conns: dict[tuple[bytes, int, bytes, int], Conn] = {}
        self.counts: Counter[str] = Counter()
        self.suite: str | None = None
        self.version: str | None = None
        self.out: PcapOut | None = None
        self.linktype = LINKTYPE_ETHERNET
        self.cctx, self.sctx = self._contexts(args.tls, args.suite, keylog)
        self.tick = 1  # one timestamp tick (set per file from its resolution)

    # -- TLS ---------------------------------------------------------------------------------

    def _contexts(self, version: str, suite: str, keylog: Path) -> tuple[Any, Any]:
        ssl = self.ssl
        tls_version = ssl.TLSVersion.TLSv1_3 if version == "1.3" else ssl.TLSVersion.TLSv1_2
        key_type = "ec" if "ECDSA" in suite else "rsa"
        cert_pem, key_pem = self_signed(key_type, ("kafka.ring.test",))
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        for ctx in (server, client):
            ctx.minimum_version = ctx.maximum_version = tls_version
            if version == "1.2":
                ctx.set_ciphers(suite)
        with tempfile.TemporaryDirectory(prefix="make-tls-ring-") as tmp:
            (Path(tmp) / "cert.pem").write_bytes(cert_pem)
            (Path(tmp) / "key.pem").write_bytes(key_pem)
            server.load_cert_chain(Path(tmp) / "cert.pem", Path(tmp) / "key.pem")
        client.check_hostname = False
        client.verify_mode = ssl.CERT_NONE
        client.keylog_filename = str(keylog)
        return client, server

    def handshake(self, conn: Conn, sni: str) -> list[tuple[int, bytes]]:
        """A new TLS session for `conn`: its flights as (sending side, bytes), in order."""
        ssl = self.ssl
        cin, cout, sin, sout = (ssl.MemoryBIO() for _ in range(4))
        c = self.cctx.wrap_bio(cin, cout, server_side=False, server_hostname=sni)
        s = self.sctx.wrap_bio(sin, sout, server_side=True)
        server, client = conn.server, 1 - conn.server
        flights: list[tuple[int, bytes]] = []
        done = [False, False]  # client, server

        def step(i: int, obj: Any) -> None:
            if not done[i]:
                try:
                    obj.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass

        for _ in range(10):
            step(0, c)
            data = cout.read()
            if data:
                flights.append((client, data))
                sin.write(data)
            step(1, s)
            data = sout.read()
            if data:
                flights.append((server, data))
                cin.write(data)
            if done[0] and done[1] and not cout.pending and not sout.pending:
                break
        if not (done[0] and done[1]):
            raise RuntimeError("the TLS handshake did not complete")
        suite, version = c.cipher()[0], c.version()
        if self.suite is None:
            self.suite, self.version = suite, version
            want = self.args.suite
            if self.args.tls == "1.3" and suite != want:
                raise SystemExit(f"negotiated {suite}, not {want}: the OpenSSL config was not read")
        conn.client_obj, conn.server_obj = c, s
        conn.bios = (cout, sout)  # outgoing of client, server
        self.counts[f"TLS sessions: {version} {suite}"] += 1
        self.counts["handshake bytes"] += sum(len(d) for _, d in flights)
        return flights

    def encrypt(self, conn: Conn, side: int, data: bytes) -> bytes:
        obj = conn.server_obj if side == conn.server else conn.client_obj
        bio = conn.bios[1] if side == conn.server else conn.bios[0]
        view = memoryview(data)
        while view:
            n = obj.write(view)
            view = view[n:]
        return bytes(bio.read())

    # -- packets -----------------------------------------------------------------------------

    def parse(self, data: bytes) -> tuple[Any, dpkt.ip.IP, dpkt.tcp.TCP] | None:
        """(link frame, IPv4, TCP) of a TCP/IPv4 packet, else None."""
        try:
            link: Any
            if self.linktype == LINKTYPE_ETHERNET:
                link = dpkt.ethernet.Ethernet(data)
            else:
                link = dpkt.sll.SLL(data)
        except (dpkt.UnpackError, struct.error):
            return None
        ip = link.data
        if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
            return None
        if ip.mf or ip.offset:
            return None
        return link, ip, ip.data

    def build(self, link: Any, seq: int, ack: int, flags: int, payload: bytes) -> bytes:
        """The frame `link` (a parsed template) with a new TCP seq, ack, flags and payload."""
        ip, tcp = link.data, link.data.data
        tcp.seq, tcp.ack, tcp.flags, tcp.sum = seq, ack, flags, 0
        head = tcp.pack_hdr() + bytes(tcp.opts)
        tcp.sum = tcp_checksum(ip, head, payload)
        tcp.data = payload
        ip.sum = 0  # dpkt recomputes the IP length and checksum (and leaves the TCP sum)
        ip.len = 0
        return bytes(link)

    def cap(self, link: Any) -> int:
        """The largest payload of a segment with this frame's headers."""
        ip, tcp = link.data, link.data.data
        heads = ip.hl * 4 + tcp.off * 4
        return (self.mtu if self.mtu else 65535) - heads

    def emit(
        self,
        conn: Conn,
        side: int,
        link: Any,
        flags: int,
        ts: int,
        flush: bool,
        ack: int | None = None,
    ) -> None:
        """Sends pending ciphertext of `side` in segments shaped like `link`: one of at most the
        MSS; with `flush`, everything in as many as it takes (`flags` on the last one). The ack
        is the peer's new position for the source ack of `link`, unless given."""
        d, peer = conn.dirs[side], conn.dirs[1 - side]
        assert self.out is not None and d.base is not None
        mss = self.cap(link)
        if ack is None:
            tcp = link.data.data
            ack = peer.new_ack(tcp.ack) if flags & TH_ACK and peer.base is not None else tcp.ack
        while True:
            chunk = bytes(d.pending[:mss])
            del d.pending[:mss]
            last = not d.pending or not flush
            f = flags if last else flags & ~(TH_FIN | TH_RST | TH_PSH)
            seq = (d.base + d.wire) & MASK
            self.out.write(ts, self.build(link, seq, ack, f, chunk))
            d.wire += len(chunk)
            self.counts["segments written"] += 1
            if last:
                break
        if flags & TH_FIN and not d.pending:
            d.wire += 1

    def insert_handshake(self, conn: Conn, ts: int) -> None:
        """The TLS handshake of `conn`, as segments just before `ts`."""
        assert self.out is not None
        server = conn.server
        # Templates: each side's last frame, or the other side's with the ends swapped.
        templates: list[Any] = [None, None]
        # A SYN's options are not a data segment's: the other side's frame, or no options.
        for side in (0, 1):
            t, other = conn.dirs[side].template, conn.dirs[1 - side].template
            if t is None or t.data.data.flags & TH_SYN:
                if other is not None and not other.data.data.flags & TH_SYN:
                    t = swapped(other, self.linktype)
                else:
                    t = swapped(other, self.linktype) if t is None else copy_frame(t)
                    t.data.data.opts, t.data.data.off = b"", 5
            templates[side] = copy_frame(t)  # a copy to rewrite freely
            if conn.dirs[side].base is None:
                conn.dirs[side].start(0, 0)
        sport = templates[server].data.data.sport
        flights = self.handshake(conn, f"kafka-{sport}.ring.test")
        segments: list[tuple[int, bytes]] = []
        for side, data in flights:
            mss = self.cap(templates[side])
            for i in range(0, len(data), mss):
                segments.append((side, data[i : i + mss]))
        t0 = ts - len(segments) * self.tick
        for i, (side, chunk) in enumerate(segments):
            d, peer = conn.dirs[side], conn.dirs[1 - side]
            assert d.base is not None and peer.base is not None
            seq = (d.base + d.wire) & MASK
            ack = (peer.base + peer.wire) & MASK
            self.out.write(t0 + i * self.tick, self.build(templates[side], seq, ack, 0x18, chunk))
            d.wire += len(chunk)
            d.written += len(chunk)
        for d in conn.dirs:
            # A source ack of the position before the handshake now acks the handshake too.
            d.marks.append((d.src_next, d.written))
        self.counts["handshake segments"] += len(segments)
        conn.tls = True

    def packet(self, ts: int, wirelen: int, data: bytes) -> None:
        out = self.out
        assert out is not None
        counts = self.counts
        parsed = self.parse(data)
        if parsed is None:
            counts["copied: not TCP over IPv4"] += 1
            out.write(ts, data, wirelen)
            return
        link, ip, tcp = parsed
        a, b = (ip.src, tcp.sport), (ip.dst, tcp.dport)
        if tcp.dport in self.ports:
            server_end = b
        elif tcp.sport in self.ports:
            server_end = a
        else:
            counts["copied: TCP between non-broker ports"] += 1
            out.write(ts, data, wirelen)
            return
        key = (*a, *b) if a <= b else (*b, *a)
        side = 0 if a <= b else 1
        server = side if server_end == a else 1 - side
        flags = tcp.flags
        conn = self.conns.get(key)
        if flags & TH_SYN and not flags & TH_ACK:
            d0 = conn.dirs[side] if conn is not None else None
            if conn is None or conn.closed or (d0 is not None and d0.base != tcp.seq):
                if conn is not None:
                    self.drop(conn)
                conn = self.conns[key] = Conn(server, midstream=False)
                counts["connections"] += 1
        elif conn is None:
            conn = self.conns[key] = Conn(server, midstream=True)
            counts["connections"] += 1
            counts["connections open at their first packet"] += 1
        d, peer = conn.dirs[side], conn.dirs[1 - side]
        d.template = link
        if flags & TH_SYN:
            if d.base is None or (not d.src_next <= 1 or d.base != tcp.seq):
                d.start(tcp.seq, 1)
            out.write(ts, data, wirelen)  # a SYN or SYN-ACK is the same in both
            if flags & TH_ACK and peer.base is None:
                peer.start(tcp.ack, 0)
            return
        if d.base is None:
            d.start(tcp.seq, 0)
        if flags & TH_ACK and peer.base is None:
            peer.start(tcp.ack, 0)
        payload = tcp.data
        caplen_short = wirelen - len(data)
        if caplen_short > 0 and payload:
            counts["refused: snaplen-truncated segments"] += 1
            counts["refused bytes"] += caplen_short
            return
        start = d.rel(tcp.seq)
        if payload:
            end = start + len(payload)
            if end <= d.src_next:
                counts["dropped: retransmitted segments"] += 1
                counts["dropped: retransmitted bytes"] += len(payload)
                return
            if start > d.src_next:
                counts["refused: segments after a gap"] += 1
                counts["refused bytes"] += end - d.src_next
                return
            if start < d.src_next:
                counts["dropped: retransmitted bytes"] += d.src_next - start
                payload = payload[d.src_next - start :]
            if conn.closed:
                counts["dropped: segments after a RST"] += 1
                return
            if not conn.tls:
                self.insert_handshake(conn, ts)
            ct = self.encrypt(conn, side, payload)
            counts["plaintext bytes"] += len(payload)
            counts["ciphertext bytes"] += len(ct)
            d.pending += ct
            d.written += len(ct)
            d.src_next = end
        elif flags & TH_FIN and start < d.src_next:
            counts["dropped: retransmitted segments"] += 1
            return
        if flags & TH_FIN:
            if d.fin:
                counts["dropped: retransmitted segments"] += 1
                return
            d.fin = True
            d.src_next += 1
            d.written += 1
        if payload or flags & TH_FIN:
            d.marks.append((d.src_next, d.written))
        sent = False
        if d.pending and (payload or flags & (TH_FIN | TH_RST)):
            # A RST goes alone after the data it would have cut (emit counts a FIN's number).
            data_flags = (flags & ~TH_RST) | (TH_PSH if flags & TH_RST else 0)
            self.emit(conn, side, link, data_flags, ts, bool(flags & (TH_PSH | TH_FIN | TH_RST)))
            sent = True
        if not sent or flags & TH_RST:
            # No new bytes: an ack, a window update, a keep-alive, a FIN or a RST alone.
            assert d.base is not None
            if flags & TH_FIN and not sent:
                seq = (d.base + d.wire) & MASK
                d.wire += 1
            else:
                off = start - d.src_next
                seq = (d.base + d.wire + (off if -1 <= off <= 0 else 0)) & MASK
            ack = peer.new_ack(tcp.ack) if flags & TH_ACK else tcp.ack
            pure = flags & ~TH_FIN if sent else flags
            out.write(ts, self.build(link, seq, ack, pure, b""))
            counts["segments written"] += 1
        d.last_ts = ts
        tcp.data = b""  # the template keeps the headers only
        if flags & TH_RST or (conn.dirs[0].fin and conn.dirs[1].fin):
            conn.closed = True
            conn.client_obj = conn.server_obj = conn.bios = None  # free the SSL objects

    def drop(self, conn: Conn) -> None:
        if any(d.pending for d in conn.dirs):
            self.counts["connections with unsent ciphertext at reuse"] += 1

    def flush_all(self) -> None:
        """At the end of a file: ciphertext still pending (its PSH not reached) goes out."""
        assert self.out is not None
        for conn in self.conns.values():
            for side, d in enumerate(conn.dirs):
                if d.pending and d.template is not None:
                    peer = conn.dirs[1 - side]
                    ack = ((peer.base or 0) + peer.wire) & MASK
                    flags = TH_ACK | TH_PSH
                    self.emit(conn, side, d.template, flags, d.last_ts, flush=True, ack=ack)
                    self.counts["flushed at the end of a file"] += 1


def copy_frame(link: Any) -> Any:
    """A parsed copy of a parsed frame (its IP length made right first)."""
    link.data.sum = 0
    return type(link)(bytes(link))


def swapped(link: Any, linktype: int) -> Any:
    """A copy of a frame with its two ends swapped (MACs, addresses, ports)."""
    t = copy_frame(link)
    if linktype == LINKTYPE_ETHERNET:
        t.src, t.dst = t.dst, t.src
    ip = t.data
    ip.src, ip.dst = ip.dst, ip.src
    tcp = ip.data
    tcp.sport, tcp.dport = tcp.dport, tcp.sport
    return t


# --- the run --------------------------------------------------------------------------------


def ring_files(ring: Path) -> list[Path]:
    files = [f for f in ring.iterdir() if f.is_file() and CAPTURE_NAME.search(f.name)]
    return sorted(files, key=lambda f: (len(f.name), f.name))


def reexec_with_conf(args: argparse.Namespace) -> None:
    """TLS 1.3 suites: re-run this script with OPENSSL_CONF naming a config that sets them."""
    if os.environ.get(CONF_ENV):
        return
    conf = tempfile.NamedTemporaryFile(
        "w", prefix="make-tls-ring-", suffix=".cnf", delete=False
    )  # deleted by the re-run once its contexts exist
    conf.write(
        "openssl_conf = openssl_init\n\n[openssl_init]\nssl_conf = ssl_section\n\n"
        "[ssl_section]\nsystem_default = system_default_section\n\n"
        f"[system_default_section]\nCiphersuites = {args.suite}\n"
    )
    conf.close()
    env = dict(os.environ, OPENSSL_CONF=conf.name, **{CONF_ENV: conf.name})
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]], env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ring", type=Path, help="the plaintext ring (a directory with ring.json)")
    parser.add_argument("--out", type=Path, help="the TLS ring to write (default RING_tls)")
    parser.add_argument("--tls", choices=("1.2", "1.3"), default="1.3", help="default 1.3")
    parser.add_argument(
        "--suite",
        help="cipher suite: for 1.3 one of " + ", ".join(TLS13_SUITES) + " (default "
        f"{DEFAULT_SUITES['1.3']}); for 1.2 an OpenSSL name (default {DEFAULT_SUITES['1.2']})",
    )
    parser.add_argument("--max-files", type=int, help="only the first N files of the ring")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")
    args = parser.parse_args()
    args.suite = args.suite or DEFAULT_SUITES[args.tls]
    if args.tls == "1.3" and args.suite not in TLS13_SUITES:
        parser.error(f"--suite for TLS 1.3: one of {', '.join(TLS13_SUITES)}")
    if args.tls == "1.3":
        reexec_with_conf(args)
    ring = args.ring
    out = args.out or ring.with_name(ring.name + "_tls")
    meta_path = ring / "ring.json"
    if not meta_path.exists():
        parser.error(f"{meta_path} not found (a ring made by scripts/scale/make_ring.py)")
    meta = json.loads(meta_path.read_text())
    ports = {int(p) for p in meta.get("broker_ports") or []}
    if not ports:
        parser.error(f"{meta_path} has no broker_ports")
    files = ring_files(ring)[: args.max_files]
    if not files:
        parser.error(f"no capture files in {ring}")
    if out.exists():
        if not args.force:
            parser.error(f"{out} exists (--force replaces it)")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    link = meta.get("link") or {}
    mtu = int(link["mtu"]) if link.get("mtu") and int(link["mtu"]) < 65535 else 0

    started = time.perf_counter()
    keylog = out / "keys.log"
    maker = Maker(args, ports, mtu, keylog)
    conf = os.environ.get(CONF_ENV)
    if conf:
        Path(conf).unlink(missing_ok=True)
    total = sum(f.stat().st_size for f in files)
    print(
        f"{ring} -> {out}: {len(files)} files, {total / 1e6:,.0f} MB, broker ports "
        f"{sorted(ports)}, TLS {args.tls} {args.suite}, segments up to "
        + (f"the MTU ({mtu})" if mtu else "64 kB (coalesced)"),
        flush=True,
    )
    written: list[dict[str, Any]] = []
    done_bytes, last_report = 0, time.perf_counter()
    for i, path in enumerate(files):
        src = PcapIn(path)
        if src.linktype not in (LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL):
            raise SystemExit(f"{path}: link type {src.linktype} (Ethernet or Linux cooked only)")
        maker.linktype = src.linktype
        maker.tick = 1
        target = out / path.name
        maker.out = PcapOut(target, src)
        read = 24
        for ts, wirelen, data in src:
            maker.packet(ts, wirelen, data)
            maker.counts["packets read"] += 1
            read += 16 + len(data)
            now = time.perf_counter()
            if now - last_report >= 5:
                last_report = now
                print(
                    f"  {path.name}: {read / 1e6:,.0f}/{path.stat().st_size / 1e6:,.0f} MB, "
                    f"{maker.counts['packets read']:,} packets, "
                    f"{maker.counts['connections']:,} connections, "
                    f"{(done_bytes + read) / 1e6 / (now - started):.1f} MB/s",
                    flush=True,
                )
        # A file carries exactly its source file's bytes: what is pending goes out before the cut.
        maker.flush_all()
        src.close()
        maker.out.close()
        done_bytes += path.stat().st_size
        written.append(
            {"file": target.name, "bytes": target.stat().st_size, "packets": maker.out.packets}
        )
        print(
            f"  {path.name} -> {target.name}: {written[-1]['bytes']:,} bytes, "
            f"{maker.out.packets:,} packets ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    took = time.perf_counter() - started

    maker.counts["packets written"] = sum(f["packets"] for f in written)
    counts = dict(sorted(maker.counts.items()))
    source_cap = meta.get("capture") or {}
    source_packets = {f.get("file"): f.get("packets") for f in source_cap.get("files") or []}
    new_meta = json.loads(json.dumps(meta))
    new_meta["capture"] = dict(source_cap, files=written, bytes=sum(f["bytes"] for f in written))
    ports_text = ",".join(str(p) for p in meta["broker_ports"])
    new_meta["read_with"] = f"kwire capture DIR -p {ports_text} --keylog DIR/keys.log"
    new_meta["tls"] = {
        "version": maker.version,
        "suite": maker.suite,
        "made_by": "scripts/scale/make_tls_ring.py",
        "made": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(took, 1),
        "source_ring": str(ring),
        "source_files": [
            {"file": f.name, "bytes": f.stat().st_size, "packets": source_packets.get(f.name)}
            for f in files
        ],
        "keylog": "keys.log",
        "segments": f"up to MTU {mtu}" if mtu else "coalesced (up to 64 kB)",
        "counts": counts,
    }
    (out / "ring.json").write_text(json.dumps(new_meta, indent=2) + "\n")

    print(f"done in {took:.1f} s ({done_bytes / 1e6 / took:.1f} MB/s): {out}")
    print(f"  TLS: {maker.version} {maker.suite}; key log {keylog}")
    for k, v in counts.items():
        print(f"  {k}: {v:,}")
    bad = sum(v for k, v in counts.items() if k.startswith("refused: "))
    if bad:
        print(f"WARNING: {bad} segments refused (the source lacks their bytes): see counts")


if __name__ == "__main__":
    main()
