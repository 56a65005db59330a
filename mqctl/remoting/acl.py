"""ACL signing for RocketMQ remoting (docs/remoting.md#tls-and-acl).

TLS is RocketMQ's: plain TLS on the remoting port itself (no STARTTLS, no separate port), as
``tls.enable=true`` makes NettyRemotingClient open it and ``tls.server.mode`` makes
NettyRemotingServer accept it. mqctl.auth's ``client_context`` and ``server_context`` build the
``ssl.SSLContext`` of each side from PEM files (mqctl's --tls-ca/--tls-cert/--tls-key).

ACL signing is RocketMQ's AclClientRPCHook (acl/common in the RocketMQ source, the ACL 1.0 signature
that ACL 2.0's DefaultAuthenticationProvider checks too): the request carries ``AccessKey`` (and
``SecurityToken`` when there is one) among its ext fields, then ``Signature`` = Base64(HmacSHA1(secret
key, the values of every ext field except Signature, in key order, UTF-8, followed by the body)).
``AclCredentials.sign`` adds the three fields to an ext-field map.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from mqctl.errors import UsageError

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "AclCredentials",
    "signature",
]


def _java_order(key: str) -> list[int]:
    """The sort key of Java's String.compareTo (UTF-16 code units, as RocketMQ's TreeMap orders)."""
    data = key.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def signature(ext_fields: Mapping[str, str], body: bytes, secret_key: str) -> str:
    """RocketMQ's AclUtils.calSignature(AclUtils.combineRequestContent(request, sorted ext fields)):
    Base64(HmacSHA1(secret, concatenated values in key order (Signature left out) + body))."""
    content = "".join(str(ext_fields[k]) for k in sorted(ext_fields, key=_java_order) if k != SIGNATURE)
    mac = hmac.new(secret_key.encode("utf-8"), content.encode("utf-8") + (body or b""), hashlib.sha1)
    return base64.b64encode(mac.digest()).decode("ascii")


@dataclass(frozen=True)
class AclCredentials:
    """RocketMQ's SessionCredentials: AccessKey/SecretKey (and an optional SecurityToken)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise UsageError(
                "ACL signing needs both an access key and a secret key "
                "(--access-key/--secret-key or MQCTL_ACCESS_KEY/MQCTL_SECRET_KEY)"
            )

    def sign(self, ext_fields: Mapping[str, str] | None, body: bytes) -> dict[str, str]:
        """``ext_fields`` plus AccessKey, SecurityToken (if any) and Signature, as
        AclClientRPCHook.doBeforeRequest leaves a request."""
        signed = {k: v for k, v in (ext_fields or {}).items() if v is not None}
        signed[ACCESS_KEY] = self.access_key
        if self.security_token is not None:
            signed[SECURITY_TOKEN] = self.security_token
        signed.pop(SIGNATURE, None)
        signed[SIGNATURE] = signature(signed, body, self.secret_key)
        return signed
