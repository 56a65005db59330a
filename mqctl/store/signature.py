"""mqctl's store signature file, `<root>/mqctl-signature.json` (the cluster-join seed, 002).

mqctl never changes RocketMQ's files to record this; it keeps one JSON file beside them::

    {
      "format": 1,
      "initial": {"id": "<sha256 hex>", "clusterName": "...", "brokerName": "...",
                  "firstEpoch": 1, "firstEpochStartOffset": 0,
                  "source": "derived" | "mqctl", "time": 1700000000000},
      "final":   {"id": "<sha256 hex>", "initialId": "...", "lastEpoch": 3, "lastEpochStartOffset": 4096,
                  "maxOffset": 8192, "time": 1700000000000, "abort": null | "<abort file text>",
                  "manual": true}
    }

* The initial signature identifies the stores of one broker set and never changes. For a plain RocketMQ
  store it is derived from what the store holds: cluster and broker name from `brokerIdentity` and the
  first entry of the epoch history; `id` = sha256 of `clusterName#brokerName#firstEpoch-firstStartOffset`.
* The final signature marks an orderly shutdown (or an operator's `mqctl recover mark-clean`) and how far
  the store got; `id` = sha256 of `initialId#lastEpoch-lastEpochStartOffset#maxOffset`, so two clean
  stores agree exactly when their ids are equal. `time` is informational. `abort` records the text of
  RocketMQ's `abort` file that the operator acknowledged (mark-clean leaves RocketMQ's file alone).

Writes go through RocketMQ's string2File order (previous content to `.bak`, then the file).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqctl.camel import camel_fields
from mqctl.store._util import read_parsed, store_error, string_to_file

SIGNATURE_FILE = "mqctl-signature.json"
FORMAT = 1

__all__ = [
    "SIGNATURE_FILE",
    "FinalSignature",
    "InitialSignature",
    "Signature",
    "derive_initial",
    "encode_signature",
    "make_final",
    "parse_signature",
    "read_signature",
    "write_signature",
]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class InitialSignature:
    id: str
    cluster_name: str
    broker_name: str
    first_epoch: int
    first_epoch_start_offset: int
    source: str = "derived"
    time: int = 0

    def to_dict(self) -> dict[str, Any]:
        return camel_fields(self)


@dataclass(frozen=True)
class FinalSignature:
    id: str
    initial_id: str
    last_epoch: int
    last_epoch_start_offset: int
    max_offset: int
    time: int
    abort: str | None = None
    manual: bool = False

    def to_dict(self) -> dict[str, Any]:
        return camel_fields(self)


@dataclass(frozen=True)
class Signature:
    initial: InitialSignature | None
    final: FinalSignature | None


def derive_initial(
    cluster_name: str,
    broker_name: str,
    first_epoch: int,
    first_start: int,
    *,
    source: str = "derived",
    time: int = 0,
) -> InitialSignature:
    sid = _sha(f"{cluster_name}#{broker_name}#{first_epoch}-{first_start}")
    return InitialSignature(sid, cluster_name, broker_name, first_epoch, first_start, source, time)


def make_final(
    initial_id: str,
    last_epoch: int,
    last_start: int,
    max_offset: int,
    time: int,
    *,
    abort: str | None = None,
    manual: bool = False,
) -> FinalSignature:
    sid = _sha(f"{initial_id}#{last_epoch}-{last_start}#{max_offset}")
    return FinalSignature(sid, initial_id, last_epoch, last_start, max_offset, time, abort, manual)


def encode_signature(sig: Signature) -> bytes:
    doc = {
        "format": FORMAT,
        "initial": sig.initial.to_dict() if sig.initial else None,
        "final": sig.final.to_dict() if sig.final else None,
    }
    return (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode()


def _req(d: dict[str, Any], key: str, typ: type, path: str, where: str) -> Any:
    v = d.get(key)
    if not isinstance(v, typ) or (isinstance(v, bool) and typ is int):
        raise store_error(path, f"{where}.{key}: expected {typ.__name__}, found {v!r}")
    return v


_INITIAL_REQUIRED = (
    ("id", str),
    ("clusterName", str),
    ("brokerName", str),
    ("firstEpoch", int),
    ("firstEpochStartOffset", int),
)
_FINAL_REQUIRED = (
    ("id", str),
    ("initialId", str),
    ("lastEpoch", int),
    ("lastEpochStartOffset", int),
    ("maxOffset", int),
    ("time", int),
)


def _half(
    doc: dict[str, Any], where: str, path: str, required: tuple[tuple[str, type], ...]
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The initial or final half of a signature file (None: absent) and its required fields, by the
    dataclass's names (clusterName: cluster_name)."""
    d = doc.get(where)
    if d is None:
        return None
    if not isinstance(d, dict):
        raise store_error(path, f"{where}: expected an object")
    return d, {
        re.sub("([A-Z])", r"_\1", key).lower(): _req(d, key, typ, path, where) for key, typ in required
    }


def parse_signature(data: bytes, path: str = SIGNATURE_FILE) -> Signature:
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise store_error(path, "not UTF-8", offset=exc.start) from None
    except json.JSONDecodeError as exc:
        raise store_error(path, f"not JSON: {exc.msg}", line=exc.lineno, offset=exc.pos) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise store_error(path, f'expected a JSON object with "format": {FORMAT}')
    ini = fin = None
    if (got := _half(doc, "initial", path, _INITIAL_REQUIRED)) is not None:
        d, required = got
        ini = InitialSignature(
            **required, source=str(d.get("source", "derived")), time=int(d.get("time", 0) or 0)
        )
    if (got := _half(doc, "final", path, _FINAL_REQUIRED)) is not None:
        d, required = got
        abort = d.get("abort")
        fin = FinalSignature(
            **required, abort=abort if isinstance(abort, str) else None, manual=bool(d.get("manual", False))
        )
        expect = make_final(fin.initial_id, fin.last_epoch, fin.last_epoch_start_offset, fin.max_offset, 0).id
        if expect != fin.id:
            raise store_error(path, "final.id does not match its fields (edited by hand?)")
    return Signature(ini, fin)


def signature_path(root: str | os.PathLike[str]) -> Path:
    return Path(root) / SIGNATURE_FILE


def read_signature(root: str | os.PathLike[str]) -> Signature | None:
    return read_parsed(signature_path(root), parse_signature)


def write_signature(root: str | os.PathLike[str], sig: Signature) -> None:
    string_to_file(signature_path(root), encode_signature(sig))
