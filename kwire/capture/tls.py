"""TLS decryption of captured connections with NSS key log files (SSLKEYLOGFILE).

A key log holds, per ClientHello random, the secrets an endpoint logged: the TLS 1.2 master
secret (label CLIENT_RANDOM) or the TLS 1.3 traffic secrets. A `TlsSession` follows one TCP
connection's two byte streams, reads the handshake in the clear far enough to learn the client
random, the version and the cipher suite, and then decrypts the records of each side with keys
derived from the logged secrets:

* TLS 1.3 (RFC 8446): TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,
  TLS_CHACHA20_POLY1305_SHA256, with the encrypted handshake, KeyUpdate, HelloRetryRequest and
  middlebox-compatibility ChangeCipherSpec records; key logs with only the application traffic
  secrets work too (the handshake records are skipped until one authenticates).
* TLS 1.2 (RFC 5246): AES-GCM (RFC 5288), ChaCha20-Poly1305 (RFC 7905) and AES-CBC with HMAC
  (MAC-then-encrypt, or encrypt-then-MAC per RFC 7366), full and abbreviated (resumed) handshakes.

Every primitive comes from `cryptography`. No secret or key ever appears in an exception, a repr,
a failure string or a log line; client randoms are public (they travel in the clear).
"""

from __future__ import annotations

import hmac as _hmac_compare
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

__all__ = ["KeyLog", "KeyLogError", "TlsSession", "looks_like_record", "looks_like_tls", "SUITES"]

# ---------------------------------------------------------------------------------------------
# Key logs
# ---------------------------------------------------------------------------------------------

# label -> required secret lengths (bytes). TLS 1.3 secrets are a hash output (SHA-256/384).
_KEPT_LABELS: dict[str, tuple[int, ...]] = {
    "CLIENT_RANDOM": (48,),
    "CLIENT_HANDSHAKE_TRAFFIC_SECRET": (32, 48),
    "SERVER_HANDSHAKE_TRAFFIC_SECRET": (32, 48),
    "CLIENT_TRAFFIC_SECRET_0": (32, 48),
    "SERVER_TRAFFIC_SECRET_0": (32, 48),
    "CLIENT_EARLY_TRAFFIC_SECRET": (32, 48),
    "EXPORTER_SECRET": (32, 48),
    "EARLY_EXPORTER_SECRET": (32, 48),
}


class KeyLogError(ValueError):
    """A key log that cannot be read or parsed; names the file and line, never a secret."""


def _open_local(path: str) -> BinaryIO:
    return open(path, "rb")


class KeyLog:
    """Secrets from NSS key log files, by client random (32 bytes)."""

    __slots__ = ("_by_random",)

    def __init__(self, by_random: dict[bytes, dict[str, bytes]] | None = None) -> None:
        # A plain dict of plain dicts, so the key log pickles (Spark ships it to the executors).
        self._by_random: dict[bytes, dict[str, bytes]] = by_random if by_random is not None else {}

    def __getstate__(self) -> dict[bytes, dict[str, bytes]]:
        return self._by_random

    def __setstate__(self, state: dict[bytes, dict[str, bytes]]) -> None:
        self._by_random = state

    @classmethod
    def parse(cls, text: bytes | str, source: str = "key log") -> KeyLog:
        if isinstance(text, (bytes, bytearray, memoryview)):
            text = bytes(text).decode("latin-1")
            text = text[3:] if text.startswith("\xef\xbb\xbf") else text  # a UTF-8 BOM
        text = text.lstrip("\ufeff")
        by_random: dict[bytes, dict[str, bytes]] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) < 3:
                raise KeyLogError(
                    f"{source} line {number}: expected 3 fields (label, client random, secret), "
                    f"got {len(fields)}"
                )
            label = fields[0]
            lengths = _KEPT_LABELS.get(label)
            if lengths is None:
                # RSA lines, PMS_CLIENT_RANDOM, ECH and labels newer than this reader.
                continue
            if len(fields) != 3:
                raise KeyLogError(
                    f"{source} line {number}: expected 3 fields (label, client random, secret), "
                    f"got {len(fields)}"
                )
            try:
                client_random = bytes.fromhex(fields[1])
            except ValueError:
                raise KeyLogError(f"{source} line {number}: the client random is not hex") from None
            if len(client_random) != 32:
                raise KeyLogError(
                    f"{source} line {number}: the client random has {len(client_random)} bytes, "
                    "expected 32"
                )
            try:
                secret = bytes.fromhex(fields[2])
            except ValueError:
                # `from None`: the ValueError would quote the offending (secret) text.
                raise KeyLogError(f"{source} line {number}: the secret is not hex") from None
            if len(secret) not in lengths:
                want = " or ".join(str(n) for n in lengths)
                raise KeyLogError(
                    f"{source} line {number}: the {label} secret has {len(secret)} bytes, "
                    f"expected {want}"
                )
            by_random.setdefault(client_random, {})[label] = secret
        return cls(by_random)

    @classmethod
    def load(cls, paths: Iterable[str], opener: Callable[[str], BinaryIO] | None = None) -> KeyLog:
        """The key logs at `paths`, merged. `opener` opens a path for reading (default: local
        files; kwire.capture.distributed.open_capture reads URLs too)."""
        if isinstance(paths, str):
            paths = [paths]
        log = cls()
        for path in paths:
            try:
                with (opener or _open_local)(path) as f:
                    text = f.read()
            except OSError as e:
                raise KeyLogError(f"cannot read the key log {path}: {e.strerror or e}") from None
            log = log.merged(cls.parse(text, path))
        return log

    def merged(self, other: KeyLog) -> KeyLog:
        out = {cr: dict(labels) for cr, labels in self._by_random.items()}
        for cr, labels in other._by_random.items():
            out.setdefault(cr, {}).update(labels)
        return KeyLog(out)

    def __len__(self) -> int:
        return len(self._by_random)

    def __bool__(self) -> bool:
        return bool(self._by_random)

    def __contains__(self, client_random: object) -> bool:
        return client_random in self._by_random

    def secrets(self, client_random: bytes) -> dict[str, bytes] | None:
        labels = self._by_random.get(bytes(client_random))
        return dict(labels) if labels is not None else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyLog) and self._by_random == other._by_random

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        n = len(self._by_random)
        return f"KeyLog({n} client random{'' if n == 1 else 's'})"

    __str__ = __repr__


