"""TLS credentials and the bearer token for the gRPC API.

Server: ``server_credentials(TlsConfig(cert, key, client_ca=None))``, TlsConfig and the PEM reading
being mqctl.auth's (shared with the other transports). With a client CA the server requires and
verifies client certificates (mTLS). Client: ``channel_credentials(ca, cert, key)``.

Token: the mutating admin calls (which ones is ``mqctl.methods.requires_token``, the one copy of
the rule) must carry ``authorization: Bearer <token>`` metadata when the server was started with a
token; ``check_bearer`` compares in constant time (mqctl.auth.token_matches).

grpc is imported inside the functions, so the CLI can import this module cheaply.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqctl.auth import TlsConfig, check_client_pair, read_pem, token_matches
from mqctl.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import grpc

AUTH_METADATA_KEY = "authorization"
BEARER_PREFIX = "Bearer "


def server_credentials(tls: TlsConfig) -> grpc.ServerCredentials:
    import grpc  # lazy: grpc

    cert = read_pem(tls.cert_file, "TLS certificate")
    key = read_pem(tls.key_file, "TLS key")
    ca = read_pem(tls.client_ca_file, "TLS client CA") if tls.client_ca_file else None
    try:
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
        )
    except Exception as exc:  # grpc raises plain errors for unusable PEM material
        raise UsageError(f"unusable TLS certificate/key {tls.cert_file}, {tls.key_file}: {exc}") from None


def channel_credentials(
    ca_file: str | Path | None = None,
    cert_file: str | Path | None = None,
    key_file: str | Path | None = None,
) -> grpc.ChannelCredentials:
    """Client TLS: trust ``ca_file`` (system roots when None); present a client cert for mTLS."""
    import grpc  # lazy: grpc

    check_client_pair(cert_file, key_file)
    ca = read_pem(ca_file, "TLS CA") if ca_file else None
    cert = read_pem(cert_file, "TLS client certificate") if cert_file else None
    key = read_pem(key_file, "TLS client key") if key_file else None
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def bearer_metadata(token: str | None) -> list[tuple[str, str]]:
    """The call metadata that carries ``token`` (empty when there is none)."""
    return [(AUTH_METADATA_KEY, BEARER_PREFIX + token)] if token else []


def check_bearer(metadata: Iterable[Any] | None, expected: str | None) -> bool:
    """True when no token is expected, or ``metadata`` carries ``authorization: Bearer <expected>``.

    ``metadata`` is what ``ServicerContext.invocation_metadata()`` returns (objects with
    ``.key``/``.value`` or ``(key, value)`` pairs). The comparison is constant-time.
    """
    if not expected:
        return True
    want = (BEARER_PREFIX + expected).encode()
    ok = False
    for item in metadata or ():
        key, value = (item.key, item.value) if hasattr(item, "key") else item
        if str(key).lower() != AUTH_METADATA_KEY:
            continue
        got = value if isinstance(value, bytes) else str(value).encode()
        # No early exit: every authorization header is compared.
        ok = token_matches(got, want) or ok
    return ok
