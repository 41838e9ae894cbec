"""TLS decryption with NSS key logs (kwire.capture.tls), against real TLS from OpenSSL.

The ground truth is an independent implementation: Python's `ssl` module (OpenSSL) runs both ends
of each connection in process over `ssl.MemoryBIO` pairs, the client logging its secrets to a key
log file; every byte each side's outgoing BIO produced is exactly that side's TCP stream. The
streams are fed to `TlsSession` in the order they were produced (whole and in random small pieces)
and the plaintext must equal what the application wrote. TLS 1.3 suites other than OpenSSL's first
choice are forced with an OPENSSL_CONF file in a subprocess (Python cannot set TLS 1.3 suites);
KeyUpdate is driven through the `openssl s_client` / `s_server` commands over a recording relay.
"""

from __future__ import annotations

import os
import pickle
import random
import re
import select
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire.capture.tls import (
    MAX_RECORD,
    KeyLog,
    KeyLogError,
    TlsSession,
    hkdf_expand_label,
    looks_like_tls,
)

REPO = Path(__file__).resolve().parents[2]
from scripts.tls_cert import self_signed  # noqa: E402

OP_NO_ENCRYPT_THEN_MAC = 1 << 19  # SSL_OP_NO_ENCRYPT_THEN_MAC (not exported by Python's ssl)
OPENSSL = "/usr/bin/openssl"

# ---------------------------------------------------------------------------------------------
# Real TLS connections, in process
# ---------------------------------------------------------------------------------------------


def make_cert(directory: Path, kind: str) -> tuple[str, str]:
    cert, key = self_signed(kind, ("kwire.test",))
    cert_path, key_path = directory / f"{kind}.crt", directory / f"{kind}.key"
    cert_path.write_bytes(cert)
    key_path.write_bytes(key)
    return str(cert_path), str(key_path)


def script(seed: int = 1) -> list[tuple[int, bytes]]:
    """Application writes: (side, bytes). Sizes around and over the 16 kB record limit, and many
    small writes (one record each)."""
    rng = random.Random(seed)
    out: list[tuple[int, bytes]] = [(0, b"hello"), (1, rng.randbytes(40_000))]
    out += [(0, rng.randbytes(16_384)), (1, rng.randbytes(16_385)), (0, rng.randbytes(70_001))]
    out += [(rng.randrange(2), rng.randbytes(rng.randrange(1, 120))) for _ in range(300)]
    out += [(1, b"bye")]
    return out


@dataclass
class Conversation:
    chunks: list[tuple[int, bytes]]  # (side, bytes) in the order the two ends produced them
    sent: list[bytes]  # the plaintext each side wrote
    cipher: str
    version: str
    reused: bool
    session: Any = None
    received: list[bytes] = field(default_factory=list)


def _drain(obj: ssl.SSLObject, sink: bytearray) -> None:
    while True:
        try:
            data = obj.read(1 << 17)
        except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
            return
        if not data:
            return
        sink += data


def converse(
    client_ctx: ssl.SSLContext,
    server_ctx: ssl.SSLContext,
    writes: list[tuple[int, bytes]],
    session: Any = None,
) -> Conversation:
    bios = [ssl.MemoryBIO() for _ in range(4)]
    client = client_ctx.wrap_bio(bios[0], bios[1], server_hostname="kwire.test", session=session)
    server = server_ctx.wrap_bio(bios[2], bios[3], server_side=True)
    ends = (client, server)
    chunks: list[tuple[int, bytes]] = []
    received = [bytearray(), bytearray()]

    def pump() -> None:
        moved = True
        while moved:
            moved = False
            for side, out_bio, peer_in in ((0, bios[1], bios[2]), (1, bios[3], bios[0])):
                data = out_bio.read()
                if data:
                    chunks.append((side, data))
                    peer_in.write(data)
                    moved = True

    for _ in range(20):
        done = True
        for end in ends:
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                done = False
        pump()
        if done:
            break
    else:
        raise AssertionError("the handshake did not finish")
    # TLS 1.3 session tickets arrive after the handshake: the client reads them.
    _drain(client, received[0])
    pump()
    sent = [bytearray(), bytearray()]
    for side, data in writes:
        assert ends[side].write(data) == len(data)
        sent[side] += data
        pump()
        _drain(ends[1 - side], received[1 - side])
    saved = client.session
    for end in ends:
        try:
            end.unwrap()
        except (ssl.SSLWantReadError, ssl.SSLError):
            pass
        pump()
    assert bytes(received[1]) == bytes(sent[0]) and bytes(received[0]) == bytes(sent[1])
    cipher = client.cipher()
    assert cipher is not None
    return Conversation(
        chunks,
        [bytes(sent[0]), bytes(sent[1])],
        cipher[0],
        client.version() or "",
        client.session_reused,
        saved,
        [bytes(r) for r in received],
    )


