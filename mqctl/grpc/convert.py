"""Proto message <-> plain dict, as the NodeAPI contract wants them (docs/architecture.md).

- keys are the proto field names;
- a field with presence (``optional`` scalars, singular messages) is absent when unset;
- other scalars are always present, with their proto3 default when unset;
- repeated fields are lists, maps are dicts (int64 map keys stay ``int``), nested messages are dicts;
- 64-bit integers stay ``int`` (``json_format.MessageToDict`` would turn them into strings).

``dict_to_message`` ignores keys the message does not have and treats ``None`` as "unset", so a
response dict from the core can carry extra keys without breaking the transport. Values of the
wrong type raise ``TypeError``/``ValueError`` naming the field.

Pure functions, no gRPC import: only protobuf.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

M = TypeVar("M", bound=Message)

_INT_RANGES = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}


def _is_map(field: FieldDescriptor) -> bool:
    mt = field.message_type
    if not field.is_repeated or mt is None:
        return False
    return bool(mt.GetOptions().map_entry)


def _is_message(field: FieldDescriptor) -> bool:
    return bool(field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE)


def message_to_dict(msg: Message) -> dict[str, Any]:
    """Convert a message to a plain dict per the NodeAPI contract (see the module docstring)."""
    out: dict[str, Any] = {}
    desc: Descriptor = msg.DESCRIPTOR
    for field in desc.fields:
        name = field.name
        value = getattr(msg, name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            if _is_message(value_field):
                out[name] = {k: message_to_dict(v) for k, v in value.items()}
            else:
                out[name] = dict(value.items())
        elif field.is_repeated:
            if _is_message(field):
                out[name] = [message_to_dict(v) for v in value]
            else:
                out[name] = list(value)
        elif field.has_presence:
            if msg.HasField(name):
                out[name] = message_to_dict(value) if _is_message(field) else value
        else:
            out[name] = value
    return out


def _scalar(field: FieldDescriptor, value: Any, where: str) -> Any:
    ct = field.cpp_type
    if ct in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            # Accept integral strings and floats (JSON round trips), refuse anything else.
            if isinstance(value, str):
                try:
                    value = int(value.strip())
                except ValueError:
                    raise ValueError(f"{where}: expected an integer, got {value!r}") from None
            elif isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise TypeError(f"{where}: expected an integer, got {type(value).__name__} {value!r}")
        lo, hi = _INT_RANGES[ct]
        if not lo <= value <= hi:
            raise ValueError(f"{where}: {value} is out of range [{lo}, {hi}]")
        return value
    if ct == FieldDescriptor.CPPTYPE_BOOL:
        if not isinstance(value, bool):
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            raise TypeError(f"{where}: expected a boolean, got {value!r}")
        return value
    if ct == FieldDescriptor.CPPTYPE_STRING:
        if field.type == FieldDescriptor.TYPE_BYTES:
            if isinstance(value, str):
                return value.encode()
            return bytes(value)
        if not isinstance(value, str):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return str(value)
            raise TypeError(f"{where}: expected a string, got {type(value).__name__} {value!r}")
        return value
    if ct in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
        return float(value)
    if ct == FieldDescriptor.CPPTYPE_ENUM:
        return int(value)
    raise TypeError(f"{where}: unsupported field type")  # pragma: no cover


def _map_key(field: FieldDescriptor, key: Any, where: str) -> Any:
    key_field = field.message_type.fields_by_name["key"]
    return _scalar(key_field, key, f"{where} key")


def fill_message(msg: M, data: Mapping[str, Any]) -> M:
    """Set the fields of ``msg`` from ``data`` (see ``dict_to_message``); returns ``msg``."""
    desc: Descriptor = msg.DESCRIPTOR
    fields = desc.fields_by_name
    for name, value in data.items():
        field = fields.get(name)
        if field is None or value is None:
            continue
        where = f"{desc.name}.{name}"
        if _is_map(field):
            if not isinstance(value, Mapping):
                raise TypeError(f"{where}: expected a mapping, got {type(value).__name__}")
            target = getattr(msg, name)
            value_field = field.message_type.fields_by_name["value"]
            for k, v in value.items():
                key = _map_key(field, k, where)
                if _is_message(value_field):
                    if not isinstance(v, Mapping):
                        raise TypeError(f"{where}[{k!r}]: expected a mapping, got {type(v).__name__}")
                    fill_message(target[key], v)
                else:
                    target[key] = _scalar(value_field, v, f"{where}[{k!r}]")
        elif field.is_repeated:
            if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
                raise TypeError(f"{where}: expected a list, got {type(value).__name__}")
            target = getattr(msg, name)
            for i, item in enumerate(value):
                if _is_message(field):
                    if not isinstance(item, Mapping):
                        raise TypeError(f"{where}[{i}]: expected a mapping, got {type(item).__name__}")
                    fill_message(target.add(), item)
                else:
                    target.append(_scalar(field, item, f"{where}[{i}]"))
        elif _is_message(field):
            if not isinstance(value, Mapping):
                raise TypeError(f"{where}: expected a mapping, got {type(value).__name__}")
            sub = getattr(msg, name)
            sub.SetInParent()
            fill_message(sub, value)
        else:
            setattr(msg, name, _scalar(field, value, where))
    return msg


def dict_to_message(data: Mapping[str, Any], cls: type[M]) -> M:
    """Build a ``cls`` message from a dict keyed by proto field names.

    Unknown keys and ``None`` values are ignored; a present optional field is set even when
    its value is the default (``{"broker_id": 0}`` sets ``broker_id`` to 0 with presence).
    Out-of-range integers raise ``ValueError`` naming the field.
    """
    msg: M = cls()
    return fill_message(msg, data)
