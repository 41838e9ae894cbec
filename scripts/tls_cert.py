"""A self-signed certificate made at run time, for the TLS endpoints of kwire's own test
scenarios and scale data (never committed: the captures' key logs are what the tests need)."""

from __future__ import annotations

import datetime
import ipaddress
from typing import Any


def self_signed(
    key_type: str = "rsa", hosts: tuple[str, ...] = ("localhost",), ips: tuple[str, ...] = ()
) -> tuple[bytes, bytes]:
    """(certificate, private key) in PEM: RSA 2048 or (key_type "ec") P-256, valid from a day ago
    for two days, naming `hosts` and `ips` (the first host is also the subject)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    key: Any = (
        ec.generate_private_key(ec.SECP256R1())
        if key_type == "ec"
        else rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    now = datetime.datetime.now(datetime.timezone.utc)
    names: list[x509.GeneralName] = [x509.DNSName(h) for h in hosts]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
