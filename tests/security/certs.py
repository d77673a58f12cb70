"""Test certificates made at test time: a CA, a server and a client certificate (PEM, PKCS#8 keys)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(key: rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def _cert(subject: str, key, issuer_name: x509.Name | None, issuer_key, ca: bool) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name or name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        # the loopback address too: the 5.x SDKs that check the server's name (py5, node5) dial 127.0.0.1
        alt = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_certs(directory: Path) -> dict[str, Path]:
    """ca.pem, server.pem/server.key, client.pem/client.key in ``directory``."""
    ca_key = _key()
    ca = _cert("rmqtx test CA", ca_key, None, ca_key, True)
    out = {"ca": directory / "ca.pem"}
    out["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for who in ("server", "client"):
        key = _key()
        cert = _cert(f"rmqtx test {who}", key, ca.subject, ca_key, False)
        out[f"{who}_cert"] = directory / f"{who}.pem"
        out[f"{who}_key"] = directory / f"{who}.key"
        out[f"{who}_cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, out[f"{who}_key"])
    return out
