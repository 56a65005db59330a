"""TLS and mTLS on a real `mqctl serve` process (the in-process variants are in test_grpc_security)."""

from __future__ import annotations

import pytest
from tls_pki import PkiFiles

from mqctl.client import ControllerClient
from mqctl.errors import Code, ControllerError
from mqctl.localgroup import LocalCluster, wait_until

pytestmark = pytest.mark.slow


def test_serve_with_mutual_tls(tmp_path, pki: PkiFiles) -> None:
    args = ["--tls-cert", pki.server_cert, "--tls-key", pki.server_key, "--tls-ca", pki.ca]
    with LocalCluster(str(tmp_path / "c"), size=1, extra_args=args) as cluster:
        cluster.start(wait=False)
        with ControllerClient(
            cluster.addresses, tls_ca=pki.ca, tls_cert=pki.client_cert, tls_key=pki.client_key, timeout=20
        ) as client:
            # the node answers over TLS before it has elected itself: wait for the election
            wait_until(lambda: client.get_metadata().is_leader, 30, what="TLS metadata of a leader")
            wait_until(lambda: client.get_metadata().group_id, 30, what="group id")
            assert client.get_next_broker_id("c", "b").next_broker_id == 1
        with ControllerClient(cluster.addresses, tls_ca=pki.ca, timeout=3) as no_cert:
            with pytest.raises(ControllerError) as err:
                no_cert.get_next_broker_id("c", "b")
            assert err.value.code == Code.UNAVAILABLE
        with ControllerClient(cluster.addresses, timeout=3) as plain:
            with pytest.raises(ControllerError) as err:
                plain.get_next_broker_id("c", "b")
            assert err.value.code == Code.UNAVAILABLE
