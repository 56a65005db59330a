from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetBrokerEpochCacheRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EpochEntry(_message.Message):
    __slots__ = ("epoch", "start_offset", "end_offset")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    start_offset: int
    end_offset: int
    def __init__(self, epoch: _Optional[int] = ..., start_offset: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class GetBrokerEpochCacheResponse(_message.Message):
    __slots__ = ("code", "remark", "cluster_name", "broker_name", "broker_id", "epoch_list", "max_offset")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_LIST_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    cluster_name: str
    broker_name: str
    broker_id: int
    epoch_list: _containers.RepeatedCompositeFieldContainer[EpochEntry]
    max_offset: int
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., epoch_list: _Optional[_Iterable[_Union[EpochEntry, _Mapping]]] = ..., max_offset: _Optional[int] = ...) -> None: ...

class FetchLogRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_address", "offset", "master_epoch", "max_bytes", "wait_ms", "async_learner")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    ASYNC_LEARNER_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    offset: int
    master_epoch: int
    max_bytes: int
    wait_ms: int
    async_learner: bool
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_address: _Optional[str] = ..., offset: _Optional[int] = ..., master_epoch: _Optional[int] = ..., max_bytes: _Optional[int] = ..., wait_ms: _Optional[int] = ..., async_learner: _Optional[bool] = ...) -> None: ...

class FetchLogResponse(_message.Message):
    __slots__ = ("code", "remark", "offset", "data", "length", "epoch", "epoch_start_offset", "confirm_offset", "max_offset", "master_epoch", "broker_id")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    EPOCH_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    offset: int
    data: bytes
    length: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    max_offset: int
    master_epoch: int
    broker_id: int
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., length: _Optional[int] = ..., epoch: _Optional[int] = ..., epoch_start_offset: _Optional[int] = ..., confirm_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., master_epoch: _Optional[int] = ..., broker_id: _Optional[int] = ...) -> None: ...
