"""`mqctl serve` settings: flag > MQCTL_* environment > TOML file > default."""

from __future__ import annotations

import pytest

from mqctl.address import is_loopback, parse_address
from mqctl.controller.config import ServeConfig, load, parse_duration_ms
from mqctl.errors import UsageError


def test_precedence(tmp_path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('listen = "127.0.0.1:1111"\nwait-for = 3\nheartbeat-timeout = "2s"\n')
    env = {"MQCTL_LISTEN": "127.0.0.1:2222", "MQCTL_SCAN_INTERVAL": "700ms"}
    cfg = load({"listen": "127.0.0.1:3333"}, str(f), env)
    assert cfg.listen == "127.0.0.1:3333"  # flag wins
    assert cfg.wait_for == 3  # file
    assert cfg.heartbeat_timeout == 2000  # file, with a unit
    assert cfg.scan_interval == 700  # env
    assert load({}, str(f), env).listen == "127.0.0.1:2222"  # env beats file
    assert load({}, None, {}).listen == ServeConfig().listen  # default


def test_serve_section_and_errors(tmp_path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[serve]\nraft = "127.0.0.1:7000"\n')
    assert load({}, str(f), {}).raft == "127.0.0.1:7000"
    f.write_text("not toml [")
    with pytest.raises(UsageError, match="not valid TOML"):
        load({}, str(f), {})
    with pytest.raises(UsageError, match="cannot read config file"):
        load({}, str(tmp_path / "missing.toml"), {})
    with pytest.raises(UsageError, match="wait_for"):
        load({"wait_for": 0}, None, {})
    with pytest.raises(UsageError, match="true or false"):
        load({}, None, {"MQCTL_ENABLE_ELECT_UNCLEAN_MASTER": "maybe"})
    with pytest.raises(UsageError, match="own Raft address"):
        load({"raft": "127.0.0.1:1", "peers": "127.0.0.1:1,127.0.0.1:2"}, None, {})
    with pytest.raises(UsageError, match="go together"):
        load({"tls_cert": str(f)}, None, {})


def test_durations() -> None:
    assert parse_duration_ms("1500", "k") == 1500
    assert parse_duration_ms("1.5s", "k") == 1500
    assert parse_duration_ms(100, "k") == 100
    with pytest.raises(UsageError, match="minimum"):
        parse_duration_ms("99ms", "k")
    with pytest.raises(UsageError, match="expected milliseconds"):
        parse_duration_ms("soon", "k")


def test_host_port() -> None:
    assert parse_address("127.0.0.1:9878") == ("127.0.0.1", 9878)
    assert parse_address("[::1]:9880") == ("::1", 9880)
    assert parse_address("127.0.0.1:0", any_port=True) == ("127.0.0.1", 0)
    for bad in ("127.0.0.1", ":9878", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:65536", "127.0.0.1:0"):
        with pytest.raises(
            UsageError, match=f"^bad Raft address '{bad}': expected HOST:PORT with a port from 1 to 65535$"
        ):
            parse_address(bad, "Raft address")
    assert is_loopback("[::1]") and is_loopback("localhost") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.invalid")


def test_secret_only_needed_beyond_loopback() -> None:
    assert load({"raft": "[::1]:9880", "peers": "localhost:9881"}, None, {}).raft == "[::1]:9880"
    # a peer off loopback is the point here: 192.0.2.1 (TEST-NET-1, documentation only, never routed);
    # load() only reads it, nothing dials it
    with pytest.raises(UsageError, match="not on loopback"):
        load({"peers": "192.0.2.1:9880"}, None, {})
    assert load({"peers": "192.0.2.1:9880", "cluster_secret": "x"}, None, {}).cluster_secret == "x"


def test_wildcard_listen_needs_an_advertised_address() -> None:
    with pytest.raises(UsageError, match="--advertise"):
        load({"listen": "0.0.0.0:9878"}, None, {})
    cfg = load({"listen": "0.0.0.0:9878", "advertise": "127.0.0.1:9878"}, None, {})
    assert cfg.advertise_address() == "127.0.0.1:9878"
    assert load({}, None, {}).advertise_address() == "127.0.0.1:9878"


def test_raft_bind_apart_from_the_advertised_raft_address(tmp_path) -> None:
    cfg = load({"raft": "127.0.0.1:9880"}, None, {})
    assert (cfg.raft_bind, cfg.raft_bind_address()) == ("", "127.0.0.1:9880")
    f = tmp_path / "c.toml"
    f.write_text('raft-bind = "127.0.0.1:7001"\n')
    assert load({}, str(f), {}).raft_bind_address() == "127.0.0.1:7001"
    env = {"MQCTL_RAFT_BIND": "127.0.0.1:7002"}
    assert load({}, str(f), env).raft_bind == "127.0.0.1:7002"
    assert load({"raft_bind": "127.0.0.1:7003"}, str(f), env).raft_bind == "127.0.0.1:7003"
    with pytest.raises(UsageError, match="bad --raft-bind address 'nowhere'"):
        load({"raft_bind": "nowhere"}, None, {})
    # Raft traffic is pickled: listening beyond loopback needs the secret, whatever peers dial
    with pytest.raises(UsageError, match=r"0.0.0.0:9880 is not on loopback"):
        load({"raft_bind": "0.0.0.0:9880"}, None, {})
    cfg = load({"raft": "127.0.0.1:9881", "raft_bind": "0.0.0.0:9880", "cluster_secret": "x"}, None, {})
    assert (cfg.raft, cfg.raft_bind_address()) == ("127.0.0.1:9881", "0.0.0.0:9880")


def test_remoting_advertised_apart_from_its_port() -> None:
    cfg = load({"remoting_port": "9878", "advertise_remoting": "127.0.0.1:19878"}, None, {})
    assert (cfg.remoting_listen(), cfg.remoting_advertise()) == ("127.0.0.1:9878", "127.0.0.1:19878")
    env = {"MQCTL_REMOTING_PORT": "9878", "MQCTL_ADVERTISE_REMOTING": "127.0.0.1:19879"}
    assert load({}, None, env).remoting_advertise() == "127.0.0.1:19879"
    with pytest.raises(UsageError, match="needs --remoting-port"):
        load({"advertise_remoting": "127.0.0.1:19878"}, None, {})
    with pytest.raises(UsageError, match="not an address clients can dial"):
        load({"remoting_port": "9878", "advertise_remoting": "0.0.0.0:9878"}, None, {})


def test_handover_timeout() -> None:
    assert load({}, None, {}).handover_timeout == 5000
    assert load({"handover_timeout": "2s"}, None, {}).handover_timeout == 2000
    assert load({}, None, {"MQCTL_HANDOVER_TIMEOUT": "0"}).handover_timeout == 0  # off
    with pytest.raises(UsageError, match="below the minimum"):
        load({"handover_timeout": "50ms"}, None, {})
