"""A throw-away PKI for TLS tests, generated with `cryptography`: a CA, a server certificate for the
given names (IP addresses become IP SANs), a client certificate, and a second CA that signed none of
them. Every file is PEM; keys are unencrypted PKCS#8, which Python's ssl, gRPC and Netty all read.

(A unique module name at the top of tests/, importable from every test directory.)
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class PkiFiles:
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    other_ca: str  # a CA that signed nothing used here


def write_pki(directory: Path, server_names: list[str] | None = None) -> PkiFiles:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    names = server_names or ["localhost", "127.0.0.1"]
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def ca_cert(k: Any, cn: str) -> x509.Certificate:
        return (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(name(cn))
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(k, hashes.SHA256())
        )

    def leaf(
        k: Any, cn: str, ca: x509.Certificate, ca_key: Any, sans: list[x509.GeneralName], usage: Any
    ) -> x509.Certificate:
        b = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(ca.subject)
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return b.sign(ca_key, hashes.SHA256())

    def write(file: str, obj: Any) -> str:
        path = directory / file
        if isinstance(obj, x509.Certificate):
            path.write_bytes(obj.public_bytes(serialization.Encoding.PEM))
        else:
            path.write_bytes(
                obj.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
        return str(path)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = ca_cert(ca_key, "mqctl test CA")
    sans: list[x509.GeneralName] = []
    for n in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            sans.append(x509.DNSName(n))
    s_key, c_key, o_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    server = leaf(s_key, names[0], ca, ca_key, sans, ExtendedKeyUsageOID.SERVER_AUTH)
    client = leaf(c_key, "broker-a", ca, ca_key, [], ExtendedKeyUsageOID.CLIENT_AUTH)
    return PkiFiles(
        ca=write("ca.pem", ca),
        server_cert=write("server.pem", server),
        server_key=write("server.key", s_key),
        client_cert=write("client.pem", client),
        client_key=write("client.key", c_key),
        other_ca=write("other-ca.pem", ca_cert(o_key, "someone else")),
    )
