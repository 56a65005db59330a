from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SyncStateSet(_message.Message):
    __slots__ = ("sync_state_set", "sync_state_set_epoch")
    SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    sync_state_set: _containers.RepeatedScalarFieldContainer[int]
    sync_state_set_epoch: int
    def __init__(self, sync_state_set: _Optional[_Iterable[int]] = ..., sync_state_set_epoch: _Optional[int] = ...) -> None: ...

class GetMetadataRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Peer(_message.Message):
    __slots__ = ("raft_address", "grpc_address", "is_leader", "is_self", "connected", "match_index", "next_index", "max_feature_level")
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    IS_SELF_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    MATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    NEXT_INDEX_FIELD_NUMBER: _ClassVar[int]
    MAX_FEATURE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    raft_address: str
    grpc_address: str
    is_leader: bool
    is_self: bool
    connected: bool
    match_index: int
    next_index: int
    max_feature_level: int
    def __init__(self, raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ..., is_leader: _Optional[bool] = ..., is_self: _Optional[bool] = ..., connected: _Optional[bool] = ..., match_index: _Optional[int] = ..., next_index: _Optional[int] = ..., max_feature_level: _Optional[int] = ...) -> None: ...

class GetMetadataResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "group", "group_id", "controller_leader_id", "controller_leader_address", "is_leader", "self_id", "peers", "term", "commit_index", "last_applied", "has_quorum", "state_hash", "state", "log_length", "feature_level", "max_feature_level", "record_versions", "problem")
    class RecordVersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    SELF_ID_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_APPLIED_FIELD_NUMBER: _ClassVar[int]
    HAS_QUORUM_FIELD_NUMBER: _ClassVar[int]
    STATE_HASH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LOG_LENGTH_FIELD_NUMBER: _ClassVar[int]
    FEATURE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    MAX_FEATURE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    RECORD_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    group: str
    group_id: str
    controller_leader_id: str
    controller_leader_address: str
    is_leader: bool
    self_id: str
    peers: _containers.RepeatedCompositeFieldContainer[Peer]
    term: int
    commit_index: int
    last_applied: int
    has_quorum: bool
    state_hash: str
    state: str
    log_length: int
    feature_level: int
    max_feature_level: int
    record_versions: _containers.ScalarMap[str, int]
    problem: str
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., group: _Optional[str] = ..., group_id: _Optional[str] = ..., controller_leader_id: _Optional[str] = ..., controller_leader_address: _Optional[str] = ..., is_leader: _Optional[bool] = ..., self_id: _Optional[str] = ..., peers: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., last_applied: _Optional[int] = ..., has_quorum: _Optional[bool] = ..., state_hash: _Optional[str] = ..., state: _Optional[str] = ..., log_length: _Optional[int] = ..., feature_level: _Optional[int] = ..., max_feature_level: _Optional[int] = ..., record_versions: _Optional[_Mapping[str, int]] = ..., problem: _Optional[str] = ...) -> None: ...

class GetNextBrokerIdRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ...) -> None: ...

class GetNextBrokerIdResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "cluster_name", "broker_name", "next_broker_id")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    cluster_name: str
    broker_name: str
    next_broker_id: int
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., next_broker_id: _Optional[int] = ...) -> None: ...

class ApplyBrokerIdRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "applied_broker_id", "register_check_code")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    APPLIED_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    REGISTER_CHECK_CODE_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    applied_broker_id: int
    register_check_code: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., applied_broker_id: _Optional[int] = ..., register_check_code: _Optional[str] = ...) -> None: ...

class ApplyBrokerIdResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "cluster_name", "broker_name")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    cluster_name: str
    broker_name: str
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ...) -> None: ...

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_address", "epoch", "max_offset", "confirm_offset", "election_priority", "options", "heartbeat_timeout_mills")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ELECTION_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MILLS_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    epoch: int
    max_offset: int
    confirm_offset: int
    election_priority: int
    options: _containers.ScalarMap[str, str]
    heartbeat_timeout_mills: int
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_address: _Optional[str] = ..., epoch: _Optional[int] = ..., max_offset: _Optional[int] = ..., confirm_offset: _Optional[int] = ..., election_priority: _Optional[int] = ..., options: _Optional[_Mapping[str, str]] = ..., heartbeat_timeout_mills: _Optional[int] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "cluster_name", "broker_name", "master_broker_id", "master_address", "master_epoch", "sync_state_set_epoch", "sync_state_set", "broker_epoch")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    cluster_name: str
    broker_name: str
    master_broker_id: int
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int
    sync_state_set: SyncStateSet
    broker_epoch: int
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., master_broker_id: _Optional[int] = ..., master_address: _Optional[str] = ..., master_epoch: _Optional[int] = ..., sync_state_set_epoch: _Optional[int] = ..., sync_state_set: _Optional[_Union[SyncStateSet, _Mapping]] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_addr", "broker_name", "broker_id", "epoch", "max_offset", "confirm_offset", "heartbeat_timeout_mills", "election_priority", "broker_epoch")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MILLS_FIELD_NUMBER: _ClassVar[int]
    ELECTION_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int
    epoch: int
    max_offset: int
    confirm_offset: int
    heartbeat_timeout_mills: int
    election_priority: int
    broker_epoch: int
    def __init__(self, cluster_name: _Optional[str] = ..., broker_addr: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., epoch: _Optional[int] = ..., max_offset: _Optional[int] = ..., confirm_offset: _Optional[int] = ..., heartbeat_timeout_mills: _Optional[int] = ..., election_priority: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ...) -> None: ...

class HeartbeatStreamRequest(_message.Message):
    __slots__ = ("beats",)
    BEATS_FIELD_NUMBER: _ClassVar[int]
    beats: _containers.RepeatedCompositeFieldContainer[HeartbeatRequest]
    def __init__(self, beats: _Optional[_Iterable[_Union[HeartbeatRequest, _Mapping]]] = ...) -> None: ...

class HeartbeatStreamResponse(_message.Message):
    __slots__ = ("answers",)
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[HeartbeatResponse]
    def __init__(self, answers: _Optional[_Iterable[_Union[HeartbeatResponse, _Mapping]]] = ...) -> None: ...

class AlterSyncStateSetRequest(_message.Message):
    __slots__ = ("broker_name", "master_broker_id", "master_epoch", "new_sync_state_set", "sync_state_set_epoch", "broker_epoch", "cluster_name")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEW_SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    master_broker_id: int
    master_epoch: int
    new_sync_state_set: _containers.RepeatedScalarFieldContainer[int]
    sync_state_set_epoch: int
    broker_epoch: int
    cluster_name: str
    def __init__(self, broker_name: _Optional[str] = ..., master_broker_id: _Optional[int] = ..., master_epoch: _Optional[int] = ..., new_sync_state_set: _Optional[_Iterable[int]] = ..., sync_state_set_epoch: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., cluster_name: _Optional[str] = ...) -> None: ...

class AlterSyncStateSetResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "new_sync_state_set_epoch", "sync_state_set")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NEW_SYNC_STATE_SET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    new_sync_state_set_epoch: int
    sync_state_set: SyncStateSet
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., new_sync_state_set_epoch: _Optional[int] = ..., sync_state_set: _Optional[_Union[SyncStateSet, _Mapping]] = ...) -> None: ...

class ElectMasterRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "designate_elect", "broker_epoch")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    DESIGNATE_ELECT_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    designate_elect: bool
    broker_epoch: int
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., designate_elect: _Optional[bool] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerMemberGroup(_message.Message):
    __slots__ = ("cluster", "broker_name", "broker_addrs")
    class BrokerAddrsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDRS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    broker_addrs: _containers.ScalarMap[int, str]
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_addrs: _Optional[_Mapping[int, str]] = ...) -> None: ...

class ElectMasterResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "master_broker_id", "master_address", "master_epoch", "sync_state_set_epoch", "sync_state_set", "broker_member_group")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    BROKER_MEMBER_GROUP_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    master_broker_id: int
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int
    sync_state_set: _containers.RepeatedScalarFieldContainer[int]
    broker_member_group: BrokerMemberGroup
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., master_broker_id: _Optional[int] = ..., master_address: _Optional[str] = ..., master_epoch: _Optional[int] = ..., sync_state_set_epoch: _Optional[int] = ..., sync_state_set: _Optional[_Iterable[int]] = ..., broker_member_group: _Optional[_Union[BrokerMemberGroup, _Mapping]] = ...) -> None: ...

class GetReplicaInfoRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...

class GetReplicaInfoResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "master_broker_id", "master_address", "master_epoch", "sync_state_set")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    master_broker_id: int
    master_address: str
    master_epoch: int
    sync_state_set: SyncStateSet
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., master_broker_id: _Optional[int] = ..., master_address: _Optional[str] = ..., master_epoch: _Optional[int] = ..., sync_state_set: _Optional[_Union[SyncStateSet, _Mapping]] = ...) -> None: ...

class GetSyncStateDataRequest(_message.Message):
    __slots__ = ("broker_names",)
    BROKER_NAMES_FIELD_NUMBER: _ClassVar[int]
    broker_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, broker_names: _Optional[_Iterable[str]] = ...) -> None: ...

class ReplicaIdentity(_message.Message):
    __slots__ = ("broker_name", "broker_id", "broker_address", "alive", "heartbeat_age_ms", "epoch", "max_offset", "confirm_offset", "election_priority", "broker_epoch")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ELECTION_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    broker_address: str
    alive: bool
    heartbeat_age_ms: int
    epoch: int
    max_offset: int
    confirm_offset: int
    election_priority: int
    broker_epoch: int
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_address: _Optional[str] = ..., alive: _Optional[bool] = ..., heartbeat_age_ms: _Optional[int] = ..., epoch: _Optional[int] = ..., max_offset: _Optional[int] = ..., confirm_offset: _Optional[int] = ..., election_priority: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class ReplicasInfo(_message.Message):
    __slots__ = ("master_broker_id", "master_address", "master_epoch", "sync_state_set_epoch", "in_sync_replicas", "not_in_sync_replicas", "cluster_name", "failover_paused", "failover_pause_reason")
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    NOT_IN_SYNC_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    FAILOVER_PAUSED_FIELD_NUMBER: _ClassVar[int]
    FAILOVER_PAUSE_REASON_FIELD_NUMBER: _ClassVar[int]
    master_broker_id: int
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: _containers.RepeatedCompositeFieldContainer[ReplicaIdentity]
    not_in_sync_replicas: _containers.RepeatedCompositeFieldContainer[ReplicaIdentity]
    cluster_name: str
    failover_paused: bool
    failover_pause_reason: str
    def __init__(self, master_broker_id: _Optional[int] = ..., master_address: _Optional[str] = ..., master_epoch: _Optional[int] = ..., sync_state_set_epoch: _Optional[int] = ..., in_sync_replicas: _Optional[_Iterable[_Union[ReplicaIdentity, _Mapping]]] = ..., not_in_sync_replicas: _Optional[_Iterable[_Union[ReplicaIdentity, _Mapping]]] = ..., cluster_name: _Optional[str] = ..., failover_paused: _Optional[bool] = ..., failover_pause_reason: _Optional[str] = ...) -> None: ...

class GetSyncStateDataResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "replicas_info_table")
    class ReplicasInfoTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ReplicasInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ReplicasInfo, _Mapping]] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_INFO_TABLE_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    replicas_info_table: _containers.MessageMap[str, ReplicasInfo]
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., replicas_info_table: _Optional[_Mapping[str, ReplicasInfo]] = ...) -> None: ...

class CleanBrokerDataRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_controller_ids_to_clean", "is_clean_living_broker")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_CONTROLLER_IDS_TO_CLEAN_FIELD_NUMBER: _ClassVar[int]
    IS_CLEAN_LIVING_BROKER_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_controller_ids_to_clean: str
    is_clean_living_broker: bool
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_controller_ids_to_clean: _Optional[str] = ..., is_clean_living_broker: _Optional[bool] = ...) -> None: ...

class CleanBrokerDataResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ...) -> None: ...

class GetConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetConfigResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "config")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    config: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class UpdateConfigRequest(_message.Message):
    __slots__ = ("config",)
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _containers.ScalarMap[str, str]
    def __init__(self, config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class UpdateConfigResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ...) -> None: ...

class WatchRoleChangesRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ...) -> None: ...

class RoleChange(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "cluster_name", "broker_name", "master_broker_id", "master_address", "master_epoch", "sync_state_set_epoch", "sync_state_set")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    cluster_name: str
    broker_name: str
    master_broker_id: int
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int
    sync_state_set: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., master_broker_id: _Optional[int] = ..., master_address: _Optional[str] = ..., master_epoch: _Optional[int] = ..., sync_state_set_epoch: _Optional[int] = ..., sync_state_set: _Optional[_Iterable[int]] = ...) -> None: ...

class ChangeQuorumRequest(_message.Message):
    __slots__ = ("action", "raft_address", "feature_level")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    FEATURE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    action: str
    raft_address: str
    feature_level: int
    def __init__(self, action: _Optional[str] = ..., raft_address: _Optional[str] = ..., feature_level: _Optional[int] = ...) -> None: ...

class ChangeQuorumResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "leader_id", "members", "feature_level")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    FEATURE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    leader_id: str
    members: _containers.RepeatedScalarFieldContainer[str]
    feature_level: int
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., leader_id: _Optional[str] = ..., members: _Optional[_Iterable[str]] = ..., feature_level: _Optional[int] = ...) -> None: ...

class GetHistoryRequest(_message.Message):
    __slots__ = ("broker_name", "since_ms", "after_seq", "limit")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    since_ms: int
    after_seq: int
    limit: int
    def __init__(self, broker_name: _Optional[str] = ..., since_ms: _Optional[int] = ..., after_seq: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class HistoryCandidate(_message.Message):
    __slots__ = ("broker_id", "epoch", "max_offset", "election_priority", "alive", "in_sync_state_set")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ELECTION_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_STATE_SET_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    epoch: int
    max_offset: int
    election_priority: int
    alive: bool
    in_sync_state_set: bool
    def __init__(self, broker_id: _Optional[int] = ..., epoch: _Optional[int] = ..., max_offset: _Optional[int] = ..., election_priority: _Optional[int] = ..., alive: _Optional[bool] = ..., in_sync_state_set: _Optional[bool] = ...) -> None: ...

class HistoryElection(_message.Message):
    __slots__ = ("candidates", "reason", "unclean", "master_epoch", "old_master_broker_id", "new_master_broker_id", "old_master_max_offset", "new_master_max_offset", "loss_bytes")
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    UNCLEAN_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    OLD_MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    NEW_MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    OLD_MASTER_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEW_MASTER_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    candidates: _containers.RepeatedCompositeFieldContainer[HistoryCandidate]
    reason: str
    unclean: bool
    master_epoch: int
    old_master_broker_id: int
    new_master_broker_id: int
    old_master_max_offset: int
    new_master_max_offset: int
    loss_bytes: int
    def __init__(self, candidates: _Optional[_Iterable[_Union[HistoryCandidate, _Mapping]]] = ..., reason: _Optional[str] = ..., unclean: _Optional[bool] = ..., master_epoch: _Optional[int] = ..., old_master_broker_id: _Optional[int] = ..., new_master_broker_id: _Optional[int] = ..., old_master_max_offset: _Optional[int] = ..., new_master_max_offset: _Optional[int] = ..., loss_bytes: _Optional[int] = ...) -> None: ...

class HistoryEntry(_message.Message):
    __slots__ = ("seq", "time_ms", "term", "cluster_name", "broker_name", "what", "detail", "cause", "election")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    WHAT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    seq: int
    time_ms: int
    term: int
    cluster_name: str
    broker_name: str
    what: str
    detail: str
    cause: str
    election: HistoryElection
    def __init__(self, seq: _Optional[int] = ..., time_ms: _Optional[int] = ..., term: _Optional[int] = ..., cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., what: _Optional[str] = ..., detail: _Optional[str] = ..., cause: _Optional[str] = ..., election: _Optional[_Union[HistoryElection, _Mapping]] = ...) -> None: ...

class GetHistoryResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "entries", "more", "last_seq", "history_max_entries", "loss_total", "failover_paused")
    class LossTotalEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class FailoverPausedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    HISTORY_MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LOSS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    FAILOVER_PAUSED_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    entries: _containers.RepeatedCompositeFieldContainer[HistoryEntry]
    more: bool
    last_seq: int
    history_max_entries: int
    loss_total: _containers.ScalarMap[str, int]
    failover_paused: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[HistoryEntry, _Mapping]]] = ..., more: _Optional[bool] = ..., last_seq: _Optional[int] = ..., history_max_entries: _Optional[int] = ..., loss_total: _Optional[_Mapping[str, int]] = ..., failover_paused: _Optional[_Mapping[str, str]] = ...) -> None: ...