# ---------------------------------------------------------------------------------------------
# Stream sniffing
# ---------------------------------------------------------------------------------------------

CT_CHANGE_CIPHER_SPEC = 20
CT_ALERT = 21
CT_HANDSHAKE = 22
CT_APPLICATION_DATA = 23
CT_HEARTBEAT = 24

# The longest record fragment RFC 5246 6.2.3 allows (2^14 + 2048 ciphertext; TLS 1.3 allows
# 2^14 + 256, which is inside it).
MAX_RECORD = 2**14 + 2048
# The longest ClientHello/ServerHello kept for parsing; other handshake messages (certificates)
# are skipped without being buffered.
MAX_HANDSHAKE_MESSAGE = 256 * 1024


def looks_like_tls(head: bytes) -> bool:
    """True when `head` starts with a TLS handshake record carrying a ClientHello.

    A Kafka frame starts with its int32 big-endian size. For a Kafka frame to start 0x16 0x03 its
    size would be at least 0x16030000 bytes (over 369 MB), far past any broker's
    socket.request.max.bytes (100 MB by default) and every client's limits, so no real Kafka
    stream is taken for TLS.
    """
    if len(head) < 6:
        return False
    if head[0] != CT_HANDSHAKE or head[1] != 3 or head[2] > 4:
        return False
    length = (head[3] << 8) | head[4]
    return 4 <= length <= MAX_RECORD and head[5] == 1


def looks_like_record(head: bytes) -> bool:
    """True when `head` starts with any TLS record header (content type change_cipher_spec to
    application_data, version 3.x, a plausible length): how a stream whose handshake was not
    captured starts. A Kafka frame never does, for the reason `looks_like_tls` gives."""
    return (
        len(head) >= 5
        and CT_CHANGE_CIPHER_SPEC <= head[0] <= CT_APPLICATION_DATA
        and head[1] == 3
        and head[2] <= 4
        and 0 < ((head[3] << 8) | head[4]) <= MAX_RECORD
    )


# ---------------------------------------------------------------------------------------------
# Cipher suites
# ---------------------------------------------------------------------------------------------


class Suite(NamedTuple):
    name: str
    kind: str  # "tls13", "gcm", "chacha", "cbc"
    key_len: int
    hash_name: str  # PRF / HKDF hash: "sha256" or "sha384"
    mac_name: str | None = None  # CBC suites' HMAC hash: "sha1", "sha256", "sha384"