def contexts(
    cert: tuple[str, str],
    keylog: Path,
    version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3,
    ciphers: str | None = None,
) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(*cert)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    client.keylog_filename = str(keylog)
    for ctx in (server, client):
        ctx.maximum_version = version
        ctx.minimum_version = version
        if ciphers is not None:
            ctx.set_ciphers(ciphers)
    return client, server


def decrypt(
    chunks: list[tuple[int, bytes]],
    keylog: KeyLog,
    rng: random.Random | None = None,
    session: TlsSession | None = None,
) -> tuple[TlsSession, list[bytes]]:
    """Feeds the streams in production order (each chunk cut in random pieces with `rng`)."""
    session = session if session is not None else TlsSession(keylog)
    out = [bytearray(), bytearray()]
    ts = 0
    for side, data in chunks:
        pieces = [data]
        if rng is not None:
            pieces = []
            at = 0
            while at < len(data):
                n = rng.choice((1, 2, 5, 17, 300, 1460, 4000, 20000))
                pieces.append(data[at : at + n])
                at += n
        for piece in pieces:
            ts += 1
            for s, plain, t in session.feed(side, piece, ts):
                assert s == side and t == ts and plain
                out[s] += plain
            for st_ in session._sides:
                assert len(st_.buf) < 5 + MAX_RECORD
    return session, [bytes(out[0]), bytes(out[1])]


def check(conv: Conversation, keylog: KeyLog, version: str, suite: str) -> TlsSession:
    for rng in (None, random.Random(7)):
        session, plain = decrypt(conv.chunks, keylog, rng)
        assert session.failure is None, session.failure
        assert session.version == version
        assert session.cipher_suite == suite
        assert plain == conv.sent
        assert session.decrypted
        assert sum(session.app_bytes) > sum(map(len, conv.sent))
    return session


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    directory = tmp_path_factory.mktemp("certs")
    return {"rsa": make_cert(directory, "rsa"), "ec": make_cert(directory, "ec")}


@pytest.fixture
def keylog_path(tmp_path: Path) -> Path:
    return tmp_path / "keys.log"


# ---------------------------------------------------------------------------------------------
# TLS 1.3
# ---------------------------------------------------------------------------------------------


def test_tls13_default_suite(certs: dict[str, tuple[str, str]], keylog_path: Path) -> None:
    client, server = contexts(certs["rsa"], keylog_path)
    conv = converse(client, server, script())
    assert (conv.cipher, conv.version) == ("TLS_AES_256_GCM_SHA384", "TLSv1.3")
    keylog = KeyLog.load([str(keylog_path)])
    assert len(keylog) == 1
    session = check(conv, keylog, "TLS 1.3", "TLS_AES_256_GCM_SHA384")
    assert session.client_random is not None and session.client_random in keylog
    assert session.skipped_records == [0, 0]


def _forced_suite_main(suite: str, cert: str, key: str, out: str) -> None:
    """Runs in a subprocess whose OPENSSL_CONF allows only `suite` for TLS 1.3."""
    keylog = Path(out + ".keys")
    client, server = contexts((cert, key), keylog)
    conv = converse(client, server, script(3))
    result = {"chunks": conv.chunks, "sent": conv.sent, "cipher": conv.cipher}
    result["keylog"] = keylog.read_bytes()
    Path(out).write_bytes(pickle.dumps(result))


FORCED = ("TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_256_GCM_SHA384")


