"""mqctl.grpc.convert: proto <-> dict per the NodeAPI contract, with round trips."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import given, settings
from hypothesis import strategies as st

from mqctl.grpc.convert import dict_to_message, message_to_dict
from mqctl.v1 import controller_pb2 as pb

MESSAGE_CLASSES = [getattr(pb, name) for name in sorted(pb.DESCRIPTOR.message_types_by_name)]

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_RANGES = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.cpp_type in _RANGES:
        lo, hi = _RANGES[field.cpp_type]
        return st.integers(lo, hi)
    if field.cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        return st.booleans()
    if field.cpp_type == FieldDescriptor.CPPTYPE_STRING:
        return _TEXT
    raise AssertionError(f"no strategy for {field.full_name}")


def _dicts(desc: Descriptor) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts as the contract shapes them; optional fields may be left out."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for field in desc.fields:
        mt = field.message_type
        if field.is_repeated and mt is not None and mt.GetOptions().map_entry:
            key, value = mt.fields_by_name["key"], mt.fields_by_name["value"]
            value_st = _dicts(value.message_type) if value.message_type else _scalar(value)
            strategy: st.SearchStrategy[Any] = st.dictionaries(_scalar(key), value_st, max_size=3)
        elif field.is_repeated:
            item = _dicts(mt) if mt is not None else _scalar(field)
            strategy = st.lists(item, max_size=4)
        elif mt is not None:
            strategy = _dicts(mt)
        else:
            strategy = _scalar(field)
        (optional if field.has_presence else required)[field.name] = strategy
    return st.fixed_dictionaries(required, optional=optional)


@pytest.mark.parametrize("cls", MESSAGE_CLASSES, ids=lambda c: c.DESCRIPTOR.name)
def test_round_trip_every_message(cls: Any) -> None:
    @settings(max_examples=60, deadline=None)
    @given(_dicts(cls.DESCRIPTOR))
    def check(d: dict[str, Any]) -> None:
        msg = dict_to_message(d, cls)
        assert message_to_dict(msg) == d  # a fully shaped dict survives unchanged
        assert dict_to_message(message_to_dict(msg), cls) == msg

    check()


def test_int64_stays_int_and_optional_zero_is_present() -> None:
    big = 2**62 + 1
    msg = dict_to_message({"broker_id": 0, "max_offset": big, "broker_epoch": 7}, pb.HeartbeatRequest)
    d = message_to_dict(msg)
    assert d["max_offset"] == big and isinstance(d["max_offset"], int)
    assert d["broker_id"] == 0  # set to the default, still present
    assert "epoch" not in d and "confirm_offset" not in d  # unset optionals are absent
    assert d["cluster_name"] == ""  # plain proto3 scalars are always there


def test_nested_and_maps() -> None:
    d = message_to_dict(
        dict_to_message(
            {
                "code": 2011,
                "master_broker_id": 1,
                "sync_state_set": [1, 2],
                "broker_member_group": {
                    "cluster": "c",
                    "broker_name": "b",
                    "broker_addrs": {"1": "h:1", 2: "h:2"},
                },
            },
            pb.ElectMasterResponse,
        )
    )
    assert d["broker_member_group"]["broker_addrs"] == {1: "h:1", 2: "h:2"}  # int64 keys as int
    assert d["sync_state_set"] == [1, 2]
    assert "master_epoch" not in d
    # an unset singular message is absent
    assert "broker_member_group" not in message_to_dict(pb.ElectMasterResponse())
    table = message_to_dict(
        dict_to_message(
            {"replicas_info_table": {"b": {"in_sync_replicas": [{"broker_id": 3, "alive": True}]}}},
            pb.GetSyncStateDataResponse,
        )
    )["replicas_info_table"]
    assert table["b"]["in_sync_replicas"][0]["broker_id"] == 3
    assert "master_broker_id" not in table["b"]


def test_unknown_keys_and_none_are_ignored() -> None:
    msg = dict_to_message(
        {"broker_name": "b", "events": [{"type": "x"}], "broker_id": None}, pb.HeartbeatRequest
    )
    assert message_to_dict(msg) == message_to_dict(pb.HeartbeatRequest(broker_name="b"))


@pytest.mark.parametrize(
    ("data", "cls", "error", "text"),
    [
        ({"master_epoch": 2**31}, pb.ElectMasterResponse, ValueError, "ElectMasterResponse.master_epoch"),
        ({"broker_id": "x"}, pb.HeartbeatRequest, ValueError, "HeartbeatRequest.broker_id"),
        ({"broker_id": 1.5}, pb.HeartbeatRequest, TypeError, "HeartbeatRequest.broker_id"),
        ({"broker_name": ["a"]}, pb.HeartbeatRequest, TypeError, "HeartbeatRequest.broker_name"),
        ({"new_sync_state_set": "1,2"}, pb.AlterSyncStateSetRequest, TypeError, "new_sync_state_set"),
        ({"config": [("a", "b")]}, pb.UpdateConfigRequest, TypeError, "UpdateConfigRequest.config"),
        ({"designate_elect": "maybe"}, pb.ElectMasterRequest, TypeError, "designate_elect"),
    ],
)
def test_bad_values_name_the_field(data: dict[str, Any], cls: Any, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text.replace(".", r"\.")):
        dict_to_message(data, cls)


def test_lenient_json_shapes() -> None:
    # JSON turns int map keys into strings and may carry integral floats: both are accepted.
    msg = dict_to_message({"broker_id": 3.0, "designate_elect": "true"}, pb.ElectMasterRequest)
    assert message_to_dict(msg)["broker_id"] == 3 and msg.designate_elect is True
