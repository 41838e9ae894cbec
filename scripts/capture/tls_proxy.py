"""A TLS-terminating proxy in front of librdkafka's mock cluster (which speaks plaintext only).

One TLS listener per mock broker. Each accepted connection is decrypted with an `ssl` server
context and relayed to the matching mock broker in plaintext. The proxy reads the client's
request frames (4-byte length, int16 api key, int16 api version, int32 correlation id) so that
it knows which api each response answers; the responses that advertise broker addresses
(Metadata, FindCoordinator, DescribeCluster) are decoded with kwire's generated codecs, their
mock ports replaced by the proxy's TLS ports, and encoded again: the clients then connect to the
proxy only. Everything else passes through byte for byte.

For every TLS connection the proxy notes what its server side negotiated (version, cipher,
whether the session was resumed) and the client id of the first request.
"""

from __future__ import annotations

import asyncio
import ctypes
import ssl
import struct
import sys
import threading
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from generated import decode_response, encode_response  # noqa: E402
from scripts.tls_cert import self_signed  # noqa: E402

# Responses that carry broker addresses: Metadata, FindCoordinator, DescribeCluster.
ADDRESS_APIS = (3, 10, 60)


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed RSA certificate for localhost / 127.0.0.1, made now (never committed)."""
    cert, key = self_signed("rsa", ("localhost",), ("127.0.0.1",))
    cert_path, key_path = directory / "proxy-cert.pem", directory / "proxy-key.pem"
    cert_path.write_bytes(cert)
    key_path.write_bytes(key)
    return cert_path, key_path


def _rewrite_ports(obj: Any, ports: dict[int, int]) -> int:
    """Replaces every `port` field holding a mock port, anywhere in a decoded message."""
    changed = 0
    if isinstance(obj, list):
        for item in obj:
            changed += _rewrite_ports(item, ports)
    elif is_dataclass(obj):
        for f in fields(obj):
            value = getattr(obj, f.name)
            if f.name == "port" and isinstance(value, int) and value in ports:
                setattr(obj, f.name, ports[value])
                changed += 1
            elif isinstance(value, list) or is_dataclass(value):
                changed += _rewrite_ports(value, ports)
    return changed


def _client_id(body: bytes) -> str | None:
    """The client id of a request header v1+ (every client sends one after ApiVersions v0)."""
    if len(body) < 10:
        return None
    (n,) = struct.unpack_from(">h", body, 8)
    return None if n < 0 else body[10 : 10 + n].decode(errors="replace")


# CPython 3.11's _ssl._SSLSocket: PyObject_HEAD, a weakref to the socket, then the SSL pointer.
_SSL_POINTER_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p) + ctypes.sizeof(ctypes.c_void_p)


def ssl_pointer(obj: Any) -> int:
    """The OpenSSL SSL* of an SSLObject or SSLSocket (to call libssl functions Python lacks)."""
    inner = obj._sslobj
    return ctypes.c_void_p.from_address(id(inner) + _SSL_POINTER_OFFSET).value or 0


def libssl() -> ctypes.CDLL:
    lib = ctypes.CDLL("libssl.so.3")
    lib.SSL_version.argtypes = [ctypes.c_void_p]
    lib.SSL_key_update.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.SSL_get_key_update_type.argtypes = [ctypes.c_void_p]
    return lib


class Proxy:
    """TLS listeners (tls port -> mock port) run on an asyncio loop in a thread of their own."""

    def __init__(
        self,
        routes: dict[int, int],
        cert: Path,
        key: Path,
        tls_max: ssl.TLSVersion | None = None,
        keyupdate_after: int | None = None,
        keyupdate_clients: str = "",
    ) -> None:
        self.routes = routes
        self.ports = {mock: tls for tls, mock in routes.items()}
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(str(cert), str(key))
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if tls_max is not None:
            self.ctx.maximum_version = tls_max
        # TLS 1.2 suites are chosen by the clients (each offers only its own).
        self.ctx.set_ciphers("ECDHE+AESGCM:ECDHE+CHACHA20")
        self.connections: list[dict[str, Any]] = []
        # TLS 1.3: after this many responses on a connection, ask for a KeyUpdate (both sides).
        self.keyupdate_after = keyupdate_after
        self.keyupdate_clients = keyupdate_clients  # client id prefix of the connections to re-key
        self.key_updates = 0
        self._lib = libssl() if keyupdate_after else None
        self.rewritten = 0
        self.errors: list[str] = []
        self.trailing: list[str] = []
        self.loop = asyncio.new_event_loop()
        self._servers: list[asyncio.base_events.Server] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tls-proxy", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise SystemExit("the TLS proxy did not start")

    def stop(self) -> None:
        async def close() -> None:
            for s in self._servers:
                s.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in others:
                t.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        def serving(tls_port: int, mock_port: int) -> Any:
            async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
                await self._serve(r, w, tls_port, mock_port)

            return serve

        async def listen() -> None:
            for tls_port, mock_port in self.routes.items():
                self._servers.append(
                    await asyncio.start_server(
                        serving(tls_port, mock_port),
                        "127.0.0.1",
                        tls_port,
                        ssl=self.ctx,
                    )
                )

        self.loop.run_until_complete(listen())
        self._ready.set()
        self.loop.run_forever()

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        tls_port: int,
        mock_port: int,
    ) -> None:
        tls = writer.get_extra_info("ssl_object")
        peer = writer.get_extra_info("peername")
        info: dict[str, Any] = {
            "listener_port": tls_port,
            "client_port": peer[1],
            "client_id": None,
            "version": tls.version(),
            "cipher": (tls.cipher() or ("",))[0],
            "session_reused": tls.session_reused,
            "requests": 0,
        }
        self.connections.append(info)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", mock_port)
        except OSError as e:
            self.errors.append(f"mock broker {mock_port}: {e}")
            writer.close()
            return
        pending: dict[int, tuple[int, int]] = {}
        answered = 0

        async def requests() -> None:
            while True:
                head = await reader.readexactly(4)
                body = await reader.readexactly(struct.unpack(">i", head)[0])
                key, version, corr = struct.unpack_from(">hhi", body)
                pending[corr] = (key, version)
                if info["client_id"] is None:
                    info["client_id"] = _client_id(body)
                info["requests"] += 1
                up_writer.write(head + body)
                await up_writer.drain()

        async def responses() -> None:
            nonlocal answered
            while True:
                head = await up_reader.readexactly(4)
                body = await up_reader.readexactly(struct.unpack(">i", head)[0])
                (corr,) = struct.unpack_from(">i", body)
                key, version = pending.pop(corr, (-1, -1))
                frame = head + body
                if key in ADDRESS_APIS:
                    frame = self._rewrite(body, key, version) or frame
                answered += 1
                if (
                    self._lib is not None
                    and answered == (self.keyupdate_after or 0) + 1
                    and (info["client_id"] or "").startswith(self.keyupdate_clients)
                ):
                    # SSL_KEY_UPDATE_REQUESTED: this write carries our KeyUpdate first, and the
                    # client answers with its own.
                    if self._lib.SSL_key_update(ssl_pointer(tls), 1) == 1:
                        self.key_updates += 1
                        info["key_update_before_response"] = answered
                writer.write(frame)
                await writer.drain()

        tasks = [asyncio.ensure_future(requests()), asyncio.ensure_future(responses())]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in tasks:
            t.cancel()
        for w in (up_writer, writer):
            try:
                w.close()
            except Exception:  # noqa: BLE001 - the peer may be gone already
                pass

    def _rewrite(self, body: bytes, key: int, version: int) -> bytes | None:
        """The response with its mock ports replaced. The message is decoded (tolerantly: the
        mock's MetadataResponse v13 ends with a byte more than the schema), encoded again as
        decoded and as rewritten; the rewritten encoding goes out only if the plain one gives
        back the original bytes, and whatever followed the message is kept as it was."""
        try:
            header, message = decode_response(body, key, version, tolerant=True)
            before = encode_response(header, message, version)[4:]
            if body[: len(before)] != before:
                self.errors.append(f"api {key} v{version}: not re-encoded the same; passed as is")
                return None
            if not _rewrite_ports(message, self.ports):
                return None
            after = encode_response(header, message, version)[4:] + body[len(before) :]
            if len(body) != len(before):
                self.trailing.append(f"api {key} v{version}: {body[len(before):].hex()}")
            self.rewritten += 1
            return struct.pack(">i", len(after)) + after
        except Exception as e:  # noqa: BLE001 - noted; the frame then passes unchanged
            self.errors.append(f"rewrite api {key} v{version}: {type(e).__name__}: {e}")
            return None