@pytest.fixture(scope="module")
def forced_suites(
    certs: dict[str, tuple[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    directory = tmp_path_factory.mktemp("forced")
    procs = {}
    for suite in FORCED:
        conf = directory / f"{suite}.cnf"
        conf.write_text(
            "openssl_conf = openssl_init\n[openssl_init]\nssl_conf = ssl_sect\n"
            "[ssl_sect]\nsystem_default = system_default_sect\n"
            f"[system_default_sect]\nCiphersuites = {suite}\n"
        )
        env = dict(os.environ, OPENSSL_CONF=str(conf), PYTHONPATH=str(REPO))
        out = str(directory / f"{suite}.pickle")
        cmd = [sys.executable, __file__, suite, *certs["rsa"], out]
        procs[suite] = (subprocess.Popen(cmd, env=env, cwd=REPO), out)
    results = {}
    for suite, (proc, out) in procs.items():
        assert proc.wait(60) == 0
        results[suite] = pickle.loads(Path(out).read_bytes())
    return results


@pytest.mark.parametrize("suite", FORCED)
def test_tls13_each_suite(forced_suites: dict[str, dict[str, Any]], suite: str) -> None:
    result = forced_suites[suite]
    assert result["cipher"] == suite  # the suite OpenSSL negotiated
    conv = Conversation(result["chunks"], result["sent"], suite, "TLSv1.3", False)
    check(conv, KeyLog.parse(result["keylog"], "keys.log"), "TLS 1.3", suite)


def test_tls13_hello_retry_request(certs: dict[str, tuple[str, str]], keylog_path: Path) -> None:
    client, server = contexts(certs["rsa"], keylog_path)
    # The client's first key share is X25519; a server that takes only P-384 asks again.
    server.set_ecdh_curve("secp384r1")
    conv = converse(client, server, script(4))
    session = check(conv, KeyLog.load([str(keylog_path)]), "TLS 1.3", conv.cipher)
    assert session.hello_retry


def test_tls13_resumption(certs: dict[str, tuple[str, str]], keylog_path: Path) -> None:
    client, server = contexts(certs["rsa"], keylog_path)
    first = converse(client, server, script(5))
    assert first.session is not None and not first.reused
    second = converse(client, server, script(6), session=first.session)
    assert second.reused
    keylog = KeyLog.load([str(keylog_path)])
    assert len(keylog) == 2
    check(first, keylog, "TLS 1.3", first.cipher)
    check(second, keylog, "TLS 1.3", second.cipher)


def test_tls13_only_traffic_secrets(certs: dict[str, tuple[str, str]], keylog_path: Path) -> None:
    """Loggers that write only the application traffic secrets: the encrypted handshake records
    are skipped until one authenticates with the application key."""
    client, server = contexts(certs["rsa"], keylog_path)
    conv = converse(client, server, script(8))
    lines = [
        line
        for line in keylog_path.read_text().splitlines()
        if "HANDSHAKE_TRAFFIC_SECRET" not in line
    ]
    session = check(conv, KeyLog.parse("\n".join(lines)), "TLS 1.3", conv.cipher)
    assert session.skipped_records[0] >= 1 and session.skipped_records[1] >= 1


# ---------------------------------------------------------------------------------------------
# KeyUpdate, from the openssl command line tools over a recording TCP relay
# ---------------------------------------------------------------------------------------------


class Relay:
    """Accepts one connection, connects it to `port` and records every byte both ways."""

    def __init__(self, port: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target = port
        self.chunks: list[tuple[int, bytes]] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.listener.settimeout(10)
        a, _ = self.listener.accept()
        b = socket.create_connection(("127.0.0.1", self.target))
        socks = {a: (0, b), b: (1, a)}
        open_ = set(socks)
        while open_:
            ready, _, _ = select.select(list(open_), [], [], 10)
            if not ready:
                break
            for s in ready:
                side, peer = socks[s]
                data = s.recv(65536)
                if not data:
                    open_.discard(s)
                    try:
                        peer.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    continue
                with self.lock:
                    self.chunks.append((side, data))
                peer.sendall(data)
        a.close()
        b.close()

    def count(self, side: int) -> int:
        with self.lock:
            return sum(1 for s, _ in self.chunks if s == side)


def _wait(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.01)


@pytest.mark.skipif(not os.path.exists(OPENSSL), reason="no openssl command")
def test_tls13_key_update_openssl_cli(certs: dict[str, tuple[str, str]], tmp_path: Path) -> None:
    keylog_path = tmp_path / "keys.log"
    cert, key = certs["rsa"]
    server = subprocess.Popen(
        [OPENSSL, "s_server", "-accept", "127.0.0.1:0", "-cert", cert, "-key", key, "-tls1_3"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    client: subprocess.Popen[bytes] | None = None
    try:
        assert server.stdout is not None
        port = 0
        for _ in range(20):
            m = re.search(rb"ACCEPT .*:(\d+)", server.stdout.readline())
            if m:
                port = int(m.group(1))
                break
        assert port
        relay = Relay(port)
        client = subprocess.Popen(
            [OPENSSL, "s_client", "-connect", f"127.0.0.1:{relay.port}", "-tls1_3"]
            + ["-keylogfile", str(keylog_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait(lambda: relay.count(0) >= 2)  # the client's Finished: the handshake is done

        def type_(proc: subprocess.Popen[bytes], line: bytes, side: int) -> None:
            n = relay.count(side)
            assert proc.stdin is not None
            proc.stdin.write(line)
            proc.stdin.flush()
            _wait(lambda: relay.count(side) > n)

        # "k": KeyUpdate; "K": KeyUpdate with update_requested (the peer updates too).
        type_(client, b"hello from client\n", 0)
        type_(server, b"hello from server\n", 1)
        type_(client, b"k\n", 0)
        type_(client, b"after k\n", 0)
        type_(client, b"K\n", 0)
        type_(server, b"server after K\n", 1)
        type_(server, b"k\n", 1)
        type_(server, b"server after k\n", 1)
        type_(client, b"client after all\n", 0)
        time.sleep(0.1)  # lets s_client read what the server sent (its updates get logged)
        type_(client, b"Q\n", 0)
        client.wait(10)
        relay.thread.join(10)
    finally:
        for proc in (client, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    text = keylog_path.read_text()
    assert "CLIENT_TRAFFIC_SECRET_0" in text
    session, plain = decrypt(relay.chunks, KeyLog.parse(text, "keys.log"), random.Random(3))
    assert session.failure is None, session.failure
    assert plain == [
        b"hello from client\nafter k\nclient after all\n",
        b"hello from server\nserver after K\nserver after k\n",
    ]
    # The client updated its keys twice ("k", then "K"); the server at least once (when asked by
    # "K", and for its own "k" unless that merged with the pending requested one, which depends
    # on timing). This OpenSSL also logs each updated secret the client saw (*_TRAFFIC_SECRET_N,
    # a label KeyLog skips): the chain derived here with "traffic upd" must match OpenSSL's.
    secrets = KeyLog.parse(text).secrets(session.client_random or b"") or {}
    assert session.cipher_suite == "TLS_AES_256_GCM_SHA384"
    for side, who in enumerate(("CLIENT", "SERVER")):
        logged = [
            line.split()[2]
            for line in text.splitlines()
            if line.startswith(f"{who}_TRAFFIC_SECRET_N ")
        ]
        chain = [secrets[f"{who}_TRAFFIC_SECRET_0"]]
        for _ in range(3):
            chain.append(hkdf_expand_label("sha384", chain[-1], b"traffic upd", b"", 48))
        assert logged == [c.hex() for c in chain[1 : 1 + len(logged)]]
        assert logged or side == 1  # the client logs its own updates as it sends them
        keys = session._sides[side].keys
        assert keys is not None
        updates = chain.index(getattr(keys, "secret"))
        assert updates == 2 if side == 0 else updates >= 1


def test_hkdf_expand_label_rfc8448() -> None:
    """HKDF-Expand-Label builds the HkdfLabel of RFC 8446 7.1 (checked against RFC 8448's
    simple 1-RTT handshake: the server handshake key and IV)."""
    secret = bytes.fromhex(
        "b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38"
    )  # RFC 8448 section 3, server_handshake_traffic_secret
    assert hkdf_expand_label("sha256", secret, b"key", b"", 16).hex() == (
        "3fce516009c21727d0f2e4e86ee403bc"
    )
    assert hkdf_expand_label("sha256", secret, b"iv", b"", 12).hex() == ("5d313eb2671276ee13000b30")


# ---------------------------------------------------------------------------------------------
# TLS 1.2
# ---------------------------------------------------------------------------------------------

TLS12 = [
    ("ECDHE-RSA-AES128-GCM-SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "rsa", 0),
    ("ECDHE-RSA-AES256-GCM-SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "rsa", 0),
    ("ECDHE-RSA-CHACHA20-POLY1305", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "rsa", 0),
    ("ECDHE-ECDSA-AES128-GCM-SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ec", 0),
    ("ECDHE-ECDSA-CHACHA20-POLY1305", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ec", 0),
    ("AES256-GCM-SHA384", "TLS_RSA_WITH_AES_256_GCM_SHA384", "rsa", 0),
    # CBC: OpenSSL negotiates encrypt-then-MAC (RFC 7366) unless told not to.
    ("ECDHE-RSA-AES128-SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "rsa", 0),
    ("ECDHE-RSA-AES128-SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "rsa", OP_NO_ENCRYPT_THEN_MAC),
    ("ECDHE-RSA-AES256-SHA384", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "rsa", 0),
    (
        "ECDHE-RSA-AES256-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
        "rsa",
        OP_NO_ENCRYPT_THEN_MAC,
    ),
    ("AES128-SHA256", "TLS_RSA_WITH_AES_128_CBC_SHA256", "rsa", OP_NO_ENCRYPT_THEN_MAC),
]


def tls12(
    certs: dict[str, tuple[str, str]], keylog_path: Path, openssl_name: str, cert: str, opts: int
) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    client, server = contexts(
        certs[cert], keylog_path, ssl.TLSVersion.TLSv1_2, openssl_name + ":@SECLEVEL=0"
    )
    client.options |= opts
    return client, server


@pytest.mark.parametrize("openssl_name,iana,cert,opts", TLS12)
def test_tls12_suites(
    certs: dict[str, tuple[str, str]],
    keylog_path: Path,
    openssl_name: str,
    iana: str,
    cert: str,
    opts: int,
) -> None:
    client, server = tls12(certs, keylog_path, openssl_name, cert, opts)
    conv = converse(client, server, script(9))
    assert (conv.cipher, conv.version) == (openssl_name, "TLSv1.2")
    session = check(conv, KeyLog.load([str(keylog_path)]), "TLS 1.2", iana)
    if "CBC" in iana:
        keys = session._sides[0].keys
        assert getattr(keys, "etm") == (opts == 0)  # encrypt-then-MAC was negotiated or not


@pytest.mark.parametrize("openssl_name", ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA"])
def test_tls12_resumption(
    certs: dict[str, tuple[str, str]], keylog_path: Path, openssl_name: str
) -> None:
    client, server = tls12(certs, keylog_path, openssl_name, "rsa", 0)
    first = converse(client, server, script(10))
    second = converse(client, server, script(11), session=first.session)
    assert second.reused and not first.reused
    keylog = KeyLog.load([str(keylog_path)])
    assert len(keylog) == 2
    # The abbreviated handshake: the server's ChangeCipherSpec comes before the client's.
    server_first = next(d for s, d in second.chunks if s == 1)
    assert b"\x14\x03\x03\x00\x01\x01" in server_first
    iana = {"ECDHE-RSA-AES128-GCM-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}
    name = iana.get(openssl_name, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA")
    check(first, keylog, "TLS 1.2", name)
    check(second, keylog, "TLS 1.2", name)


# ---------------------------------------------------------------------------------------------
# Failures
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample(
    certs: dict[str, tuple[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Conversation, str]]:
    """One TLS 1.3 and one TLS 1.2 conversation with their key log text."""
    out = {}
    directory = tmp_path_factory.mktemp("sample")
    for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
        path = directory / f"{version.name}.log"
        client, server = contexts(certs["rsa"], path, version)
        out[version.name] = (converse(client, server, script(12)), path.read_text())
    return out


def _secret_hexes(keylog_text: str) -> list[str]:
    return [
        line.split()[2]
        for line in keylog_text.splitlines()
        if line and not line.startswith("#") and len(line.split()) == 3
    ]


def _assert_no_secret(text: str, keylog_text: str) -> None:
    for secret in _secret_hexes(keylog_text):
        assert secret.lower() not in text.lower()
        assert secret[:16].lower() not in text.lower()


def test_missing_key(sample: dict[str, tuple[Conversation, str]]) -> None:
    for conv, text in sample.values():
        other = KeyLog.parse(f"CLIENT_RANDOM {'ab' * 32} {'cd' * 48}\n")
        session, plain = decrypt(conv.chunks, other)
        assert session.client_random is not None
        assert session.failure == (
            f"no key for client random {session.client_random[:4].hex()}… in the key log"
        )
        assert plain == [b"", b""] and not session.decrypted
        assert session.app_bytes[0] > 0 and session.app_bytes[1] > 0


def _corrupted(text: str, keep: Callable[[str], bool] = lambda label: True) -> str:
    lines = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 3 and keep(fields[0]):
            secret = bytearray(bytes.fromhex(fields[2]))
            secret[0] ^= 1
            lines.append(f"{fields[0]} {fields[1]} {secret.hex()}")
        else:
            lines.append(line)
    return "\n".join(lines)


def test_wrong_key(sample: dict[str, tuple[Conversation, str]]) -> None:
    for conv, text in sample.values():
        session, plain = decrypt(conv.chunks, KeyLog.parse(_corrupted(text)))
        assert session.failure is not None
        assert re.fullmatch(
            r"record \d+ of the (client|server) failed authentication \(wrong key\?\)",
            session.failure,
        )
        assert plain == [b"", b""]
        _assert_no_secret(session.failure + repr(session), text)


def test_wrong_application_key_only(sample: dict[str, tuple[Conversation, str]]) -> None:
    conv, text = sample["TLSv1_3"]
    bad = _corrupted(text, lambda label: label == "SERVER_TRAFFIC_SECRET_0")
    session, plain = decrypt(conv.chunks, KeyLog.parse(bad))
    assert session.failure is not None and "of the server failed authentication" in session.failure
    assert plain == [conv.sent[0], b""]  # the client side is unaffected


def test_hole(sample: dict[str, tuple[Conversation, str]]) -> None:
    for conv, text in sample.values():
        keylog = KeyLog.parse(text)
        server_chunks = [i for i, (s, _) in enumerate(conv.chunks) if s == 1]
        cut = server_chunks[len(server_chunks) // 2]
        session, plain = decrypt(conv.chunks[:cut], keylog)
        assert session.failure is None
        session.hole(1, 1460, 99)
        assert session.failure == "1460 bytes of the TLS stream were not captured"
        session, rest = decrypt(conv.chunks[cut + 1 :], keylog, session=session)
        assert rest[1] == b""
        assert plain[0] + rest[0] == conv.sent[0]  # the client's side goes on
        assert conv.sent[1].startswith(plain[1]) and len(plain[1]) < len(conv.sent[1])


def test_not_a_record(sample: dict[str, tuple[Conversation, str]]) -> None:
    conv, text = sample["TLSv1_3"]
    chunks = list(conv.chunks)
    at = next(i for i, (s, _) in enumerate(chunks) if s == 1)
    offset = len(chunks[at][1])
    chunks.insert(at + 1, (1, b"\x00\x00\x00\x1f\x00\x12\x00\x03" + bytes(40)))
    session, plain = decrypt(chunks, KeyLog.parse(text))
    assert session.failure == f"not a TLS record at byte {offset} of the server stream"
    assert plain[1] == b"" and plain[0] == conv.sent[0]


def test_handshake_not_in_capture(sample: dict[str, tuple[Conversation, str]]) -> None:
    conv, text = sample["TLSv1_2"]
    # From the first application data record on each side: a capture that began late.
    late = []
    started = [False, False]
    for side, data in conv.chunks:
        if not started[side] and data[:1] == b"\x17" and len(data) > 100:
            started[side] = True
        if started[side]:
            late.append((side, data))
    session, plain = decrypt(late, KeyLog.parse(text))
    assert session.failure == "the TLS handshake is not in the capture"
    assert plain == [b"", b""] and session.app_bytes[0] > 0


def test_unsupported_suite(sample: dict[str, tuple[Conversation, str]]) -> None:
    conv, text = sample["TLSv1_2"]
    chunks = list(conv.chunks)
    at = next(i for i, (s, _) in enumerate(chunks) if s == 1)
    hello = bytearray(chunks[at][1])
    assert hello[5] == 2  # ServerHello
    pos = 5 + 4 + 2 + 32
    pos += 1 + hello[pos]
    hello[pos : pos + 2] = b"\x00\x0a"
    chunks[at] = (1, bytes(hello))
    session, plain = decrypt(chunks, KeyLog.parse(text))
    assert session.failure == "unsupported cipher suite TLS_RSA_WITH_3DES_EDE_CBC_SHA (0x000a)"
    assert session.cipher_suite == "TLS_RSA_WITH_3DES_EDE_CBC_SHA"
    assert plain == [b"", b""]


def test_early_data_is_reported_and_skipped(sample: dict[str, tuple[Conversation, str]]) -> None:
    """0-RTT records (made up here: Python's ssl cannot send early data) are not decrypted, and
    the client's handshake and application data after them still are."""
    conv, text = sample["TLSv1_3"]
    fake = b"\x17\x03\x03\x00\x40" + bytes(range(64))
    client_chunks = [i for i, (s, _) in enumerate(conv.chunks) if s == 0]
    chunks = list(conv.chunks)
    chunks.insert(client_chunks[1], (0, fake))  # after the ServerHello: skipped by trial
    chunks.insert(client_chunks[0] + 1, (0, fake))  # before the ServerHello: early data
    session, plain = decrypt(chunks, KeyLog.parse(text), random.Random(5))
    assert session.failure == "0-RTT early data is not supported"
    assert plain == conv.sent
    assert session.skipped_records == [1, 0]


def test_long_handshake_message_is_skipped_unbuffered(
    sample: dict[str, tuple[Conversation, str]],
) -> None:
    """A 300 kB handshake message (a huge certificate chain) is skipped without being kept."""
    conv, text = sample["TLSv1_2"]
    chunks = list(conv.chunks)
    at = next(i for i, (s, _) in enumerate(chunks) if s == 1)
    first = chunks[at][1]
    end = 5 + int.from_bytes(first[3:5], "big")  # the ServerHello's record
    message = b"\x0b" + (300_000).to_bytes(3, "big") + bytes(300_000)
    records = b"".join(
        b"\x16\x03\x03" + len(part).to_bytes(2, "big") + part
        for part in (message[i : i + 16384] for i in range(0, len(message), 16384))
    )
    chunks[at] = (1, first[:end] + records + first[end:])
    session, plain = decrypt(chunks, KeyLog.parse(text), random.Random(2))
    assert session.failure is None and plain == conv.sent


def test_tiny_pieces(sample: dict[str, tuple[Conversation, str]]) -> None:
    """Byte by byte through the handshake and the first application records."""
    for conv, text in sample.values():
        session = TlsSession(KeyLog.parse(text))
        out = [bytearray(), bytearray()]
        for side, data in conv.chunks[:12]:
            for i in range(len(data)):
                for s, plain, _ in session.feed(side, data[i : i + 1], i):
                    out[s] += plain
        assert session.failure is None
        assert conv.sent[0].startswith(bytes(out[0])) and conv.sent[1].startswith(bytes(out[1]))
        assert out[0] or out[1]


# ---------------------------------------------------------------------------------------------
# Key logs
# ---------------------------------------------------------------------------------------------

CR = "3f2a9c01" + "00" * 28
SECRET48 = "11" * 47 + "42"
SECRET32 = "22" * 31 + "43"


def test_keylog_parse() -> None:
    text = (
        "# SSL/TLS secrets log file\n"
        "\n"
        f"CLIENT_RANDOM {CR} {SECRET48}\r\n"
        f"   CLIENT_TRAFFIC_SECRET_0 {CR} {SECRET32}   \n"
        f"SERVER_TRAFFIC_SECRET_0 {CR} {SECRET32}\n"
        f"EXPORTER_SECRET {CR} {SECRET32}\n"
        f"CLIENT_EARLY_TRAFFIC_SECRET {'aa' * 32} {SECRET32}\n"
        f"RSA 0102030405060708 {SECRET48}\n"
        f"SOME_FUTURE_LABEL {CR} {SECRET32} extra fields\n"
        f"CLIENT_TRAFFIC_SECRET_N {CR} {SECRET32}\n"
    )
    log = KeyLog.parse(text.encode(), "keys.log")
    assert len(log) == 2 and log
    assert KeyLog.parse(b"\xef\xbb\xbf" + text.encode()) == log == KeyLog.parse("\ufeff" + text)
    secrets = log.secrets(bytes.fromhex(CR))
    assert secrets is not None
    assert secrets["CLIENT_RANDOM"] == bytes.fromhex(SECRET48)
    assert secrets["SERVER_TRAFFIC_SECRET_0"] == bytes.fromhex(SECRET32)
    assert log.secrets(bytes(32)) is None
    assert repr(log) == str(log) == "KeyLog(2 client randoms)"
    assert repr(KeyLog.parse("")) == "KeyLog(0 client randoms)" and not KeyLog.parse("")
    clone = pickle.loads(pickle.dumps(log))
    assert clone == log and clone.secrets(bytes.fromhex(CR)) == secrets
    for s in (repr(log), str(log)):
        assert SECRET48 not in s and SECRET32 not in s


@pytest.mark.parametrize(
    "line,message",
    [
        (f"CLIENT_RANDOM {CR}", "expected 3 fields"),
        ("garbage", "expected 3 fields"),
        (f"CLIENT_RANDOM {CR} {SECRET48} extra", "expected 3 fields"),
        (f"CLIENT_RANDOM {CR} {SECRET48[:-1]}x", "the secret is not hex"),
        (f"CLIENT_RANDOM {CR}zz {SECRET48}", "the client random is not hex"),
        (f"CLIENT_RANDOM {CR[:-2]} {SECRET48}", "the client random has 31 bytes, expected 32"),
        (f"CLIENT_RANDOM {CR} {SECRET48[:-2]}", "secret has 47 bytes, expected 48"),
        (f"CLIENT_TRAFFIC_SECRET_0 {CR} {SECRET32}00", "expected 32 or 48"),
    ],
)
def test_keylog_bad_lines(line: str, message: str) -> None:
    text = f"# comment\n\nCLIENT_RANDOM {'bb' * 32} {SECRET48}\n\n\n\n{line}\n"
    with pytest.raises(KeyLogError) as info:
        KeyLog.parse(text, "keys.log")
    assert str(info.value).startswith("keys.log line 7: ")
    assert message in str(info.value)
    assert SECRET48[:-2] not in str(info.value) and SECRET32 not in str(info.value)


def test_keylog_load_and_merge(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(f"CLIENT_RANDOM {CR} {SECRET48}\n")
    b.write_text(f"CLIENT_TRAFFIC_SECRET_0 {CR} {SECRET32}\nCLIENT_RANDOM {'cc' * 32} {SECRET48}\n")
    log = KeyLog.load([str(a), str(b)])
    assert len(log) == 2
    assert set(log.secrets(bytes.fromhex(CR)) or {}) == {"CLIENT_RANDOM", "CLIENT_TRAFFIC_SECRET_0"}
    assert KeyLog.parse(a.read_text()).merged(KeyLog.parse(b.read_text())) == log
    missing = tmp_path / "nope.log"
    with pytest.raises(KeyLogError, match=re.escape(str(missing))):
        KeyLog.load([str(a), str(missing)])
    b.write_text("CLIENT_RANDOM zz zz\n")
    with pytest.raises(KeyLogError, match=re.escape(f"{b} line 1: ")):
        KeyLog.load([str(a), str(b)])


def test_no_secret_in_any_message(
    sample: dict[str, tuple[Conversation, str]], certs: dict[str, tuple[str, str]]
) -> None:
    for conv, text in sample.values():
        log = KeyLog.parse(text)
        _assert_no_secret(repr(log) + str(log), text)
        messages = []
        for variant in (_corrupted(text), "", text):
            session, _ = decrypt(conv.chunks, KeyLog.parse(variant))
            messages.append(f"{session.failure} {session!r}")
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            broken = line[:-1] + "g"
            with pytest.raises(KeyLogError) as info:
                KeyLog.parse(broken)
            messages.append(str(info.value))
        _assert_no_secret("\n".join(messages), text)


# ---------------------------------------------------------------------------------------------
# Sniffing
# ---------------------------------------------------------------------------------------------


def test_looks_like_tls(sample: dict[str, tuple[Conversation, str]]) -> None:
    for conv, _ in sample.values():
        head = conv.chunks[0][1]
        assert looks_like_tls(head) and looks_like_tls(head[:6])
        assert not looks_like_tls(head[:5])
        assert not looks_like_tls(next(d for s, d in conv.chunks if s == 1))  # ServerHello
    # Kafka frames: ApiVersions v3 request, a Produce request, a response.
    assert not looks_like_tls(b"\x00\x00\x00\x1f\x00\x12\x00\x03\x00\x00\x00\x01\x00\x07kwire")
    assert not looks_like_tls(b"\x00\x00\x01\x00\x00\x00\x00\x09\x00\x00\x00\x02")
    assert not looks_like_tls(b"\x00\x00\x00\x10\x00\x00\x00\x01\x00\x00")
    assert not looks_like_tls(b"")


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(0, 0x1602FFFF),
    api_key=st.integers(-(2**15), 2**15 - 1),
    version=st.integers(-(2**15), 2**15 - 1),
    correlation=st.integers(-(2**31), 2**31 - 1),
    rest=st.binary(max_size=40),
)
def test_kafka_frames_are_not_tls(
    size: int, api_key: int, version: int, correlation: int, rest: bytes
) -> None:
    frame = (
        size.to_bytes(4, "big")
        + api_key.to_bytes(2, "big", signed=True)
        + version.to_bytes(2, "big", signed=True)
        + correlation.to_bytes(4, "big", signed=True)
        + rest
    )
    assert not looks_like_tls(frame)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_are_not_tls(data: bytes) -> None:
    result = looks_like_tls(data)
    if result:  # only a genuine-looking handshake record header with a ClientHello
        assert data[0] == 22 and data[1] == 3 and data[2] <= 4 and data[5] == 1
    if data[:1] != b"\x16":
        assert not result


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.binary(max_size=300)), max_size=20))
def test_garbage_never_raises(chunks: list[tuple[int, bytes]]) -> None:
    session = TlsSession(KeyLog())
    for side, data in chunks:
        assert session.feed(side, data, 0) == []
    if session.failure is not None:
        assert session.failure.isprintable()


# ---------------------------------------------------------------------------------------------
# Speed (printed, not asserted: pytest -s)
# ---------------------------------------------------------------------------------------------


def test_speed(certs: dict[str, tuple[str, str]], tmp_path: Path) -> None:
    payload = random.Random(0).randbytes(8 << 20)
    results = []
    for version, ciphers in (
        (ssl.TLSVersion.TLSv1_3, None),
        (ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-AES128-GCM-SHA256"),
        (ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-CHACHA20-POLY1305"),
    ):
        path = tmp_path / f"{version.name}{ciphers}.log"
        client, server = contexts(certs["rsa"], path, version, ciphers)
        conv = converse(client, server, [(0, payload)])
        stream = [(s, d) for s, d in conv.chunks]
        # Cut the data into 64 kB pieces, as TCP reassembly would hand them over.
        pieces = [(s, d[i : i + 65536]) for s, d in stream for i in range(0, max(len(d), 1), 65536)]
        session = TlsSession(KeyLog.parse(path.read_text()))
        start = time.perf_counter()
        got = 0
        for side, data in pieces:
            for _, plain, _ in session.feed(side, data, 0):
                got += len(plain)
        elapsed = time.perf_counter() - start
        assert got == len(payload)
        results.append(f"{conv.cipher}: {len(payload) / elapsed / 1e6:.0f} MB/s")
    print("\nTLS decryption speed (8 MB, 16 kB records, 64 kB feeds): " + "; ".join(results))


if __name__ == "__main__":
    _forced_suite_main(*sys.argv[1:5])