class PauseFailoverRequest(_message.Message):
    __slots__ = ("broker_name", "paused", "reason")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    paused: bool
    reason: str
    def __init__(self, broker_name: _Optional[str] = ..., paused: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class PauseFailoverResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "failover_paused")
    class FailoverPausedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    FAILOVER_PAUSED_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    failover_paused: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., failover_paused: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SwitchoverRequest(_message.Message):
    __slots__ = ("broker_name", "broker_id", "force", "dry_run")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    broker_id: int
    force: bool
    dry_run: bool
    def __init__(self, broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., force: _Optional[bool] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class SwitchoverResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "broker_name", "old_master_broker_id", "new_master_broker_id", "master_max_offset", "candidate_max_offset", "gap_bytes", "caught_up", "master_epoch", "dry_run")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    OLD_MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    NEW_MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    GAP_BYTES_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    broker_name: str
    old_master_broker_id: int
    new_master_broker_id: int
    master_max_offset: int
    candidate_max_offset: int
    gap_bytes: int
    caught_up: bool
    master_epoch: int
    dry_run: bool
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., broker_name: _Optional[str] = ..., old_master_broker_id: _Optional[int] = ..., new_master_broker_id: _Optional[int] = ..., master_max_offset: _Optional[int] = ..., candidate_max_offset: _Optional[int] = ..., gap_bytes: _Optional[int] = ..., caught_up: _Optional[bool] = ..., master_epoch: _Optional[int] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class RebalanceRequest(_message.Message):
    __slots__ = ("cluster_name", "dry_run")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    dry_run: bool
    def __init__(self, cluster_name: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class RebalanceMove(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "master_broker_id", "preferred_broker_id", "action", "reason", "master_max_offset", "candidate_max_offset", "gap_bytes")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MASTER_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MASTER_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    GAP_BYTES_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    master_broker_id: int
    preferred_broker_id: int
    action: str
    reason: str
    master_max_offset: int
    candidate_max_offset: int
    gap_bytes: int
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., master_broker_id: _Optional[int] = ..., preferred_broker_id: _Optional[int] = ..., action: _Optional[str] = ..., reason: _Optional[str] = ..., master_max_offset: _Optional[int] = ..., candidate_max_offset: _Optional[int] = ..., gap_bytes: _Optional[int] = ...) -> None: ...

class RebalanceResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "moves", "dry_run")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MOVES_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    moves: _containers.RepeatedCompositeFieldContainer[RebalanceMove]
    dry_run: bool
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., moves: _Optional[_Iterable[_Union[RebalanceMove, _Mapping]]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class GetSnapshotRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetSnapshotResponse(_message.Message):
    __slots__ = ("code", "remark", "leader_address", "state_json", "applied_index", "term", "group", "group_id", "state_hash", "feature_level", "record_versions")
    class RecordVersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    REMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_HASH_FIELD_NUMBER: _ClassVar[int]
    FEATURE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    RECORD_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    code: int
    remark: str
    leader_address: str
    state_json: str
    applied_index: int
    term: int
    group: str
    group_id: str
    state_hash: str
    feature_level: int
    record_versions: _containers.ScalarMap[str, int]
    def __init__(self, code: _Optional[int] = ..., remark: _Optional[str] = ..., leader_address: _Optional[str] = ..., state_json: _Optional[str] = ..., applied_index: _Optional[int] = ..., term: _Optional[int] = ..., group: _Optional[str] = ..., group_id: _Optional[str] = ..., state_hash: _Optional[str] = ..., feature_level: _Optional[int] = ..., record_versions: _Optional[_Mapping[str, int]] = ...) -> None: ...