SUITES: dict[int, Suite] = {
    0x1301: Suite("TLS_AES_128_GCM_SHA256", "tls13", 16, "sha256"),
    0x1302: Suite("TLS_AES_256_GCM_SHA384", "tls13", 32, "sha384"),
    0x1303: Suite("TLS_CHACHA20_POLY1305_SHA256", "tls13", 32, "sha256"),
    0x009C: Suite("TLS_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0x009D: Suite("TLS_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0x009E: Suite("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0x009F: Suite("TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0xC02B: Suite("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0xC02C: Suite("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0xC02F: Suite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0xC030: Suite("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0xCCA8: Suite("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
    0xCCA9: Suite("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
    0xCCAA: Suite("TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
    0x002F: Suite("TLS_RSA_WITH_AES_128_CBC_SHA", "cbc", 16, "sha256", "sha1"),
    0x0035: Suite("TLS_RSA_WITH_AES_256_CBC_SHA", "cbc", 32, "sha256", "sha1"),
    0x003C: Suite("TLS_RSA_WITH_AES_128_CBC_SHA256", "cbc", 16, "sha256", "sha256"),
    0x003D: Suite("TLS_RSA_WITH_AES_256_CBC_SHA256", "cbc", 32, "sha256", "sha256"),
    0x0033: Suite("TLS_DHE_RSA_WITH_AES_128_CBC_SHA", "cbc", 16, "sha256", "sha1"),
    0x0039: Suite("TLS_DHE_RSA_WITH_AES_256_CBC_SHA", "cbc", 32, "sha256", "sha1"),
    0x0067: Suite("TLS_DHE_RSA_WITH_AES_128_CBC_SHA256", "cbc", 16, "sha256", "sha256"),
    0x006B: Suite("TLS_DHE_RSA_WITH_AES_256_CBC_SHA256", "cbc", 32, "sha256", "sha256"),
    0xC009: Suite("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "cbc", 16, "sha256", "sha1"),
    0xC00A: Suite("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "cbc", 32, "sha256", "sha1"),
    0xC013: Suite("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "cbc", 16, "sha256", "sha1"),
    0xC014: Suite("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "cbc", 32, "sha256", "sha1"),
    0xC023: Suite("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "cbc", 16, "sha256", "sha256"),
    0xC024: Suite("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", "cbc", 32, "sha384", "sha384"),
    0xC027: Suite("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "cbc", 16, "sha256", "sha256"),
    0xC028: Suite("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "cbc", 32, "sha384", "sha384"),
}

# Names of suites seen in the wild that are not decrypted, for the failure message.
_UNSUPPORTED_NAMES: dict[int, str] = {
    0x0004: "TLS_RSA_WITH_RC4_128_MD5",
    0x0005: "TLS_RSA_WITH_RC4_128_SHA",
    0x000A: "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    0x0016: "TLS_DHE_RSA_WITH_3DES_EDE_CBC_SHA",
    0xC012: "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    0x1304: "TLS_AES_128_CCM_SHA256",
    0x1305: "TLS_AES_128_CCM_8_SHA256",
    0xC09C: "TLS_RSA_WITH_AES_128_CCM",
    0xC09D: "TLS_RSA_WITH_AES_256_CCM",
    0xC0AC: "TLS_ECDHE_ECDSA_WITH_AES_128_CCM",
    0xC0AD: "TLS_ECDHE_ECDSA_WITH_AES_256_CCM",
}

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "sha1": hashes.SHA1,
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
}

_VERSIONS = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2"}
_VERSIONS[0x0304] = "TLS 1.3"

# RFC 8446 4.1.3: the ServerHello.random of a HelloRetryRequest (SHA-256 of "HelloRetryRequest").
HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")

_EXT_ENCRYPT_THEN_MAC = 0x0016
_EXT_EARLY_DATA = 0x002A
_EXT_SUPPORTED_VERSIONS = 0x002B

_HS_CLIENT_HELLO = 1
_HS_SERVER_HELLO = 2
_HS_FINISHED = 20
_HS_KEY_UPDATE = 24

_SIDE_NAMES = ("client", "server")
_HANDSHAKE_LABELS = ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET")
_TRAFFIC_LABELS = ("CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0")

# Records a side may skip while looking for the first one its application key opens (the
# encrypted handshake when only the traffic secrets were logged, or 0-RTT data).
_MAX_TRIAL_SKIPS = 256


def suite_name(suite_id: int) -> str:
    suite = SUITES.get(suite_id)
    if suite is not None:
        return suite.name
    return _UNSUPPORTED_NAMES.get(suite_id, f"0x{suite_id:04x}")


# ---------------------------------------------------------------------------------------------
# Key derivation
# ---------------------------------------------------------------------------------------------


def hkdf_expand_label(
    hash_name: str, secret: bytes, label: bytes, context: bytes, length: int
) -> bytes:
    """HKDF-Expand-Label from RFC 8446 7.1."""
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + bytes([len(context)]) + context
    return HKDFExpand(_HASHES[hash_name](), length, info).derive(secret)


def prf12(hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """The TLS 1.2 PRF (RFC 5246 section 5): P_hash(secret, label + seed) with HMAC."""
    algorithm = _HASHES[hash_name]()
    seed = label + seed
    base = hmac.HMAC(secret, algorithm)
    out = bytearray()
    a = seed
    while len(out) < length:
        h = base.copy()
        h.update(a)
        a = h.finalize()
        h = base.copy()
        h.update(a + seed)
        out += h.finalize()
    return bytes(out[:length])


class _BadRecord(Exception):
    """A record that does not authenticate or decode under the current key."""


class _Tls13Keys:
    __slots__ = ("suite", "secret", "aead", "iv", "seq", "label", "updates")

    def __init__(self, suite: Suite, secret: bytes, label: str, updates: int = 0) -> None:
        self.suite = suite
        self.secret = secret
        # Where the secret comes from: the key log's `label`, after `updates` KeyUpdates (what a
        # saved session keeps instead of the secret; see _Side.__getstate__).
        self.label = label
        self.updates = updates
        key = hkdf_expand_label(suite.hash_name, secret, b"key", b"", suite.key_len)
        self.iv = int.from_bytes(hkdf_expand_label(suite.hash_name, secret, b"iv", b"", 12), "big")
        self.aead: AESGCM | ChaCha20Poly1305 = (
            ChaCha20Poly1305(key) if "CHACHA20" in suite.name else AESGCM(key)
        )
        self.seq = 0

    def updated(self) -> _Tls13Keys:
        """The keys after a KeyUpdate (RFC 8446 7.2)."""
        length = 48 if self.suite.hash_name == "sha384" else 32
        nxt = hkdf_expand_label(self.suite.hash_name, self.secret, b"traffic upd", b"", length)
        return _Tls13Keys(self.suite, nxt, self.label, self.updates + 1)

    def open(self, header: bytes, fragment: memoryview) -> tuple[int, bytes]:
        nonce = (self.iv ^ self.seq).to_bytes(12, "big")
        try:
            plain = self.aead.decrypt(nonce, fragment, header)
        except (InvalidTag, ValueError):
            raise _BadRecord from None
        self.seq += 1
        # TLSInnerPlaintext: content || type || zeros.
        if plain and plain[-1]:
            return plain[-1], plain[:-1]
        plain = plain.rstrip(b"\0")
        if not plain:
            raise _BadRecord
        return plain[-1], plain[:-1]


class _Gcm12Keys:
    __slots__ = ("aead", "salt", "seq")

    def __init__(self, key: bytes, salt: bytes) -> None:
        self.aead = AESGCM(key)
        self.salt = salt
        self.seq = 0

    def open(self, header: bytes, fragment: memoryview) -> tuple[int, bytes]:
        n = len(fragment) - 24
        if n < 0:
            raise _BadRecord
        aad = self.seq.to_bytes(8, "big") + header[:3] + n.to_bytes(2, "big")
        try:
            plain = self.aead.decrypt(self.salt + fragment[:8], fragment[8:], aad)
        except (InvalidTag, ValueError):
            raise _BadRecord from None
        self.seq += 1
        return header[0], plain


class _Chacha12Keys:
    __slots__ = ("aead", "iv", "seq")

    def __init__(self, key: bytes, iv: bytes) -> None:
        self.aead = ChaCha20Poly1305(key)
        self.iv = int.from_bytes(iv, "big")
        self.seq = 0

    def open(self, header: bytes, fragment: memoryview) -> tuple[int, bytes]:
        n = len(fragment) - 16
        if n < 0:
            raise _BadRecord
        seq = self.seq
        aad = seq.to_bytes(8, "big") + header[:3] + n.to_bytes(2, "big")
        try:
            plain = self.aead.decrypt((self.iv ^ seq).to_bytes(12, "big"), fragment, aad)
        except (InvalidTag, ValueError):
            raise _BadRecord from None
        self.seq = seq + 1
        return header[0], plain


class _Cbc12Keys:
    """AES-CBC with HMAC, TLS 1.1+ record format (explicit IV), MAC-then-encrypt or RFC 7366."""

    __slots__ = ("aes", "mac", "mac_len", "etm", "seq")

    def __init__(self, mac_name: str, mac_key: bytes, key: bytes, etm: bool) -> None:
        self.aes = algorithms.AES(key)
        algorithm = _HASHES[mac_name]()
        self.mac = hmac.HMAC(mac_key, algorithm)
        self.mac_len = algorithm.digest_size
        self.etm = etm
        self.seq = 0

    def _decrypt(self, iv: memoryview, body: memoryview) -> bytes:
        if not body or len(body) % 16:
            raise _BadRecord
        decryptor = Cipher(self.aes, modes.CBC(bytes(iv))).decryptor()
        return decryptor.update(body) + decryptor.finalize()

    def _mac(self, header: bytes, length: int, *parts: bytes | memoryview) -> bytes:
        h = self.mac.copy()
        h.update(self.seq.to_bytes(8, "big") + header[:3] + length.to_bytes(2, "big"))
        for part in parts:
            h.update(part)
        return h.finalize()

    def open(self, header: bytes, fragment: memoryview) -> tuple[int, bytes]:
        mac_len = self.mac_len
        if self.etm:
            body_len = len(fragment) - mac_len
            if body_len < 32:
                raise _BadRecord
            body = fragment[:body_len]
            mac = self._mac(header, body_len, body)
            if not _hmac_compare.compare_digest(mac, fragment[body_len:]):
                raise _BadRecord
            plain = self._decrypt(fragment[:16], fragment[16:body_len])
            pad = plain[-1]
            if pad + 1 > len(plain) or plain[-pad - 1 :] != bytes([pad]) * (pad + 1):
                raise _BadRecord
            content = plain[: -pad - 1]
        else:
            plain = self._decrypt(fragment[:16], fragment[16:])
            pad = plain[-1]
            end = len(plain) - pad - 1 - mac_len
            if end < 0 or plain[-pad - 1 :] != bytes([pad]) * (pad + 1):
                raise _BadRecord
            content = plain[:end]
            mac = self._mac(header, end, content)
            if not _hmac_compare.compare_digest(mac, plain[end : end + mac_len]):
                raise _BadRecord
        self.seq += 1
        return header[0], content


_Keys = _Tls13Keys | _Gcm12Keys | _Chacha12Keys | _Cbc12Keys
# What a saved session keeps of a side's keys instead of them: how to derive them again from the
# key log, and the next record's sequence number. (label, KeyUpdates, encrypt-then-MAC, seq):
# TLS 1.3 keys come from the secret `label` (then KeyUpdates), TLS 1.2 ones (label "") from the
# master secret.
_Recipe = tuple[str, int, bool, int]


def _recipe(keys: _Keys | None) -> _Recipe | None:
    if keys is None:
        return None
    if isinstance(keys, _Tls13Keys):
        return (keys.label, keys.updates, False, keys.seq)
    return ("", 0, isinstance(keys, _Cbc12Keys) and keys.etm, keys.seq)


# ---------------------------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------------------------


class _Side:
    __slots__ = (
        "buf",
        "need",
        "consumed",
        "records",
        "first",
        "stopped",
        "dead",
        "closed",
        "keys",
        "pending",
        "encrypt_all",
        "handshake_epoch",
        "trial",
        "skipped",
        "early",
        "hs_head",
        "hs_type",
        "hs_left",
        "hs_body",
        "recipes",
    )

    def __init__(self) -> None:
        self.buf = bytearray()  # an incomplete record
        self.need = 5  # bytes `buf` must hold before a record completes
        self.consumed = 0  # stream offset of buf[0]
        self.records = 0
        self.first = True
        self.stopped = False  # no more decryption (record headers still counted)
        self.dead = False  # not even record framing (a hole or garbage)
        self.closed = False  # close_notify or a fatal alert
        self.keys: _Keys | None = None
        self.pending: _Keys | None = None  # TLS 1.2 keys waiting for the ChangeCipherSpec
        self.encrypt_all = False  # TLS 1.2 after ChangeCipherSpec: every record is encrypted
        self.handshake_epoch = False  # TLS 1.3: under the handshake traffic secret
        self.trial = False  # skip records that do not authenticate until one does
        self.skipped = 0
        self.early = 0  # 0-RTT records seen
        self.hs_head = bytearray()  # a partial 4-byte handshake message header
        self.hs_type = -1
        self.hs_left = -1  # body bytes still to come, -1 while reading a header
        self.hs_body: bytearray | None = None
        # Set while a side is unpickled and its keys not yet derived again (TlsSession.attach).
        self.recipes: tuple[_Recipe | None, _Recipe | None] | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the keys, which would be secrets: how to derive them instead."""
        state = {name: getattr(self, name) for name in self.__slots__}
        state["recipes"] = (_recipe(self.keys), _recipe(self.pending))
        state["keys"] = state["pending"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)


class TlsSession:
    """One TCP connection's TLS: both directions, fed in capture order."""

    def __init__(self, keylog: KeyLog) -> None:
        self._keylog = keylog
        self._sides = (_Side(), _Side())
        self.version: str | None = None
        self.cipher_suite: str | None = None
        self.client_random: bytes | None = None
        self.server_random: bytes | None = None
        self.failure: str | None = None
        self.decrypted = False
        self.records = 0
        self.app_bytes = [0, 0]
        self.hello_retry = False
        self._version_id = 0
        self._suite: Suite | None = None
        self._secrets: dict[str, bytes] | None = None
        self._offered_early_data = False

    # -- saving and restoring (kwire.capture.carry) ----------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """The session without a secret: not the key log, not this connection's secrets from it,
        not the keys derived from them (the sides keep how to derive them again: `attach`)."""
        state = self.__dict__.copy()
        state["_keylog"] = None
        state["_secrets"] = self._secrets is not None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def attach(self, keylog: KeyLog) -> None:
        """After unpickling: takes `keylog` (the one the session was made with, or one with the
        same secrets for this connection) and derives the keys again. Raises ValueError when
        the key log lacks a secret the session used."""
        had_secrets = bool(self._secrets)  # what __getstate__ left of them
        self._keylog = keylog
        self._secrets = None
        if had_secrets:
            cr = self.client_random
            self._secrets = keylog.secrets(cr) if cr is not None else None
            if self._secrets is None:
                raise ValueError(
                    f"the key log has no secrets for client random {self._random_text()}"
                )
        for side, st in enumerate(self._sides):
            recipes, st.recipes = st.recipes, None
            if recipes is not None:
                st.keys = self._derive(side, recipes[0])
                st.pending = self._derive(side, recipes[1])

    def _derive(self, side: int, recipe: _Recipe | None) -> _Keys | None:
        if recipe is None:
            return None
        label, updates, etm, seq = recipe
        suite = self._suite
        secret = (self._secrets or {}).get(label or "CLIENT_RANDOM")
        if secret is None or suite is None:
            raise ValueError(
                f"the key log has no {label or 'CLIENT_RANDOM'} for client random "
                f"{self._random_text()}"
            )
        keys: _Keys
        if label:
            keys = _Tls13Keys(suite, secret, label)
            for _ in range(updates):
                keys = keys.updated()
        else:
            keys = self._keys_tls12_sides(suite, secret, etm)[side]
        keys.seq = seq
        return keys

    def __repr__(self) -> str:
        return (
            f"TlsSession(version={self.version!r}, cipher_suite={self.cipher_suite!r}, "
            f"records={self.records}, decrypted={self.decrypted}, failure={self.failure!r})"
        )

    @property
    def skipped_records(self) -> list[int]:
        """Per side, records skipped before the first that the traffic key opened."""
        return [self._sides[0].skipped, self._sides[1].skipped]

    # -- failures ------------------------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason

    def _stop(self, side: int, reason: str) -> None:
        self._fail(reason)
        self._sides[side].stopped = True

    def _stop_all(self, reason: str) -> None:
        self._fail(reason)
        for st in self._sides:
            st.stopped = True

    def _random_text(self) -> str:
        cr = self.client_random
        return (cr[:4].hex() + "…") if cr is not None else "?"

    # -- stream input --------------------------------------------------------------------------

    def _kill(self, side: int, reason: str | None) -> None:
        st = self._sides[side]
        st.dead = True
        st.stopped = True
        st.buf = bytearray()
        st.hs_body = None
        if reason is not None:
            self._fail(reason)

    def hole(self, side: int, n: int, ts: int) -> None:
        st = self._sides[side]
        if st.dead:
            return
        # After a close_notify nothing more of the side matters.
        self._kill(side, None if st.closed else f"{n} bytes of the TLS stream were not captured")

    def stopped(self, side: int) -> bool:
        """Whether this side decrypts no more because it cannot (no key, a hole, a record that
        failed), not because it ended with a close_notify."""
        st = self._sides[side]
        return (st.stopped or st.dead) and not st.closed

    def feed(self, side: int, data: bytes, ts: int) -> list[tuple[int, bytes, int]]:
        st = self._sides[side]
        if st.dead or not data:
            return []
        if st.buf:
            st.buf += data
            if len(st.buf) < st.need:
                return []
            data = bytes(st.buf)
            st.buf = bytearray()
        elif type(data) is not bytes:
            data = bytes(data)
        out: list[bytes] = []
        n = len(data)
        view = memoryview(data)
        pos = 0
        record = self._record
        while n - pos >= 5:
            ctype = data[pos]
            length = (data[pos + 3] << 8) | data[pos + 4]
            if (
                ctype < CT_CHANGE_CIPHER_SPEC
                or ctype > CT_HEARTBEAT
                or data[pos + 1] != 3
                or data[pos + 2] > 4
                or length > MAX_RECORD
            ):
                where = f"byte {st.consumed + pos} of the {_SIDE_NAMES[side]} stream"
                # After a close_notify the rest of the stream does not matter.
                self._kill(side, None if st.closed else f"not a TLS record at {where}")
                return [(side, b"".join(out), ts)] if out else []
            end = pos + 5 + length
            if end > n:
                break
            record(side, st, data[pos : pos + 5], view[pos + 5 : end], out)
            pos = end
            if st.dead:
                return [(side, b"".join(out), ts)] if out else []
        if pos < n:
            st.buf += view[pos:]
            st.need = 5 + ((data[pos + 3] << 8) | data[pos + 4]) if n - pos >= 5 else 5
        st.consumed += pos
        if not out:
            return []
        return [(side, out[0] if len(out) == 1 else b"".join(out), ts)]

    # -- records -------------------------------------------------------------------------------

    def _record(
        self, side: int, st: _Side, header: bytes, fragment: memoryview, out: list[bytes]
    ) -> None:
        ctype = header[0]
        st.records += 1
        self.records += 1
        if ctype == CT_APPLICATION_DATA:
            self.app_bytes[side] += len(fragment)
        if st.stopped:
            return
        if st.first:
            st.first = False
            head = fragment[0] if fragment else -1
            expected = _HS_CLIENT_HELLO if side == 0 else _HS_SERVER_HELLO
            if not (ctype == CT_HANDSHAKE and head == expected) and not (
                side == 1 and ctype == CT_ALERT
            ):
                self._stop_all("the TLS handshake is not in the capture")
                return
        keys = st.keys
        if keys is not None and (ctype == CT_APPLICATION_DATA or st.encrypt_all):
            try:
                inner, payload = keys.open(header, fragment)
            except _BadRecord:
                if st.trial:
                    st.skipped += 1
                    if st.skipped > _MAX_TRIAL_SKIPS:
                        self._stop(
                            side,
                            f"no record of the {_SIDE_NAMES[side]} authenticated with its "
                            "traffic secret (wrong key?)",
                        )
                    return
                self._stop(
                    side,
                    f"record {st.records} of the {_SIDE_NAMES[side]} failed authentication "
                    "(wrong key?)",
                )
                return
            st.trial = False
            if inner == CT_APPLICATION_DATA:
                if payload:
                    out.append(payload)
                self.decrypted = True
            elif inner == CT_HANDSHAKE:
                self._handshake(side, st, payload, True)
            elif inner == CT_ALERT:
                self._alert(st, payload)
            return
        if ctype == CT_HANDSHAKE:
            self._handshake(side, st, fragment, False)
        elif ctype == CT_CHANGE_CIPHER_SPEC:
            self._change_cipher_spec(side, st)
        elif ctype == CT_ALERT:
            self._alert(st, fragment)
        elif ctype == CT_APPLICATION_DATA:
            if side == 0 and self._version_id == 0 and self.client_random is not None:
                # Client application data before the ServerHello: TLS 1.3 0-RTT.
                st.early += 1
                self._fail("0-RTT early data is not supported")
            elif self._suite is None:
                self._stop_all("the TLS handshake is not in the capture")

    def _alert(self, st: _Side, payload: bytes | memoryview) -> None:
        if len(payload) >= 2 and (payload[1] == 0 or payload[0] == 2):
            # close_notify or a fatal alert: the side ends quietly.
            st.closed = True
            st.stopped = True

    def _change_cipher_spec(self, side: int, st: _Side) -> None:
        if self._version_id != 0x0303:
            return  # TLS 1.3 middlebox compatibility (or before the ServerHello): ignored
        if st.pending is None:
            st.stopped = True  # the failure was set when the ServerHello was read
            return
        st.keys = st.pending
        st.pending = None
        st.encrypt_all = True

    # -- handshake messages --------------------------------------------------------------------

    def _handshake(self, side: int, st: _Side, data: bytes | memoryview, encrypted: bool) -> None:
        pos = 0
        n = len(data)
        while True:
            if st.hs_left < 0:
                if pos >= n:
                    return
                take = min(4 - len(st.hs_head), n - pos)
                st.hs_head += data[pos : pos + take]
                pos += take
                if len(st.hs_head) < 4:
                    return
                head = st.hs_head
                st.hs_type = head[0]
                st.hs_left = (head[1] << 16) | (head[2] << 8) | head[3]
                st.hs_head = bytearray()
                if st.hs_type in (_HS_CLIENT_HELLO, _HS_SERVER_HELLO):
                    if st.hs_left > MAX_HANDSHAKE_MESSAGE:
                        self._stop_all(
                            f"a TLS handshake message of {st.hs_left} bytes from the "
                            f"{_SIDE_NAMES[side]} is too long"
                        )
                        st.hs_body = None
                        return
                    st.hs_body = bytearray()
                else:
                    st.hs_body = None  # not needed: skipped without buffering
            take = min(st.hs_left, n - pos)
            if take:
                if st.hs_body is not None:
                    st.hs_body += data[pos : pos + take]
                pos += take
                st.hs_left -= take
            if st.hs_left:
                return
            st.hs_left = -1
            body = bytes(st.hs_body) if st.hs_body is not None else b""
            st.hs_body = None
            self._message(side, st, st.hs_type, body, encrypted)
            if st.stopped:
                return

    def _message(self, side: int, st: _Side, msg_type: int, body: bytes, encrypted: bool) -> None:
        if msg_type in (_HS_CLIENT_HELLO, _HS_SERVER_HELLO) and encrypted:
            self._stop_all("TLS renegotiation is not supported")
        elif msg_type == _HS_CLIENT_HELLO and side == 0:
            self._client_hello(body)
        elif msg_type == _HS_SERVER_HELLO and side == 1:
            self._server_hello(body)
        elif self._version_id == 0x0304 and msg_type == _HS_FINISHED and st.handshake_epoch:
            self._enter_application_epoch(side, st)
        elif self._version_id == 0x0304 and msg_type == _HS_KEY_UPDATE and not st.handshake_epoch:
            if isinstance(st.keys, _Tls13Keys):
                st.keys = st.keys.updated()

    @staticmethod
    def _extensions(body: bytes, pos: int) -> dict[int, bytes]:
        exts: dict[int, bytes] = {}
        if pos + 2 > len(body):
            return exts
        end = min(len(body), pos + 2 + int.from_bytes(body[pos : pos + 2], "big"))
        pos += 2
        while pos + 4 <= end:
            etype = int.from_bytes(body[pos : pos + 2], "big")
            elen = int.from_bytes(body[pos + 2 : pos + 4], "big")
            exts[etype] = body[pos + 4 : pos + 4 + elen]
            pos += 4 + elen
        return exts

    def _client_hello(self, body: bytes) -> None:
        if self.client_random is not None:
            return  # the second ClientHello after a HelloRetryRequest keeps the first random
        if len(body) < 35:
            self._stop_all("the ClientHello is malformed")
            return
        self.client_random = body[2:34]
        try:
            pos = 34
            pos += 1 + body[pos]  # session id
            pos += 2 + int.from_bytes(body[pos : pos + 2], "big")  # cipher suites
            pos += 1 + body[pos]  # compression methods
            exts = self._extensions(body, pos)
        except IndexError:
            exts = {}
        self._offered_early_data = _EXT_EARLY_DATA in exts

    def _server_hello(self, body: bytes) -> None:
        try:
            legacy = int.from_bytes(body[0:2], "big")
            server_random = body[2:34]
            pos = 35 + body[34]
            suite_id = int.from_bytes(body[pos : pos + 2], "big")
            if len(server_random) != 32 or pos + 3 > len(body):
                raise IndexError
            exts = self._extensions(body, pos + 3)
        except IndexError:
            self._stop_all("the ServerHello is malformed")
            return
        if server_random == HRR_RANDOM:
            self.hello_retry = True
            return  # the real ServerHello follows the client's second ClientHello
        selected = exts.get(_EXT_SUPPORTED_VERSIONS)
        version_id = int.from_bytes(selected, "big") if selected and len(selected) == 2 else legacy
        self._version_id = version_id
        self.version = _VERSIONS.get(version_id, f"0x{version_id:04x}")
        self.server_random = server_random
        self.cipher_suite = suite_name(suite_id)
        if self.client_random is None:
            self._stop_all("the TLS handshake is not in the capture")
            return
        if version_id not in (0x0303, 0x0304):
            self._stop_all(f"unsupported TLS version {self.version}")
            return
        suite = SUITES.get(suite_id)
        if suite is None or (suite.kind == "tls13") != (version_id == 0x0304):
            self._stop_all(f"unsupported cipher suite {self.cipher_suite} (0x{suite_id:04x})")
            return
        self._suite = suite
        secrets = self._keylog.secrets(self.client_random)
        self._secrets = secrets
        if version_id == 0x0304:
            self._keys_tls13(suite, secrets)
        else:
            self._keys_tls12(suite, secrets, _EXT_ENCRYPT_THEN_MAC in exts)

    def _no_key(self) -> str:
        return f"no key for client random {self._random_text()} in the key log"

    def _keys_tls13(self, suite: Suite, secrets: dict[str, bytes] | None) -> None:
        secrets = secrets or {}
        if not any(secrets.get(label) for label in _HANDSHAKE_LABELS + _TRAFFIC_LABELS):
            self._stop_all(self._no_key())
            return
        hash_len = 48 if suite.hash_name == "sha384" else 32
        for side, st in enumerate(self._sides):
            handshake = secrets.get(_HANDSHAKE_LABELS[side])
            traffic = secrets.get(_TRAFFIC_LABELS[side])
            if handshake is None and traffic is None:
                self._stop(
                    side,
                    f"no {_TRAFFIC_LABELS[side]} for client random {self._random_text()} "
                    "in the key log",
                )
                continue
            if any(s is not None and len(s) != hash_len for s in (handshake, traffic)):
                self._stop(
                    side,
                    f"the key log's secrets for client random {self._random_text()} do not "
                    f"fit {suite.name}",
                )
                continue
            if handshake is not None:
                st.keys = _Tls13Keys(suite, handshake, _HANDSHAKE_LABELS[side])
                st.handshake_epoch = True
                # 0-RTT records may still come before the client's handshake records.
                st.trial = side == 0 and (st.early > 0 or self._offered_early_data)
            else:
                assert traffic is not None
                st.keys = _Tls13Keys(suite, traffic, _TRAFFIC_LABELS[side])
                st.trial = True

    def _enter_application_epoch(self, side: int, st: _Side) -> None:
        st.handshake_epoch = False
        traffic = (self._secrets or {}).get(_TRAFFIC_LABELS[side])
        if traffic is None or self._suite is None:
            self._stop(
                side,
                f"no {_TRAFFIC_LABELS[side]} for client random {self._random_text()} "
                "in the key log",
            )
            return
        st.keys = _Tls13Keys(self._suite, traffic, _TRAFFIC_LABELS[side])

    def _keys_tls12(self, suite: Suite, secrets: dict[str, bytes] | None, etm: bool) -> None:
        master = (secrets or {}).get("CLIENT_RANDOM")
        if master is None or self.server_random is None or self.client_random is None:
            self._stop_all(self._no_key())
            return
        self._sides[0].pending, self._sides[1].pending = self._keys_tls12_sides(suite, master, etm)

    def _keys_tls12_sides(self, suite: Suite, master: bytes, etm: bool) -> tuple[_Keys, _Keys]:
        """The client's and the server's TLS 1.2 keys from the master secret."""
        assert self.server_random is not None and self.client_random is not None
        seed = self.server_random + self.client_random
        if suite.kind == "gcm":
            kl = suite.key_len
            block = prf12(suite.hash_name, master, b"key expansion", seed, 2 * kl + 8)
            return (
                _Gcm12Keys(block[:kl], block[2 * kl : 2 * kl + 4]),
                _Gcm12Keys(block[kl : 2 * kl], block[2 * kl + 4 :]),
            )
        if suite.kind == "chacha":
            block = prf12(suite.hash_name, master, b"key expansion", seed, 88)
            return (
                _Chacha12Keys(block[:32], block[64:76]),
                _Chacha12Keys(block[32:64], block[76:88]),
            )
        assert suite.mac_name is not None
        ml = _HASHES[suite.mac_name]().digest_size
        kl = suite.key_len
        block = prf12(suite.hash_name, master, b"key expansion", seed, 2 * ml + 2 * kl)
        keys = block[2 * ml :]
        return (
            _Cbc12Keys(suite.mac_name, block[:ml], keys[:kl], etm),
            _Cbc12Keys(suite.mac_name, block[ml : 2 * ml], keys[kl : 2 * kl], etm),
        )
