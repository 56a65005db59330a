"""A method's typed response, one class for both sides: a rule answers it, ``Result.answer`` writes
it as the transports' dict (``to_dict``), and the clients read that dict back (``from_dict``).

Each class sits beside its rule (its row in mqctl.methods names it: ``response``); mqctl.api
re-exports them for the clients. Pure: no I/O, no imports beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar

__all__ = ["Ack", "Response", "ids", "pick", "sync_state_set_body", "sync_state_set_of"]

T = TypeVar("T")


def pick(cls: type[T], d: Mapping[str, Any], **override: Any) -> T:
    """Build dataclass ``cls`` from the keys of ``d`` it knows; ``override`` wins. A map field (one
    whose default is an empty dict) gets a copy of its own, and an empty one for None."""
    kwargs = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in d:
            value = d[f.name]
            kwargs[f.name] = dict(value or {}) if f.default_factory is dict else value
    kwargs.update(override)
    return cls(**kwargs)


def ids(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in (value or ()))


def sync_state_set_body(members: Iterable[int], epoch: int) -> dict[str, Any]:
    """The SyncStateSet body as the transports carry it (remoting: RocketMQ's SyncStateSet)."""
    return {"sync_state_set": sorted(members), "sync_state_set_epoch": epoch}


def sync_state_set_of(d: Mapping[str, Any]) -> tuple[tuple[int, ...], int | None]:
    """Flatten a SyncStateSet body: (ids, epoch or None when the body is absent)."""
    body = d.get("sync_state_set")
    if isinstance(body, Mapping):
        return ids(body.get("sync_state_set")), int(body.get("sync_state_set_epoch", 0))
    return ids(body), None


def _wire(value: Any) -> Any:
    if isinstance(value, Response):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_wire(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _wire(v) for k, v in value.items()}
    return value


_FIELDS: dict[type, tuple[str, ...]] = {}  # a class's answer fields, read once


def _answer_fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS[cls] = tuple(f.name for f in fields(cls) if f.name != "remark")
    return names


class Response:
    """The base of the response dataclasses. ``to_dict`` is the wire form (proto field names): a
    field that is None is absent, as the transports read absence; ``remark`` is the Result's, not a
    field of the answer. A class whose wire form nests or omits more says so in its own ``to_dict``."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        names = _FIELDS.get(type(self))
        for name in _answer_fields(type(self)) if names is None else names:
            value = getattr(self, name)
            if value is not None:
                out[name] = _wire(value)
        return out

    @classmethod
    def from_dict(cls: type[T], d: Mapping[str, Any]) -> T:
        return pick(cls, d)


@dataclass(frozen=True)
class Ack(Response):
    """An answer without fields (Heartbeat, CleanBrokerData)."""

    remark: str = ""
