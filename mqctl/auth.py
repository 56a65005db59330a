"""How a peer proves itself, whatever the transport: TLS material (PEM files, the stdlib ssl contexts
of the remoting port and the HTTP cockpit) and the shared-secret token.

The transports build on it: mqctl.grpc.security (grpc credentials, the bearer metadata) and
mqctl.remoting (TLS contexts; ACL signing in mqctl.remoting.acl). Neither reaches into the other.
"""

from __future__ import annotations

import hmac
import ssl
from dataclasses import dataclass
from pathlib import Path

from mqctl.errors import UsageError


@dataclass(frozen=True)
class TlsConfig:
    """Server TLS: certificate chain and private key (PEM); a client CA turns on mTLS."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None


def read_pem(path: str | Path, what: str) -> bytes:
    """Read a PEM file or raise a one-line UsageError naming it."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    if b"-----BEGIN" not in data:
        raise UsageError(f"{what} {p} is not a PEM file (no '-----BEGIN' line)")
    return data


def check_client_pair(cert_file: object, key_file: object) -> None:
    """A client certificate comes with its key: both or neither (--tls-cert, --tls-key)."""
    if (cert_file is None) != (key_file is None):
        raise UsageError("a TLS client certificate needs both --tls-cert and --tls-key")


def token_matches(got: str | bytes, expected: str | bytes) -> bool:
    """The shared token compared in constant time (no early exit at the first differing byte)."""
    a = got if isinstance(got, bytes) else got.encode()
    b = expected if isinstance(expected, bytes) else expected.encode()
    return hmac.compare_digest(a, b)


def client_context(
    ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None
) -> ssl.SSLContext:
    """Client TLS: verify the server's certificate against ``ca_file`` (the system roots when None)
    and its name against the address dialled; present ``cert_file``/``key_file`` for mutual TLS."""
    check_client_pair(cert_file, key_file)
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if ca_file:
        _load_ca(ctx, ca_file, "TLS CA")
    if cert_file and key_file:
        _load_chain(ctx, cert_file, key_file)
    return ctx


def server_context(cert_file: str, key_file: str, client_ca_file: str | None = None) -> ssl.SSLContext:
    """Server TLS: ``cert_file``/``key_file``; with ``client_ca_file`` clients must present a
    certificate it signed (mutual TLS, as on the gRPC port)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _load_chain(ctx, cert_file, key_file)
    if client_ca_file:
        _load_ca(ctx, client_ca_file, "TLS client CA")
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _load_ca(ctx: ssl.SSLContext, ca_file: str, what: str) -> None:
    ca = read_pem(ca_file, what).decode("ascii", "replace")
    try:
        ctx.load_verify_locations(cadata=ca)
    except ssl.SSLError as exc:
        raise UsageError(f"unusable {what} {ca_file}: {exc}") from None


def _load_chain(ctx: ssl.SSLContext, cert_file: str, key_file: str) -> None:
    read_pem(cert_file, "TLS certificate")
    read_pem(key_file, "TLS key")
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except (ssl.SSLError, OSError) as exc:
        raise UsageError(f"unusable TLS certificate/key {cert_file}, {key_file}: {exc}") from None
