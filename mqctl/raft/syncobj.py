# This file is a fork of pysyncobj/syncobj.py from pysyncobj 0.3.17
# (https://github.com/bakwc/PySyncObj), used under the MIT License:
#
#   The MIT License (MIT)
#
#   Copyright (c) 2016 Filipp Ozinov
#
#   Permission is hereby granted, free of charge, to any person obtaining a copy
#   of this software and associated documentation files (the "Software"), to deal
#   in the Software without restriction, including without limitation the rights
#   to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
#   copies of the Software, and to permit persons to whom the Software is
#   furnished to do so, subject to the following conditions:
#
#   The above copyright notice and this permission notice shall be included in all
#   copies or substantial portions of the Software.
#
#   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
#   IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
#   FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
#   AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
#   LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
#   OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
#   SOFTWARE.
#
# Only this file, tcp_connection.py and tcp_server.py are forked; everything else comes from the
# pinned pysyncobj package. Every change is marked with a "# mqctl:" comment and described in
# mqctl/raft/FORK.md.

import time
import random
import os
import sys
import threading
import weakref
import collections
import functools
import struct
import logging
import copy  # noqa: F401  (upstream's, unused)
import errno  # mqctl
import types
from collections.abc import Callable, Iterable  # mqctl: typed (FORK.md, change T7)
from typing import Any, cast  # mqctl
try:
    import Queue
    is_py3 = False

    def iteritems(v: Any) -> Any:
        return v.iteritems()
except ImportError:  # python3
    import queue as Queue
    is_py3 = True
    xrange = range

    def iteritems(v: Any) -> Any:
        return v.items()

import pysyncobj.pickle as pickle

# mqctl: absolute imports: everything but this file comes from the pinned pysyncobj package
from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.poller import createPoller

try:
    from pysyncobj.pipe_notifier import PipeNotifier
    PIPE_NOTIFIER_ENABLED = True
except ImportError:
    PIPE_NOTIFIER_ENABLED = False

from pysyncobj.serializer import Serializer, SERIALIZER_STATE
from pysyncobj.node import Node, TCPNode
from pysyncobj.transport import Transport, TCPTransport, TransportNotReadyError  # noqa: F401
from pysyncobj.config import SyncObjConf, FAIL_REASON
from pysyncobj.encryptor import HAS_CRYPTO, getEncryptor
from pysyncobj.version import VERSION
from pysyncobj.fast_queue import FastQueue
from pysyncobj.monotonic import monotonic as monotonicTime

from mqctl.raft.storage import Storage, StorageError, fsync_file_and_dir  # mqctl: durability (FORK.md)

logger = logging.getLogger('pysyncobj.syncobj')  # mqctl: upstream's logger name, so its log settings apply
_snapshotLogger = logging.getLogger('mqctl.raft.snapshot')  # mqctl: an operator's line, not pysyncobj's chatter
_electionLogger = logging.getLogger('mqctl.raft.election')  # mqctl: why leadership moved (FORK.md, change 18)
_SNAPSHOT_RETRY = 2.0  # mqctl: seconds between attempts at a snapshot that could not be written


class _RAFT_STATE:
    FOLLOWER = 0
    CANDIDATE = 1
    LEADER = 2

class _COMMAND_TYPE:
    REGULAR = 0
    NO_OP = 1
    MEMBERSHIP = 2
    VERSION = 3

_bchr = functools.partial(struct.pack, 'B')


# mqctl: upstream's classes, not copies, so `except pysyncobj.SyncObjException` still catches them
from pysyncobj.syncobj import SyncObjException, SyncObjExceptionWrongVer, SyncObjConsumer


# https://github.com/bakwc/PySyncObj

class SyncObj:
    def __init__(self, selfNode: Any, otherNodes: Iterable[Any], conf: Any = None, consumers: Any = None,
                 nodeClass: Any = TCPNode, transport: Any = None, transportClass: Any = TCPTransport) -> None:
        """
        Main SyncObj class, you should inherit your own class from it.

        :param selfNode: object representing the self-node or address of the current node server 'host:port'
        :type selfNode: Node or str
        :param otherNodes: objects representing the other nodes or addresses of partner nodes ['host1:port1', 'host2:port2', ...]
        :type otherNodes: iterable of Node or iterable of str
        :param conf: configuration object
        :type conf: SyncObjConf
        :param consumers: objects to be replicated
        :type consumers: list of SyncObjConsumer inherited objects
        :param nodeClass: class used for representation of nodes
        :type nodeClass: class
        :param transport: transport object; if None, transportClass is used to initialise such an object
        :type transport: Transport or None
        :param transportClass: the Transport subclass to be used for transferring messages to and from other nodes
        :type transportClass: class
        """

        if conf is None:
            self.__conf = SyncObjConf()
        else:
            self.__conf = conf

        self.__conf.validate()
        # mqctl: the clock, the election timeouts' randomness and the poller are injected objects
        # (FORK.md, change 23): production's are upstream's; the deterministic simulator
        # (mqctl/dsim) passes a simulated clock, a seeded random.Random and a poller of no sockets
        self.__clock: Callable[[], float] = getattr(self.__conf, 'clock', None) or monotonicTime
        self.__random = getattr(self.__conf, 'random', None) or random

        if self.__conf.password is not None:
            if not HAS_CRYPTO:
                raise ImportError("Please install 'cryptography' module")
            self.__encryptor = getEncryptor(self.__conf.password)
        else:
            self.__encryptor = None

        consumers = consumers or []
        newConsumers = []
        for c in consumers:
            if not isinstance(c, SyncObjConsumer) and getattr(c, '_consumer', None):
                c = c._consumer()
            if not isinstance(c, SyncObjConsumer):
                raise SyncObjException('Consumers must be inherited from SyncObjConsumer')
            newConsumers.append(c)
        consumers = newConsumers

        self.__consumers = consumers

        origSelfNode = selfNode
        if not isinstance(selfNode, Node) and selfNode is not None:
            selfNode = nodeClass(selfNode)
        self.__selfNode = selfNode
        self.__otherNodes: set[Any] = set() # set of Node
        for otherNode in otherNodes:
            if otherNode == origSelfNode:
                continue
            if not isinstance(otherNode, Node):
                otherNode = nodeClass(otherNode)
            self.__otherNodes.add(otherNode)
        self.__readonlyNodes: set[Any] = set() # set of Node
        self.__connectedNodes: set[Any] = set() # set of Node
        self.__nodeClass = nodeClass

        self.__raftState = _RAFT_STATE.FOLLOWER
        self.__raftCurrentTerm = 0
        self.__votedForNodeId = None
        self.__votesCount = 0
        self.__raftLeader = None
        self.__raftElectionDeadline = self.__clock() + self.__generateRaftTimeout()
        # Set while a leadership transfer (Raft 'TimeoutNow') is pending, to stop
        # the outgoing leader's heartbeats from postponing the forced election.
        self.__transferInProgress = False
        self.__transferAskedAt = 0.0  # mqctl: when the pending TimeoutNow arrived (FORK.md, change 32)
        # mqctl: PreVote and CheckQuorum (FORK.md, change 13): the term of this node's pre-vote round
        # (None: none), the peers that granted it, when a leader was last heard from, which peers
        # speak pre-vote (True) or run plain pysyncobj (False), when messages were last read, and
        # (on a leader) since when each peer has left its append_entries unanswered (FORK.md, change 15)
        self.__preVoteTerm: int | None = None
        self.__preVoteSince = 0.0  # mqctl: when this node asked for the pre-votes (FORK.md, change 24)
        self.__preVotes: set[Any] = set()
        self.__lastLeaderContact = 0.0
        self.__peerPreVote: dict[Any, bool] = {}
        self.__lastPollTime = self.__clock()
        self.__lastCompletedPoll: float = self.__lastPollTime  # mqctl: FORK.md, change T4
        self.__unansweredSince: dict[Any, float] = {}
        # mqctl: (on a follower) the leader told of its durable entries as the journal's thread syncs
        # them, and the last durable index it was told (FORK.md, change 20)
        self.__durableAcksTo: Any = None
        self.__durableAcksTerm: int | None = None  # mqctl: the term they were asked in (FORK.md, change 25)
        self.__reportedDurable = 0
        # mqctl: the journal comes from conf.journalFactory (mqctl.raft.journal), not createJournal
        self.__raftLog = self.__conf.journalFactory(self.__conf.journalFile)
        if len(self.__raftLog) == 0:
            self.__raftLog.add(_bchr(_COMMAND_TYPE.NO_OP), 1, self.__raftCurrentTerm)
        # Restore raft persistent state (see raft paper §5 - currentTerm and votedFor
        # must survive restarts, otherwise already-committed entries may be overwritten
        # by a stale member after a simultaneous restart of the cluster). The max() with
        # the last log term covers journals written by versions that did not store the
        # term: currentTerm is always >= the term of the last log entry.
        self.__raftCurrentTerm = max(self.__raftLog.getCurrentTerm(), self.__getCurrentLogTerm())
        self.__votedForNodeId = self.__raftLog.getVotedForNodeId()
        self.__raftCommitIndex: int = self.__raftLog.getRaftCommitIndex()
        self.__raftLastApplied = 1
        self.__raftNextIndex: dict[Any, int] = {}
        self.__lastResponseTime: dict[Any, float] = {}
        self.__raftMatchIndex: dict[Any, int] = {}
        self.__lastSerializedTime = self.__clock()
        self.__lastSerializedEntry = None
        self.__forceLogCompaction = False
        self.__leaderCommitIndex: int | None = None
        self.__onReadyCalled = False
        self.__changeClusterIDx: int | None = None
        self.__selfRemoved = False  # mqctl: the latest configuration in the log leaves this node out
        self.__noopIDx: int | None = None
        self.__destroying = False
        self.__recvTransmission = ''

        self.__onTickCallbacks: list[Callable[[], None]] = []
        self.__onTickCallbacksLock = threading.Lock()

        self.__startTime = self.__clock()
        self.__numOneSecondDumps = 0
        globalDnsResolver().setTimeouts(self.__conf.dnsCacheTime, self.__conf.dnsFailCacheTime)
        globalDnsResolver().setPreferredAddrFamily(self.__conf.preferredAddrType)
        # mqctl: a snapshot that cannot be written is logged once with its reason, retried every
        # _SNAPSHOT_RETRY seconds, and is subject to fault injection (FORK.md, change 14)
        self.__snapshotError: Exception | None = None
        self.__snapshotFailing = False
        self.__snapshotRetryTime = 0.0
        self.__incomingSnapshot: tuple[Any, int] | None = None  # mqctl: (file, bytes so far) of a snapshot being received
        self.__serializer = Serializer(self.__conf.fullDumpFile,
                                       self.__conf.logCompactionBatchSize,
                                       self.__conf.useFork,
                                       self.__writeSnapshot if self.__conf.serializer is not None else None,
                                       self.__conf.deserializer,
                                       self.__conf.serializeChecker)
        self.__lastInitTryTime = 0
        self._poller = getattr(self.__conf, 'poller', None) or createPoller(self.__conf.pollerType)  # mqctl

        if transport is not None:
            self.__transport = transport
        else:
            self.__transport = transportClass(self, self.__selfNode, self.__otherNodes)
        self.__transport.setOnNodeConnectedCallback(self.__onNodeConnected)
        self.__transport.setOnNodeDisconnectedCallback(self.__onNodeDisconnected)
        self.__transport.setOnMessageReceivedCallback(self.__onMessageReceived)
        self.__transport.setOnReadonlyNodeConnectedCallback(self.__onReadonlyNodeConnected)
        self.__transport.setOnReadonlyNodeDisconnectedCallback(self.__onReadonlyNodeDisconnected)
        self.__transport.setOnUtilityMessageCallback('status', self._getStatus)
        self.__transport.setOnUtilityMessageCallback('add', self._addNodeToCluster)
        self.__transport.setOnUtilityMessageCallback('remove', self._removeNodeFromCluster)
        self.__transport.setOnUtilityMessageCallback('set_version', self._setCodeVersion)
        self.__transport.setOnUtilityMessageCallback('transfer', self._transferLeadership)
        self.__replayClusterChanges(self.__raftLog.entry_index(0))  # mqctl: FORK.md, change 30

        self._methodToID: dict[Any, int] = {}
        self._idToMethod: dict[int, Any] = {}
        self._idToConsumer: dict[int, Any] = {}

        methods = [m for m in dir(self) if callable(getattr(self, m)) and \
                   getattr(getattr(self, m), 'replicated', False) and \
                   m != getattr(getattr(self, m), 'origName')]
        currMethodID = 0
        self.__selfCodeVersion = 0
        self.__currentVersionFuncNames: dict[Any, str] = {}

        methodsToEnumerate = []

        for method in methods:
            ver = getattr(getattr(self, method), 'ver')
            methodsToEnumerate.append((ver, 0, method, self))

        for consumerNum, consumer in enumerate(consumers):
            consumerMethods = [m for m in dir(consumer) if callable(getattr(consumer, m)) and\
                               getattr(getattr(consumer, m), 'replicated', False) and \
                               m != getattr(getattr(consumer, m), 'origName')]
            for method in consumerMethods:
                ver = getattr(getattr(consumer, method), 'ver')
                methodsToEnumerate.append((ver, consumerNum + 1, method, consumer))
            consumer._syncObj = self

        for ver, _, method, obj in sorted(methodsToEnumerate):
            self.__selfCodeVersion = max(self.__selfCodeVersion, ver)
            if obj is self:
                self._methodToID[method] = currMethodID
            else:
                self._methodToID[(id(obj), method)] = currMethodID
            self._idToMethod[currMethodID] = getattr(obj, method)
            currMethodID += 1

        self.__onSetCodeVersion(0)

        self.__thread: threading.Thread | None = None
        self.__mainThread: threading.Thread | None = None
        self.__initialised: threading.Event | None = None
        self.__commandsQueue = _CommandsQueue(self.__conf.commandsQueueSize)  # mqctl: FORK.md, change 31
        self.__pipeNotifier = None  # mqctl: none with an injected poller (FORK.md, change 23)
        if not self.__conf.appendEntriesUseBatch and PIPE_NOTIFIER_ENABLED and \
                getattr(self.__conf, 'poller', None) is None:
            self.__pipeNotifier = PipeNotifier(self._poller)
            # mqctl: a leader's journal sync done on its own thread wakes the tick (FORK.md, change 19)
            self.__raftLog.on_durable = self.__pipeNotifier.notify
        self.__needLoadDumpFile = True

        self.__lastReadonlyCheck = 0
        self.__newAppendEntriesTime = 0

        self.__commandsWaitingCommit: collections.defaultdict[int, list[tuple[int, Any]]] = collections.defaultdict(list)  # logID => [(termID, callback), ...]
        self.__commandsLocalCounter = 0
        self.__commandsWaitingReply: dict[int, Any] = {}  # commandLocalCounter => callback

        self.__properies = set()
        for key in self.__dict__:
            self.__properies.add(key)

        self.__enabledCodeVersion = 0

        if self.__conf.autoTick:
            self.__mainThread = threading.current_thread()
            self.__initialised = threading.Event()
            self.__thread = threading.Thread(target=SyncObj._autoTickThread, args=(weakref.proxy(self),))
            self.__thread.start()
            self.__initialised.wait()
            # while not self.__initialised.is_set():
            #     pass
        else:
            try:
                while not self.__transport.ready:
                    self.__transport.tryGetReady()
            except TransportNotReadyError:
                logger.exception('failed to perform initialization')
                raise SyncObjException('BindError') # Backwards compatibility

    def destroy(self) -> None:
        """
        Correctly destroy SyncObj. Stop autoTickThread, close connections, etc.
        """
        if self.__conf.autoTick:
            self.__destroying = True
        else:
            self._doDestroy()

    def tick_thread_alive(self) -> bool:
        """
        Check if the tick thread is alive.
        """
        if self.__thread and self.__thread.is_alive():
            return True
        return False

    def destroy_synchronous(self) -> None:
        """
        Correctly destroy SyncObj. Stop autoTickThread, close connections, etc. and ensure the threads are gone.
        """
        self.destroy()
        cast(threading.Thread, self.__thread).join()  # mqctl: typed; None without autoTick, as upstream

    def waitReady(self) -> None:
        """
        Waits until the transport is ready for operation.

        :raises TransportNotReadyError: if the transport fails to get ready
        """
        self.__transport.waitReady()

    def waitBinded(self) -> None:
        """
        Waits until initialized (binded port).
        If success - just returns.
        If failed to initialized after conf.maxBindRetries - raise SyncObjException.
        """
        try:
            self.__transport.waitReady()
        except TransportNotReadyError:
            raise SyncObjException('BindError')
        if not self.__transport.ready:
            raise SyncObjException('BindError')

    def _destroy(self) -> None:
        self.destroy()

    def _doDestroy(self) -> None:
        self.__transport.destroy()
        for consumer in self.__consumers:
            consumer._destroy()
        self.__raftLog._destroy()

    def getCodeVersion(self) -> int:
        return self.__enabledCodeVersion

    def setCodeVersion(self, newVersion: int, callback: Any = None) -> None:
        """Switch to a new code version on all cluster nodes. You
        should ensure that cluster nodes are updated, otherwise they
        won't be able to apply commands.

        :param newVersion: new code version
        :type int
        :param callback: will be called on success or fail
        :type callback: function(`FAIL_REASON <#pysyncobj.FAIL_REASON>`_, None)
        """
        assert isinstance(newVersion, int)
        if newVersion > self.__selfCodeVersion:
            raise Exception('wrong version, current version is %d, requested version is %d' % (self.__selfCodeVersion, newVersion))
        if newVersion < self.__enabledCodeVersion:
            raise Exception('wrong version, enabled version is %d, requested version is %d' % (self.__enabledCodeVersion, newVersion))
        self._applyCommand(pickle.dumps(newVersion), callback, _COMMAND_TYPE.VERSION)

    def addNodeToCluster(self, node: Any, callback: Any = None) -> None:
        """Add single node to cluster (dynamic membership changes). Async.
        You should wait until node successfully added before adding
        next node.

        :param node: node object or 'nodeHost:nodePort'
        :type node: Node | str
        :param callback: will be called on success or fail
        :type callback: function(`FAIL_REASON <#pysyncobj.FAIL_REASON>`_, None)
        """
        self.__changeMembership('add', node, callback)

    def removeNodeFromCluster(self, node: Any, callback: Any = None) -> None:
        """Remove single node from cluster (dynamic membership changes). Async.
        You should wait until node successfully removed before adding
        next node.
        """
        self.__changeMembership('rem', node, callback)

    def __changeMembership(self, action: str, node: Any, callback: Any) -> None:  # mqctl: FORK.md, change 34
        if not self.__conf.dynamicMembershipChange:
            raise Exception('dynamicMembershipChange is disabled')
        if not isinstance(node, Node):
            node = self.__nodeClass(node)
        self._applyCommand(pickle.dumps([action, node.id, node]), callback, _COMMAND_TYPE.MEMBERSHIP)

    def _setCodeVersion(self, args: Any, callback: Any) -> None:
        self.setCodeVersion(args[0], callback)

    def _addNodeToCluster(self, args: Any, callback: Any) -> None:
        self.addNodeToCluster(args[0], callback)

    def _removeNodeFromCluster(self, args: Any, callback: Any) -> None:
        node = args[0]
        if node == self.__selfNode.address:
            callback(None, FAIL_REASON.REQUEST_DENIED)
        else:
            self.removeNodeFromCluster(node, callback)

    def transferLeadership(self, node: Any = None, callback: Any = None) -> None:
        """Gracefully transfer raft leadership to another node (Raft 'TimeoutNow').

        Must be called on the current leader. The target node must be fully
        caught up (matchIndex == leader's last log index), otherwise the
        request is denied. If node is None, the most caught-up connected
        follower is selected automatically. Async and best-effort: a
        successful callback only means the request was sent; poll
        getStatus()['leader'] to confirm the transfer completed.

        :param node: target node object or 'nodeHost:nodePort' (None = auto)
        :type node: Node | str | None
        :param callback: will be called on success or fail
        :type callback: function(`FAIL_REASON <#pysyncobj.FAIL_REASON>`_, None)
        """
        if self.__raftState != _RAFT_STATE.LEADER:
            self.__callErrCallback(FAIL_REASON.NOT_LEADER, callback)
            return
        if node is not None and not isinstance(node, Node):
            node = self.__nodeClass(node)
        if node is None:
            candidates = [(self.__raftMatchIndex.get(n, 0), n.id, n)
                          for n in self.__otherNodes if n in self.__connectedNodes]
            if not candidates:
                self.__callErrCallback(FAIL_REASON.REQUEST_DENIED, callback)
                return
            node = max(candidates)[2]
        if node == self.__selfNode or node not in self.__otherNodes:
            self.__callErrCallback(FAIL_REASON.REQUEST_DENIED, callback)
            return
        if self.__raftMatchIndex.get(node, 0) != self.__getCurrentLogIndex():
            # target is not fully synced - transferring would fail the election
            self.__callErrCallback(FAIL_REASON.REQUEST_DENIED, callback)
            return
        self.__transport.send(node, {
            'type': 'timeout_now',
            'term': self.__raftCurrentTerm,
        })
        if callback is not None:
            callback(None, FAIL_REASON.SUCCESS)

    def _transferLeadership(self, args: Any, callback: Any) -> None:
        self.transferLeadership(args[0] if args and args[0] else None, callback)

    def __onSetCodeVersion(self, newVersion: int) -> None:
        methods = [m for m in dir(self) if callable(getattr(self, m)) and\
                   getattr(getattr(self, m), 'replicated', False) and \
                   m != getattr(getattr(self, m), 'origName')]

        self.__currentVersionFuncNames = {}

        funcVersions = collections.defaultdict(set)
        for method in methods:
            ver = getattr(getattr(self, method), 'ver')
            origFuncName = getattr(getattr(self, method), 'origName')
            funcVersions[origFuncName].add(ver)

        for consumer in self.__consumers:
            consumerID = id(consumer)
            consumerMethods = [m for m in dir(consumer) if callable(getattr(consumer, m)) and \
                               getattr(getattr(consumer, m), 'replicated', False)]
            for method in consumerMethods:
                ver = getattr(getattr(consumer, method), 'ver')
                origFuncName = getattr(getattr(consumer, method), 'origName')
                funcVersions[(consumerID, origFuncName)].add(ver)

        for funcName, versions in iteritems(funcVersions):
            versions = sorted(list(versions))
            for v in versions:
                if v > newVersion:
                    break
                realFuncName = funcName[1] if isinstance(funcName, tuple) else funcName
                self.__currentVersionFuncNames[funcName] = realFuncName + '_v' + str(v)

    def _getFuncName(self, funcName: Any) -> str:
        return self.__currentVersionFuncNames[funcName]

    def _applyCommand(self, command: bytes, callback: Any, commandType: int | None = None,
                      leaderTerm: int | None = None) -> None:
        # mqctl: a command with leaderTerm is appended only by this node while it leads in that
        # term, never forwarded to another leader (FORK.md, change 11)
        try:
            if commandType is None:
                self.__commandsQueue.put_nowait((command, callback, leaderTerm))
            else:
                self.__commandsQueue.put_nowait((_bchr(commandType) + command, callback, leaderTerm))
            if self.__pipeNotifier is not None:  # mqctl: FORK.md, change 23
                self.__pipeNotifier.notify()
        except Queue.Full:
            self.__callErrCallback(FAIL_REASON.QUEUE_FULL, callback)

    def _checkCommandsToApply(self) -> None:
        if not self.__commandsQueue:  # mqctl: most ticks have none (FORK.md, change 31)
            return
        startTime = self.__clock()
        appended = False  # mqctl: one append_entries for all the commands taken here (FORK.md, 16)

        while self.__clock() - startTime < self.__conf.appendEntriesPeriod:
            if self.__raftLeader is None and self.__conf.commandsWaitLeader:
                break
            try:
                command, callback, leaderTerm = self.__commandsQueue.get_nowait()
            except Queue.Empty:
                break
            # mqctl: a leader's decision is appended by that leader in its term, or not at all
            if leaderTerm is not None and (self.__raftState != _RAFT_STATE.LEADER or
                                           self.__raftCurrentTerm != leaderTerm):
                self.__callErrCallback(FAIL_REASON.NOT_LEADER, callback)
                continue

            requestNode, requestID = None, None
            if isinstance(callback, tuple):
                requestNode, requestID = callback

            if self.__raftState == _RAFT_STATE.LEADER:
                idx, term = self.__getCurrentLogIndex() + 1, self.__raftCurrentTerm

                if self.__conf.dynamicMembershipChange:
                    changeClusterRequest = self.__parseChangeClusterRequest(command)
                else:
                    changeClusterRequest = None

                if changeClusterRequest is None or self.__changeCluster(changeClusterRequest):

                    self.__raftLog.add(command, idx, term)
                    if changeClusterRequest is not None:  # mqctl: one change at a time (FORK.md, change 28)
                        self.__changeClusterIDx = idx

                    if requestNode is None:
                        if callback is not None:
                            self.__commandsWaitingCommit[idx].append((term, callback))
                    else:
                        self.__transport.send(requestNode, {
                            'type': 'apply_command_response',
                            'request_id': requestID,
                            'log_idx': idx,
                            'log_term': term,
                        })
                    appended = True
                else:

                    if requestNode is None:
                        if callback is not None:
                            callback(None, FAIL_REASON.REQUEST_DENIED)
                    else:
                        self.__transport.send(requestNode, {
                            'type': 'apply_command_response',
                            'request_id': requestID,
                            'error': FAIL_REASON.REQUEST_DENIED,
                        })

            elif self.__raftLeader is not None:
                if requestNode is None:
                    message = {
                        'type': 'apply_command',
                        'command': command,
                    }

                    if callback is not None:
                        self.__commandsLocalCounter += 1
                        self.__commandsWaitingReply[self.__commandsLocalCounter] = callback
                        message['request_id'] = self.__commandsLocalCounter

                    self.__transport.send(self.__raftLeader, message)
                else:
                    self.__transport.send(requestNode, {
                        'type': 'apply_command_response',
                        'request_id': requestID,
                        'error': FAIL_REASON.NOT_LEADER,
                    })
            else:
                self.__callErrCallback(FAIL_REASON.MISSING_LEADER, callback)
        if appended and not self.__conf.appendEntriesUseBatch and self.__raftState == _RAFT_STATE.LEADER:
            self.__sendAppendEntries()

    def _autoTickThread(self) -> None:
        try:
            self.__transport.tryGetReady()
        except TransportNotReadyError:
            logger.exception('failed to perform initialization')
            return
        finally:
            cast(threading.Event, self.__initialised).set()  # mqctl: typed; set with autoTick
        time.sleep(0.1)
        try:
            while True:
                if not cast(threading.Thread, self.__mainThread).is_alive():  # mqctl: typed
                    break
                if self.__destroying:
                    self._doDestroy()
                    break
                try:
                    self._onTick(self.__conf.autoTickPeriod)
                except Exception:
                    # log, wait a little and retry
                    logger.exception('failed _onTick in _autoTickThread')
                    time.sleep(self.__conf.autoTickPeriod)
        except ReferenceError:
            pass

    def doTick(self, timeToWait: float = 0.0) -> None:
        """Performs single tick. Should be called manually if `autoTick <#pysyncobj.SyncObjConf.autoTick>`_ disabled

        :param timeToWait: max time to wait for next tick. If zero - perform single tick without waiting for new events.
            Otherwise - wait for new socket event and return.
        :type timeToWait: float
        """
        assert not self.__conf.autoTick
        self._onTick(timeToWait)

    def _onTick(self, timeToWait: float = 0.0) -> None:
        if not self.__transport.ready:
            try:
                self.__transport.tryGetReady()
            except TransportNotReadyError:
                # Implicitly handled in the 'if not self.__transport.ready' below
                pass

        if not self.__transport.ready:
            time.sleep(timeToWait)
            self.__applyLogEntries()
            return

        if self.__needLoadDumpFile:
            if self.__conf.fullDumpFile is not None and os.path.isfile(self.__conf.fullDumpFile):
                self.__loadDumpFile(clearJournal=False)
            self.__needLoadDumpFile = False

        workTime = self.__clock() - self.__startTime
        if workTime > self.__numOneSecondDumps:
            self.__numOneSecondDumps += 1
            self.__raftLog.onOneSecondTimer()

        # mqctl: a TimeoutNow not acted on within an election timeout is dropped, as etcd aborts a
        # transfer (FORK.md, change 32): a node connected to nobody when it came would otherwise skip
        # PreVote seconds later, once a connection opens, against a leader elected meanwhile
        if self.__transferInProgress and \
                self.__clock() - self.__transferAskedAt > self.__conf.raftMaxTimeout:
            self.__transferInProgress = False
            self.__raftElectionDeadline = self.__clock() + self.__generateRaftTimeout()

        if self.__raftState in (_RAFT_STATE.FOLLOWER, _RAFT_STATE.CANDIDATE) and self.__selfNode is not None:
            # mqctl: the election timeout counted up to the last time messages were read (FORK.md,
            # change 15): a node whose own tick was late reads the leader's waiting messages first
            # mqctl: a node the latest configuration leaves out does not campaign (FORK.md, change 30)
            if not self.__selfRemoved and \
                    self.__raftElectionDeadline < self.__lastPollTime and self.__connectedToAnyone() and \
                    self.__preVoteWon():  # mqctl: PreVote first (FORK.md, change 13)
                self.__raftElectionDeadline = self.__clock() + self.__generateRaftTimeout()
                try:  # mqctl: the new term and own vote are stored first: no election if they cannot be
                    self.__setCurrentTerm(self.__raftCurrentTerm + 1, self.__selfNode.id)
                except StorageError:
                    pass
                else:
                    transfer = self.__transferInProgress  # mqctl
                    self.__transferInProgress = False
                    if transfer:  # mqctl: the votes of a handover get three election timeouts (FORK.md, change 26)
                        self.__raftElectionDeadline = self.__clock() + 3 * self.__generateRaftTimeout()
                    self.__raftLeader = None
                    _electionLogger.info(
                        'raft: starting an election for term %s: %s', self.__raftCurrentTerm,
                        'a leadership transfer' if transfer else 'no leader heard yet' if not self.__lastLeaderContact
                        else 'no append_entries from a leader for %.0f ms'
                        % ((self.__lastPollTime - self.__lastLeaderContact) * 1000))
                    self.__setState(_RAFT_STATE.CANDIDATE)
                    self.__votesCount = 1
                    for node in self.__otherNodes:
                        self.__transport.send(node, {
                            'type': 'request_vote',
                            'term': self.__raftCurrentTerm,
                            'last_log_index': self.__getCurrentLogIndex(),
                            'last_log_term': self.__getCurrentLogTerm(),
                            'pre_vote': True,  # mqctl: this node speaks pre-vote (FORK.md, change 13)
                            'transfer': transfer,  # mqctl: a leadership transfer: no lease applies
                        })
                    self.__onLeaderChanged()
                    if self.__votesCount > (len(self.__otherNodes) + 1) / 2:
                        self.__onBecomeLeader()

        # mqctl: group commit without waiting (FORK.md, changes 5 and 19): the leader's new entries
        # are fdatasynced on the journal's own thread, and it counts its own log below only up to
        # what is durable; a leader whose storage fails steps down
        if self.__raftState == _RAFT_STATE.LEADER and not self.__raftLog.sync_soon():
            self.__setState(_RAFT_STATE.FOLLOWER)
            self.__raftLeader = None

        # mqctl: a follower tells its leader of entries its journal's thread has made durable since
        # it answered their append_entries (FORK.md, change 20)
        if self.__raftState == _RAFT_STATE.FOLLOWER and self.__durableAcksTo is not None:
            # mqctl: only to the leader that asked, in the term it asked in (FORK.md, change 25): the
            # same node leading again in a later term was told of this node's log as it was then,
            # and since then this node may have appended entries of its own (as a leader)
            if self.__durableAcksTo != self.__raftLeader or \
                    self.__durableAcksTerm != self.__raftCurrentTerm:
                self.__durableAcksTo = None
            elif self.__raftLog.sync_soon() and self.__raftLog.durable_index() > self.__reportedDurable:
                self.__sendDurable(self.__durableAcksTo, self.__getCurrentLogIndex() + 1)

        if self.__raftState == _RAFT_STATE.LEADER:

            commitIdx = self.__raftCommitIndex
            nextCommitIdx = self.__raftCommitIndex
            durableIdx = self.__raftLog.durable_index()  # mqctl

            while commitIdx < self.__getCurrentLogIndex():
                commitIdx += 1
                count = 1 if commitIdx <= durableIdx else 0  # mqctl: its own vote once durable
                for node in self.__otherNodes:
                    if self.__raftMatchIndex[node] >= commitIdx:
                        count += 1
                if count <= (len(self.__otherNodes) + 1) / 2:
                    break
                entries = self.__getEntries(commitIdx, 1)
                if not entries:
                    continue
                commitTerm = entries[0][2]
                if commitTerm != self.__raftCurrentTerm:
                    continue
                nextCommitIdx = commitIdx

            if self.__raftCommitIndex != nextCommitIdx:
                self.__raftCommitIndex = nextCommitIdx
                self.__raftLog.setRaftCommitIndex(self.__raftCommitIndex)

            self.__leaderCommitIndex = self.__raftCommitIndex
            # mqctl: CheckQuorum (FORK.md, changes 13 and 15): a peer is silent once it has left an
            # append_entries unanswered for leaderFallbackTimeout, counted from when this leader sent
            # it up to the last time this leader read its sockets: neither a stall of this thread
            # before it sent (a late heartbeat) nor one before it read (answers waiting in the
            # sockets) is held against the peer
            deadline = self.__lastPollTime - self.__conf.leaderFallbackTimeout
            count = 1
            for node in self.__otherNodes:
                if self.__unansweredSince.get(node, deadline + 1) > deadline:
                    count += 1
            if count <= (len(self.__otherNodes) + 1) / 2:
                _electionLogger.warning(
                    'raft: stepping down as leader of term %s: %s', self.__raftCurrentTerm,
                    ', '.join('%s left append_entries unanswered for %.0f ms' % (
                        node.id, (self.__lastPollTime - since) * 1000)
                        for node, since in sorted(self.__unansweredSince.items(), key=lambda kv: kv[0].id)
                        if since <= deadline) or 'no majority')
                self.__setState(_RAFT_STATE.FOLLOWER)
                self.__raftLeader = None

        needSendAppendEntries = self.__applyLogEntries()
        if self.__raftCommitIndex > self.__raftLastApplied:
            timeToWait = 0  # mqctl: more committed entries to apply: the next tick goes on at once

        if self.__raftState == _RAFT_STATE.LEADER:
            if self.__clock() > self.__newAppendEntriesTime or needSendAppendEntries:
                self.__sendAppendEntries()

        if not self.__onReadyCalled and self.__raftLastApplied == self.__leaderCommitIndex:
            if self.__conf.onReady:
                self.__conf.onReady()
            self.__onReadyCalled = True

        lastLogIdx = self.__getCurrentLogIndex()  # mqctl
        self._checkCommandsToApply()
        if self.__raftState == _RAFT_STATE.LEADER and self.__getCurrentLogIndex() != lastLogIdx:
            # mqctl: the leader's fsync of what it just appended (and sent) runs while the followers
            # write theirs, not after their answers; a tick counts it once done
            self.__raftLog.sync_soon()
            # mqctl: a leader without other nodes commits it in the next tick at once, not after
            # waiting timeToWait in poll (~11 ms -> well under 1 ms per write)
            if not self.__otherNodes:
                timeToWait = 0
        self.__tryLogCompaction()

        with self.__onTickCallbacksLock:
            for callback in self.__onTickCallbacks:
                callback()

        self.__lastPollTime = self.__clock()  # mqctl: CheckQuorum (FORK.md, change 13)
        self._poller.poll(timeToWait)
        self.__lastCompletedPoll = self.__lastPollTime  # mqctl: FORK.md, change T4

    def __applyLogEntries(self) -> bool:
        needSendAppendEntries = False

        if self.__raftCommitIndex > self.__raftLastApplied:
            count = self.__raftCommitIndex - self.__raftLastApplied
            entries = self.__getEntries(self.__raftLastApplied + 1, count)
            # mqctl: at most half an appendEntriesPeriod of applying per tick (FORK.md, change 17)
            applyUntil = self.__clock() + self.__conf.appendEntriesPeriod / 2
            for entry in entries:
                if self.__clock() > applyUntil:
                    break
                try:
                    currentTermID = entry[2]
                    subscribers = self.__commandsWaitingCommit.pop(entry[1], [])
                    res = self.__doApplyCommand(entry[0])
                    for subscribeTermID, callback in subscribers:
                        if subscribeTermID == currentTermID:
                            callback(res, FAIL_REASON.SUCCESS)
                        else:
                            callback(None, FAIL_REASON.DISCARDED)

                    self.__raftLastApplied += 1
                except SyncObjExceptionWrongVer as e:
                    logger.error(
                        'request to switch to unsupported code version (self version: %d, requested version: %d)' %
                        (self.__selfCodeVersion, e.ver))

            if not self.__conf.appendEntriesUseBatch:
                needSendAppendEntries = True

        return needSendAppendEntries

    def addOnTickCallback(self, callback: Callable[[], None]) -> None:
        with self.__onTickCallbacksLock:
            self.__onTickCallbacks.append(callback)

    def removeOnTickCallback(self, callback: Callable[[], None]) -> None:
        with self.__onTickCallbacksLock:
            try:
                self.__onTickCallbacks.remove(callback)
            except ValueError:
                # callback not in list, ignore
                pass

    def isNodeConnected(self, node: Any) -> bool:
        """
        Checks if the given node is connected
        :param node: node to check
        :type node: Node
        :rtype: bool
        """
        return node in self.__connectedNodes

    def activeNodes(self) -> set[Any]:
        """mqctl: the other nodes this leader counts as live for CheckQuorum (connected, and no
        append_entries left unanswered for leaderFallbackTimeout): what `mqctl quorum add|remove`
        counts before a change that could leave the group without a quorum (FORK.md, change 33).
        On a follower: the connected nodes."""
        deadline = self.__lastPollTime - self.__conf.leaderFallbackTimeout
        return {node for node in self.__otherNodes if node in self.__connectedNodes and
                self.__unansweredSince.get(node, deadline + 1) > deadline}

    @property
    def selfNode(self) -> Any:
        return self.__selfNode

    @property
    def otherNodes(self) -> set[Any]:
        return self.__otherNodes.copy()

    @property
    def readonlyNodes(self) -> set[Any]:
        return self.__readonlyNodes.copy()

    @property
    def raftLastApplied(self) -> int:
        return self.__raftLastApplied

    @property
    def raftCommitIndex(self) -> int:
        return self.__raftCommitIndex

    @property
    def raftCurrentTerm(self) -> int:
        return self.__raftCurrentTerm

    @property
    def hasQuorum(self) -> bool:
        '''
        Does the cluster have a quorum according to this node

        :rtype: bool
        '''

        nodes = self.__otherNodes
        node_count = len(nodes)
        # Get number of connected nodes that participate in cluster quorum
        connected_count = len(nodes.intersection(self.__connectedNodes))

        if self.__selfNode is not None:
            # This node participates in cluster quorum
            connected_count += 1
            node_count += 1

        return connected_count > node_count / 2

    def getStatus(self) -> dict[str, Any]:
        """Dumps different debug info about cluster to dict and return it"""

        status = {}
        status['version'] = VERSION
        status['revision'] = 'deprecated'
        status['self'] = self.selfNode
        status['state'] = self.__raftState
        status['leader'] = self.__raftLeader
        status['has_quorum'] = self.hasQuorum
        # mqctl: getStatus runs on callers' threads (GetMetadata) while the tick thread changes these
        # collections: iterate over copies (FORK.md, change 12)
        status['partner_nodes_count'] = len(self.__otherNodes)
        for node in list(self.__otherNodes):
            status['partner_node_status_server_' + node.id] = 2 if self.isNodeConnected(node) else 0
        status['readonly_nodes_count'] = len(self.__readonlyNodes)
        for node in list(self.__readonlyNodes):
            status['readonly_node_status_server_' + node.id] = 2 if self.isNodeConnected(node) else 0
        status['log_len'] = len(self.__raftLog)
        status['last_applied'] = self.raftLastApplied
        status['commit_idx'] = self.raftCommitIndex
        status['raft_term'] = self.raftCurrentTerm
        status['next_node_idx_count'] = len(self.__raftNextIndex)
        for node, idx in list(iteritems(self.__raftNextIndex)):
            status['next_node_idx_server_' + node.id] = idx
        status['match_idx_count'] = len(self.__raftMatchIndex)
        for node, idx in list(iteritems(self.__raftMatchIndex)):
            status['match_idx_server_' + node.id] = idx
        status['leader_commit_idx'] = self.__leaderCommitIndex
        status['uptime'] = int(self.__clock() - self.__startTime)
        status['self_code_version'] = self.__selfCodeVersion
        status['enabled_code_version'] = self.__enabledCodeVersion
        return status

    def _getStatus(self, args: Any, callback: Any) -> None:
        callback(self.getStatus(), None)

    def printStatus(self) -> None:
        """Dumps different debug info about cluster to default logger"""
        status = self.getStatus()
        for k, v in iteritems(status):
            logger.info('%s: %s' % (str(k), str(v)))

    def _printStatus(self) -> None:
        self.printStatus()

    def forceLogCompaction(self) -> None:
        """Force to start log compaction (without waiting required time or required number of entries)"""
        self.__forceLogCompaction = True

    def _forceLogCompaction(self) -> None:
        self.forceLogCompaction()

    def __doApplyCommand(self, command: Any) -> Any:
        commandType = ord(command[:1])
        # Skip no-op and membership change commands
        if commandType == _COMMAND_TYPE.VERSION:
            ver = pickle.loads(command[1:])
            if self.__selfCodeVersion < ver:
                raise SyncObjExceptionWrongVer(ver)
            oldVer = self.__enabledCodeVersion
            self.__enabledCodeVersion = ver
            callback = self.__conf.onCodeVersionChanged
            self.__onSetCodeVersion(ver)
            if callback is not None:
                callback(oldVer, ver)
            return

        # mqctl: a membership change took effect when it was appended, or when the journal was loaded
        # (FORK.md, change 30); applying it again here undid a later change until that was applied too
        if commandType != _COMMAND_TYPE.REGULAR:
            return
        command = pickle.loads(command[1:])
        args: Any = []
        kwargs = {
            '_doApply': True,
        }
        if not isinstance(command, tuple):
            funcID = command
        elif len(command) == 2:
            funcID, args = command
        else:
            funcID, args, newKwArgs = command
            kwargs.update(newKwArgs)

        return self._idToMethod[funcID](*args, **kwargs)

    def __onMessageReceived(self, node: Any, message: Any) -> None:
        # mqctl: a message whose handling needs a term or vote that cannot be stored is dropped,
        # as if lost on the network (StorageError is raised before anything changed)
        try:
            self.__handleMessage(node, message)
        except StorageError:
            pass

    def __handleMessage(self, node: Any, message: Any) -> None:  # mqctl: upstream's __onMessageReceived

        # mqctl: PreVote (FORK.md, change 13). A pre-vote changes no term and no vote. It is granted
        # to a candidate whose next term is above this node's and whose log is at least as up to
        # date, unless this node leads or heard from a leader within the minimum election timeout.
        # Plain pysyncobj ignores these two message types.
        if message['type'] == 'pre_vote' and self.__selfNode is not None:
            self.__peerPreVote[node] = True
            granted = message['term'] > self.__raftCurrentTerm and not self.__inLease() and \
                self.__logUpToDate(message['last_log_term'], message['last_log_index'])
            self.__transport.send(node, {
                'type': 'pre_vote_response',
                'term': message['term'],
                'granted': granted,
                'current_term': self.__raftCurrentTerm,
            })
            return

        if message['type'] == 'pre_vote_response':
            self.__peerPreVote[node] = True
            if self.__preVoteTerm is None or message['term'] != self.__preVoteTerm or \
                    self.__preVoteTerm != self.__raftCurrentTerm + 1 or self.__raftState == _RAFT_STATE.LEADER:
                return
            if message['granted']:
                self.__preVotes.add(node)
                if self.__hasPreVoteMajority():
                    self.__raftElectionDeadline = 0  # the election starts in the next tick
            else:
                self.__preVotes.discard(node)
                if message['current_term'] > self.__raftCurrentTerm:
                    # as etcd: a node whose term is behind takes the higher one, so that its next
                    # pre-vote can be granted
                    self.__preVoteTerm = None
                    self.__setCurrentTerm(message['current_term'], None)
                    self.__setState(_RAFT_STATE.FOLLOWER)
                    self.__raftLeader = None
            return

        if message['type'] == 'timeout_now' and self.__selfNode is not None:
            # Graceful leadership transfer (Raft 'TimeoutNow'): trigger an
            # immediate election, but only on request of the current leader.
            if message['term'] >= self.__raftCurrentTerm and node == self.__raftLeader:
                self.__raftElectionDeadline = 0
                self.__transferInProgress = True
                self.__transferAskedAt = self.__clock()  # mqctl: FORK.md, change 32

        if message['type'] == 'request_vote' and self.__selfNode is not None:
            # mqctl: CheckQuorum's lease (FORK.md, change 13): a candidate of this release asks for
            # votes only after a majority granted it pre-votes; while this node leads or heard from a
            # leader within the minimum election timeout, it ignores such a request unless it is a
            # leadership transfer. A request without 'pre_vote' (plain pysyncobj) is handled as
            # upstream does, and tells that this peer answers no pre-vote.
            self.__peerPreVote[node] = bool(message.get('pre_vote'))
            if message.get('pre_vote') and not message.get('transfer') and self.__inLease():
                return

            if message['term'] > self.__raftCurrentTerm:
                self.__setCurrentTerm(message['term'], None)
                self.__setState(_RAFT_STATE.FOLLOWER)
                self.__raftLeader = None

            if self.__raftState in (_RAFT_STATE.FOLLOWER, _RAFT_STATE.CANDIDATE):
                lastLogTerm = message['last_log_term']
                lastLogIdx = message['last_log_index']
                if message['term'] >= self.__raftCurrentTerm:
                    if lastLogTerm < self.__getCurrentLogTerm():
                        return
                    if lastLogTerm == self.__getCurrentLogTerm() and \
                            lastLogIdx < self.__getCurrentLogIndex():
                        return
                    if self.__votedForNodeId is not None:
                        return

                    self.__setCurrentTerm(self.__raftCurrentTerm, node.id)

                    self.__raftElectionDeadline = self.__clock() + self.__generateRaftTimeout()
                    self.__transport.send(node, {
                        'type': 'response_vote',
                        'term': message['term'],
                    })

        # mqctl: a node a term ahead of the leader that reaches it (FORK.md, change 22). Such a node
        # won pre-votes and then lost its election to the lease (the leader was heard again in
        # between), or came back from a partition with an older release: it ignores this leader's
        # append_entries, and its pre-votes are refused while the leader leads. Told so, as etcd's
        # leader is by an answer of a higher term, the leader steps down and the group elects at a
        # term above both; the node, whose log is behind, cannot win, but takes the new leader's.
        if message['type'] == 'append_entries' and message['term'] < self.__raftCurrentTerm:
            self.__transport.send(node, {'type': 'term_ahead', 'term': self.__raftCurrentTerm})
            return

        if message['type'] == 'term_ahead' and message['term'] > self.__raftCurrentTerm:
            if self.__raftState == _RAFT_STATE.LEADER:
                _electionLogger.warning('raft: stepping down as leader of term %s: %s is at term %s',
                                        self.__raftCurrentTerm, node.id, message['term'])
            self.__setCurrentTerm(message['term'], None)
            self.__setState(_RAFT_STATE.FOLLOWER)
            self.__raftLeader = None
            return

        if message['type'] == 'append_entries' and message['term'] >= self.__raftCurrentTerm:
            if message['term'] > self.__raftCurrentTerm:
                # A new leader at a higher term supersedes any pending transfer.
                self.__transferInProgress = False
            if not self.__transferInProgress:
                # While a transfer is pending, ignore same-term heartbeats from
                # the outgoing leader so they can't postpone the forced election.
                self.__raftElectionDeadline = self.__clock() + self.__generateRaftTimeout()
            self.__lastLeaderContact = self.__clock()  # mqctl: PreVote's lease (FORK.md, change 13)
            self.__preVoteTerm = None  # mqctl: a leader is there: no pre-vote round
            if self.__raftLeader != node:
                self.__onLeaderChanged()
            self.__raftLeader = node
            if message['term'] > self.__raftCurrentTerm:
                self.__setCurrentTerm(message['term'], None)
            self.__setState(_RAFT_STATE.FOLLOWER)
            newEntries = message.get('entries', [])
            serialized = message.get('serialized', None)
            self.__leaderCommitIndex = leaderCommitIndex = message['commit_index']

            # Regular append entries
            if 'prevLogIdx' in message:
                transmission = message.get('transmission', None)
                if transmission is not None:
                    if transmission == 'start':
                        self.__recvTransmission = message['data']
                        self.__sendNextNodeIdx(node, success=False, reset=False)
                        return
                    elif transmission == 'process':
                        self.__recvTransmission += message['data']
                        self.__sendNextNodeIdx(node, success=False, reset=False)
                        return
                    elif transmission == 'finish':
                        self.__recvTransmission += message['data']
                        newEntries = [pickle.loads(self.__recvTransmission)]
                        self.__recvTransmission = ''
                    else:
                        raise Exception('Wrong transmission type')

                prevLogIdx = message['prevLogIdx']
                prevLogTerm = message['prevLogTerm']
                prevEntries = self.__getEntries(prevLogIdx)
                if not prevEntries:
                    self.__sendNextNodeIdx(node, success=False, reset=True)
                    return
                if prevEntries[0][2] != prevLogTerm:
                    self.__sendNextNodeIdx(node, nextNodeIdx = prevLogIdx, success = False, reset=True)
                    return
                # mqctl: the entries of this message that this node holds already (same index and
                # term) stay; only what follows them is deleted. Upstream deleted every entry after
                # prevLogIdx and appended them again, which loses acknowledged entries on a power loss
                # in between (FORK.md)
                held = 0
                while held < len(newEntries) and held + 1 < len(prevEntries) and \
                        prevEntries[held + 1][2] == newEntries[held][2]:
                    held += 1
                prevLogIdx, prevEntries, newEntries = prevLogIdx + held, prevEntries[held:], newEntries[held:]
                if len(prevEntries) > 1:
                    # rollback cluster changes
                    if self.__conf.dynamicMembershipChange:
                        for entry in reversed(prevEntries[1:]):
                            clusterChangeRequest = self.__parseChangeClusterRequest(entry[0])
                            if clusterChangeRequest is not None:
                                self.__doChangeCluster(clusterChangeRequest, reverse=True)

                    if prevLogIdx + 1 <= self.__raftLastApplied:
                        logger.critical(
                            'truncating already-applied log entries from index %d '
                            '(last applied: %d) - state machine may have diverged from '
                            'other cluster members', prevLogIdx + 1, self.__raftLastApplied)
                    self.__deleteEntriesFrom(prevLogIdx + 1)
                for entry in newEntries:
                    self.__raftLog.add(*entry)

                # apply cluster changes
                if self.__conf.dynamicMembershipChange:
                    for entry in newEntries:
                        clusterChangeRequest = self.__parseChangeClusterRequest(entry[0])
                        if clusterChangeRequest is not None:
                            self.__doChangeCluster(clusterChangeRequest)

                nextNodeIdx = prevLogIdx + 1
                if newEntries:
                    nextNodeIdx = newEntries[-1][1] + 1

                # mqctl: the leader counts only durable entries. One that takes durable
                # acknowledgements hears at once what this node appended and what of it is durable
                # so far, the rest once the journal's thread has synced it (FORK.md, change 20): a
                # slow fdatasync no longer holds this node's answers, which the leader's CheckQuorum
                # waits for. An older leader hears of them only once they are durable. If storage
                # fails, answer without success (the leader sees this node alive but counts nothing)
                if message.get('durable_acks'):
                    if self.__raftLog.sync_soon():
                        self.__durableAcksTo = node
                        self.__durableAcksTerm = self.__raftCurrentTerm  # mqctl: FORK.md, change 25
                        self.__sendDurable(node, nextNodeIdx)
                    else:
                        self.__sendNextNodeIdx(node, success=False, reset=False)
                elif self.__raftLog.sync():
                    self.__sendNextNodeIdx(node, nextNodeIdx=nextNodeIdx, success=True)
                else:
                    self.__sendNextNodeIdx(node, success=False, reset=False)

            # Install snapshot
            elif serialized is not None:
                if self.__receiveSnapshot(serialized):  # mqctl: durable in place (FORK.md, change 14)
                    self.__loadDumpFile(clearJournal=True)
                    if self.__raftLog.sync():  # mqctl: the reset journal is durable before success
                        self.__sendNextNodeIdx(node, success=True)

            # If the log was truncated below the commit index, don't persist a commit
            # index covering entries that are no longer the committed ones.
            if self.__raftCommitIndex > self.__getCurrentLogIndex():
                self.__raftCommitIndex = self.__getCurrentLogIndex()

            if leaderCommitIndex > self.__raftCommitIndex:
                self.__raftCommitIndex = min(leaderCommitIndex, self.__getCurrentLogIndex())

            self.__raftLog.setRaftCommitIndex(self.__raftCommitIndex)

        if message['type'] == 'apply_command':
            if 'request_id' in message:
                self._applyCommand(message['command'], (node, message['request_id']))
            else:
                self._applyCommand(message['command'], None)

        if message['type'] == 'apply_command_response':
            requestID = message['request_id']
            error = message.get('error', None)
            callback = self.__commandsWaitingReply.pop(requestID, None)
            if callback is not None:
                if error is not None:
                    callback(None, error)
                else:
                    idx = message['log_idx']
                    term = message['log_term']
                    if idx <= self.__raftLastApplied:
                        # Stale apply_command_response:
                        # The log position was already applied (e.g. via snapshot installed after leader reconnect)
                        # before this response was processed. Or the leader was restarted without notice (and remains leader).
                        # The command outcome cannot be tracked; signal the caller so it can retry rather than hanging
                        # forever.
                        callback(None, FAIL_REASON.UNKNOWN_OUTCOME)
                    else:
                        self.__commandsWaitingCommit[idx].append((term, callback))

        if self.__raftState == _RAFT_STATE.CANDIDATE:
            if message['type'] == 'response_vote' and message['term'] == self.__raftCurrentTerm:
                self.__votesCount += 1

                if self.__votesCount > (len(self.__otherNodes) + 1) / 2:
                    self.__onBecomeLeader()

        if self.__raftState == _RAFT_STATE.LEADER:
            if message['type'] == 'next_node_idx':
                if node not in self.__raftMatchIndex:  # mqctl: no longer a member (FORK.md, change 29)
                    return
                reset = message['reset']
                nextNodeIdx = message['next_node_idx']
                success = message['success']

                currentNodeIdx = nextNodeIdx - 1
                durableIdx = message.get('durable_idx')  # mqctl: FORK.md, change 20
                if reset:
                    self.__raftNextIndex[node] = nextNodeIdx
                if success and durableIdx is not None:
                    # appended up to currentNodeIdx, matched (counted) only where durable
                    matched = min(currentNodeIdx, durableIdx)
                    if self.__raftMatchIndex[node] < matched:
                        self.__raftMatchIndex[node] = matched
                    if self.__raftNextIndex[node] < nextNodeIdx:
                        self.__raftNextIndex[node] = nextNodeIdx
                elif success:
                    if self.__raftMatchIndex[node] < currentNodeIdx:
                        self.__raftMatchIndex[node] = currentNodeIdx
                        self.__raftNextIndex[node] = nextNodeIdx
                self.__lastResponseTime[node] = self.__clock()
                self.__unansweredSince.pop(node, None)  # mqctl: CheckQuorum (FORK.md, change 15)

    def __callErrCallback(self, err: Any, callback: Any) -> None:
        if callback is None:
            return
        if isinstance(callback, tuple):
            requestNode, requestID = callback
            self.__transport.send(requestNode, {
                'type': 'apply_command_response',
                'request_id': requestID,
                'error': err,
            })
            return
        callback(None, err)

    def __sendDurable(self, node: Any, nextNodeIdx: int) -> None:
        # mqctl: success for what this node appended up to nextNodeIdx - 1, and the last of it that is
        # durable, which is all the leader counts (FORK.md, change 20)
        durable = min(self.__raftLog.durable_index(), nextNodeIdx - 1)
        self.__reportedDurable = durable
        self.__transport.send(node, {
            'type': 'next_node_idx',
            'next_node_idx': nextNodeIdx,
            'reset': False,
            'success': True,
            'durable_idx': durable,
        })

    def __sendNextNodeIdx(self, node: Any, reset: bool = False, nextNodeIdx: int | None = None,
                          success: bool = False) -> None:
        if nextNodeIdx is None:
            nextNodeIdx = self.__getCurrentLogIndex() + 1
        self.__transport.send(node, {
            'type': 'next_node_idx',
            'next_node_idx': nextNodeIdx,
            'reset': reset,
            'success': success,
        })

    def __preVoteWon(self) -> bool:
        # mqctl: PreVote (FORK.md, change 13). True when this node may start an election now: for a
        # leadership transfer, or once a majority granted its pre-votes for its term + 1. Otherwise
        # it asks every peer for a pre-vote at term + 1, changing no term, and waits for the answers
        # (or one more election timeout). A peer known to run plain pysyncobj answers no pre-vote
        # and is counted as granting it, so that this node can be elected in a mixed group
        # (a rolling upgrade); a peer that never answered anything is not counted.
        if self.__transferInProgress:
            return True
        # mqctl: grants count for one election timeout after the round was asked (FORK.md, change 24):
        # a round left pending while this node was connected to nobody must not start an election
        # later on the word of peers that may have followed a leader (or died) since
        if self.__preVoteTerm == self.__raftCurrentTerm + 1 and self.__hasPreVoteMajority() and \
                self.__clock() - self.__preVoteSince <= self.__conf.raftMaxTimeout:
            self.__preVoteTerm = None
            return True
        self.__raftElectionDeadline = self.__clock() + self.__generateRaftTimeout()
        self.__preVoteSince = self.__clock()  # mqctl: FORK.md, change 24
        self.__preVoteTerm = self.__raftCurrentTerm + 1
        self.__preVotes = set(n for n in self.__otherNodes if self.__peerPreVote.get(n) is False)
        for node in self.__otherNodes:
            self.__transport.send(node, {
                'type': 'pre_vote',
                'term': self.__preVoteTerm,
                'last_log_index': self.__getCurrentLogIndex(),
                'last_log_term': self.__getCurrentLogTerm(),
            })
        if self.__hasPreVoteMajority():
            self.__preVoteTerm = None
            return True
        return False

    def __hasPreVoteMajority(self) -> bool:  # mqctl: PreVote
        return len(self.__preVotes & self.__otherNodes) + 1 > (len(self.__otherNodes) + 1) / 2

    def __inLease(self) -> bool:
        # mqctl: CheckQuorum's lease: this node leads (and steps down once it has not heard from a
        # majority for leaderFallbackTimeout), or heard from a leader within the minimum election timeout
        return self.__raftState == _RAFT_STATE.LEADER or \
            self.__clock() - self.__lastLeaderContact < self.__conf.raftMinTimeout

    def __logUpToDate(self, lastLogTerm: int, lastLogIdx: int) -> bool:  # mqctl: Raft's rule, as for request_vote
        return lastLogTerm > self.__getCurrentLogTerm() or \
            (lastLogTerm == self.__getCurrentLogTerm() and lastLogIdx >= self.__getCurrentLogIndex())

    def __generateRaftTimeout(self) -> float:
        minTimeout = self.__conf.raftMinTimeout
        maxTimeout = self.__conf.raftMaxTimeout
        return cast(float, minTimeout + (maxTimeout - minTimeout) * self.__random.random())  # mqctl

    def __onReadonlyNodeConnected(self, node: Any) -> None:
        self.__readonlyNodes.add(node)
        self.__connectedNodes.add(node)
        self.__raftNextIndex[node] = self.__getCurrentLogIndex() + 1
        self.__raftMatchIndex[node] = 0

    def __onReadonlyNodeDisconnected(self, node: Any) -> None:
        self.__readonlyNodes.discard(node)
        self.__connectedNodes.discard(node)
        self.__raftNextIndex.pop(node, None)
        self.__raftMatchIndex.pop(node, None)
        node._destroy()

    def __onNodeConnected(self, node: Any) -> None:
        self.__connectedNodes.add(node)

    def __onNodeDisconnected(self, node: Any) -> None:
        self.__connectedNodes.discard(node)

    def __getCurrentLogIndex(self) -> int:
        return cast(int, self.__raftLog.entry_index(-1))  # mqctl: without copying the command (FORK.md, change 27)

    def __getCurrentLogTerm(self) -> int:
        return cast(int, self.__raftLog.entry_term(-1))

    def __getPrevLogIndexTerm(self, nextNodeIndex: int) -> tuple[int | None, int | None]:
        prevIndex = nextNodeIndex - 1
        entries = self.__getEntries(prevIndex, 1)
        if entries:
            return prevIndex, entries[0][2]
        return None, None

    def __getEntries(self, fromIDx: int | None, count: int | None = None,
                     maxSizeBytes: int | None = None) -> list[Any]:
        firstEntryIDx = self.__raftLog.entry_index(0)
        if fromIDx is None or fromIDx < firstEntryIDx:
            return []
        diff = fromIDx - firstEntryIDx
        result: list[Any]  # mqctl: typed
        if count is None:
            result = self.__raftLog[diff:]
        else:
            result = self.__raftLog[diff:diff + count]
        if maxSizeBytes is None:
            return result
        totalSize = 0
        i = 0
        for i, entry in enumerate(result):
            totalSize += len(entry[0])
            if totalSize >= maxSizeBytes:
                break
        return result[:i + 1]

    def _isLeader(self) -> bool:
        """ Check if current node has a leader state.
        WARNING: there could be multiple leaders at the same time!

        :return: True if leader, False otherwise
        :rtype: bool
        """
        return self.__raftState == _RAFT_STATE.LEADER

    def _getLeader(self) -> Any:
        """ Returns last known leader.

        WARNING: this information could be outdated, eg. there could be another leader selected!
        WARNING: there could be multiple leaders at the same time!

        :return: the last known leader node.
        :rtype: Node
        """
        return self.__raftLeader

    def isReady(self) -> bool:
        """Check if current node is initially synced with others and has an actual data.

        :return: True if ready, False otherwise
        :rtype: bool
        """
        return self.__onReadyCalled

    def _isReady(self) -> bool:
        return self.isReady()

    def _getTerm(self) -> int:
        return self.__raftCurrentTerm

    def _getRaftLogSize(self) -> int:
        return len(self.__raftLog)

    def __deleteEntriesFrom(self, fromIDx: int) -> None:
        firstEntryIDx = self.__raftLog.entry_index(0)
        diff = fromIDx - firstEntryIDx
        if diff < 0:
            return
        self.__raftLog.deleteEntriesFrom(diff)

    def __deleteEntriesTo(self, toIDx: int) -> None:
        firstEntryIDx = self.__raftLog.entry_index(0)
        diff = toIDx - firstEntryIDx
        if diff < 0:
            return
        self.__raftLog.deleteEntriesTo(diff)

    def __onBecomeLeader(self) -> None:
        self.__raftLeader = self.__selfNode
        self.__setState(_RAFT_STATE.LEADER)

        self.__lastResponseTime.clear()
        self.__unansweredSince.clear()  # mqctl: CheckQuorum (FORK.md, change 15)
        for node in self.__otherNodes | self.__readonlyNodes:
            self.__raftNextIndex[node] = self.__getCurrentLogIndex() + 1
            self.__raftMatchIndex[node] = 0
            self.__lastResponseTime[node] = self.__clock()

        # No-op command after leader election.
        idx, term = self.__getCurrentLogIndex() + 1, self.__raftCurrentTerm
        self.__raftLog.add(_bchr(_COMMAND_TYPE.NO_OP), idx, term)
        self.__noopIDx = idx
        self.__changeClusterIDx = None  # mqctl: changes before the no-op are committed with it (change 28)
        if not self.__conf.appendEntriesUseBatch:
            self.__sendAppendEntries()

        self.__sendAppendEntries()

    def __setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:
        # mqctl: stored first; raises StorageError, changing nothing, if it cannot be stored
        self.__raftLog.setCurrentTerm(term, votedForNodeId)
        self.__raftCurrentTerm = term
        self.__votedForNodeId = votedForNodeId

    def __syncDumpFile(self) -> bool:
        # mqctl: a snapshot pysyncobj's serializer renamed into place is durable (file and
        # directory) before the journal is cut or reset on the strength of it
        if self.__conf.fullDumpFile is None:
            return True
        try:
            fsync_file_and_dir(self.__conf.fullDumpFile)
            return True
        except OSError as e:
            self.__snapshotError = e
            self.__onSnapshotFailed('syncing')
            return False

    def __writeSnapshot(self, fileName: str, raftData: Any) -> None:
        # mqctl: conf.serializer behind fault injection; the reason of a failure is kept for the
        # log line (pysyncobj's Serializer swallows it) and a partial file is not left behind
        self.__snapshotError = None
        try:
            storage = getattr(self.__raftLog, 'storage', None)
            if storage is not None:
                storage.check(fileName)
            self.__conf.serializer(fileName, raftData)
        except Exception as e:
            self.__snapshotError = e
            try:
                os.unlink(fileName)
            except OSError:
                pass
            raise

    def __receiveSnapshot(self, serialized: Any) -> bool:
        # mqctl: a snapshot from the leader, chunk by chunk, written through the journal's file layer
        # (crash simulation, fault injection) to a temporary file that is fsynced before it is
        # renamed over the snapshot, and the directory fsynced after. Upstream's
        # Serializer.setTransmissionData renamed it unsynced and logged a traceback for every chunk
        # it could not write. True once a complete snapshot is durable in place.
        if self.__conf.fullDumpFile is None:
            return cast(bool, self.__serializer.setTransmissionData(serialized))  # mqctl: typed
        if serialized is None:
            return False
        data, isFirst, isLast = serialized
        fileName = self.__conf.fullDumpFile
        tmpFile = fileName + '.1.tmp'
        storage = getattr(self.__raftLog, 'storage', None) or Storage()
        try:
            if isFirst:
                self.__dropIncomingSnapshot()
                self.__incomingSnapshot = (storage.open(tmpFile, create=True, truncate=True), 0)
            elif self.__incomingSnapshot is None:
                return False  # the start of this transmission was not stored: wait for the next one
            f, size = self.__incomingSnapshot
            if data:
                f.pwrite(data, size)
                self.__incomingSnapshot = (f, size + len(data))
            if not isLast:
                return False
            f.sync()
            self.__dropIncomingSnapshot()
            storage.rename(tmpFile, fileName)
            storage.fsync_dir(os.path.dirname(fileName))
        except OSError as e:
            self.__dropIncomingSnapshot()
            try:
                os.unlink(tmpFile)
            except OSError:
                pass
            self.__snapshotError = e
            self.__onSnapshotFailed('receiving', 'this node cannot take the leader\'s snapshot '
                                    'until it can store it (the leader sends it again)')
            return False
        self.__onSnapshotStored('received')
        return True

    def __dropIncomingSnapshot(self) -> None:  # mqctl
        if self.__incomingSnapshot is not None:
            self.__incomingSnapshot[0].close()
            self.__incomingSnapshot = None

    def __onSnapshotFailed(self, what: str, consequence: str | None = None) -> None:
        # mqctl: one line per failure streak, with its reason; the next attempt in _SNAPSHOT_RETRY s.
        # Nothing while the journal fails too: its own line says why storage fails.
        self.__snapshotRetryTime = self.__clock() + _SNAPSHOT_RETRY
        if self.__snapshotFailing or getattr(self.__raftLog, 'error', None):
            return
        self.__snapshotFailing = True
        e = self.__snapshotError
        if isinstance(e, OSError) and e.errno is not None:
            reason = '%s (%s)' % (e.strerror or e, errno.errorcode.get(e.errno, e.errno))
        else:
            reason = str(e) if e is not None else 'renaming it into place failed'
        consequence = consequence or ('the journal is not compacted until a snapshot can be written '
                                      '(retried every %g s)' % _SNAPSHOT_RETRY)
        _snapshotLogger.warning('raft snapshot: %s %s failed: %s; %s', what, self.__conf.fullDumpFile,
                                reason, consequence)

    def __onSnapshotStored(self, what: str) -> None:  # mqctl: the end of a failure streak
        if self.__snapshotFailing:
            self.__snapshotFailing = False
            _snapshotLogger.info('raft snapshot: %s %s again', self.__conf.fullDumpFile, what)

    def __setState(self, newState: int) -> None:
        oldState = self.__raftState
        self.__raftState = newState
        callback = self.__conf.onStateChanged
        if callback is not None and oldState != newState:
            callback(oldState, newState)

    def __onLeaderChanged(self) -> None:
        for id in sorted(self.__commandsWaitingReply):
            self.__commandsWaitingReply[id](None, FAIL_REASON.LEADER_CHANGED)
        self.__commandsWaitingReply = {}

    def __sendAppendEntries(self) -> None:
        self.__newAppendEntriesTime = self.__clock() + self.__conf.appendEntriesPeriod

        startTime = self.__clock()

        batchSizeBytes = self.__conf.appendEntriesBatchSizeBytes

        for node in self.__otherNodes | self.__readonlyNodes:
            # mqctl: CheckQuorum (FORK.md, change 15): the first append_entries a peer leaves
            # unanswered, also one that cannot be sent (no connection)
            self.__unansweredSince.setdefault(node, startTime)
            if node not in self.__connectedNodes:
                self.__serializer.cancelTransmisstion(node)
                continue

            sendSingle = True
            sendingSerialized = False
            nextNodeIndex = self.__raftNextIndex[node]

            while nextNodeIndex <= self.__getCurrentLogIndex() or sendSingle or sendingSerialized:
                if nextNodeIndex > self.__raftLog.entry_index(0):
                    prevLogIdx, prevLogTerm = self.__getPrevLogIndexTerm(nextNodeIndex)
                    entries = []
                    if nextNodeIndex <= self.__getCurrentLogIndex():
                        entries = self.__getEntries(nextNodeIndex, None, batchSizeBytes)
                        self.__raftNextIndex[node] = entries[-1][1] + 1

                    if len(entries) == 1 and len(entries[0][0]) >= batchSizeBytes:
                        entry = pickle.dumps(entries[0])
                        for pos in xrange(0, len(entry), batchSizeBytes):
                            currData = entry[pos:pos + batchSizeBytes]
                            if pos == 0:
                                transmission = 'start'
                            elif pos + batchSizeBytes >= len(entries[0][0]):
                                transmission = 'finish'
                            else:
                                transmission = 'process'
                            message = {
                                'type': 'append_entries',
                                'transmission': transmission,
                                'data': currData,
                                'term': self.__raftCurrentTerm,
                                'commit_index': self.__raftCommitIndex,
                                'prevLogIdx': prevLogIdx,
                                'prevLogTerm': prevLogTerm,
                                'durable_acks': True,  # mqctl: FORK.md, change 20
                            }
                            self.__transport.send(node, message)
                            if node not in self.__connectedNodes:
                                break
                    else:
                        message = {
                            'type': 'append_entries',
                            'term': self.__raftCurrentTerm,
                            'commit_index': self.__raftCommitIndex,
                            'entries': entries,
                            'prevLogIdx': prevLogIdx,
                            'prevLogTerm': prevLogTerm,
                            'durable_acks': True,  # mqctl: FORK.md, change 20
                        }
                        self.__transport.send(node, message)
                        if node not in self.__connectedNodes:
                            break
                else:
                    transmissionData = self.__serializer.getTransmissionData(node)
                    message = {
                        'type': 'append_entries',
                        'term': self.__raftCurrentTerm,
                        'commit_index': self.__raftCommitIndex,
                        'serialized': transmissionData,
                    }
                    self.__transport.send(node, message)
                    if node not in self.__connectedNodes:
                        break

                    if transmissionData is not None:
                        isLast = transmissionData[2]
                        if isLast:
                            self.__raftNextIndex[node] = self.__raftLog[1][1] + 1
                            sendingSerialized = False
                        else:
                            sendingSerialized = True
                    else:
                        sendingSerialized = False

                nextNodeIndex = self.__raftNextIndex[node]

                sendSingle = False

                delta = self.__clock() - startTime
                if delta > self.__conf.appendEntriesPeriod:
                    break

    def __connectedToAnyone(self) -> bool:
        return len(self.__connectedNodes) > 0 or len(self.__otherNodes) == 0

    def tickThreadIdent(self) -> int | None:
        # mqctl: the thread that ticks, for the node's report of a stalled tick (FORK.md, change 21)
        thread = self.__thread
        return thread.ident if thread is not None else None

    def connectionClock(self) -> float:
        # mqctl: the Raft connections' clock (FORK.md, change T4): when the last poll that ran to
        # its end started; up to then a connection's silence was seen, not this node's lateness
        return self.__lastCompletedPoll

    _tickThreadIdent = tickThreadIdent  # mqctl: the names of changes 21 and T4, kept for callers
    _connectionClock = connectionClock

    def _getConf(self) -> Any:
        return self.__conf

    @property
    def conf(self) -> Any:
        return self.__conf

    def _getEncryptor(self) -> Any:
        return self.__encryptor

    @property
    def encryptor(self) -> Any:
        return self.__encryptor

    def __changeCluster(self, request: Any) -> bool:
        if self.__raftLastApplied < cast(int, self.__noopIDx):  # mqctl: typed; set on a leader
            # No-op entry was not commited yet
            return False

        if self.__changeClusterIDx is not None:
            if self.__raftLastApplied >= self.__changeClusterIDx:
                self.__changeClusterIDx = None

        # Previous cluster change request was not commited yet
        if self.__changeClusterIDx is not None:
            return False

        return self.__doChangeCluster(request)

    def __setCodeVersion(self, newVersion: int) -> None:
        self.__enabledCodeVersion = newVersion

    def __doChangeCluster(self, request: Any, reverse: bool = False) -> bool:
        requestType = request[0]
        requestNodeId = request[1]
        if len(request) >= 3:
            requestNode = request[2]
            if not isinstance(requestNode, Node): # Actually shouldn't be necessary, but better safe than sorry.
                requestNode = self.__nodeClass(requestNode)
        else:
            requestNode = self.__nodeClass(requestNodeId)

        if requestType == 'add':
            adding = not reverse
        elif requestType == 'rem':
            adding = reverse
        else:
            return False

        if adding:
            newNode = requestNode
            if newNode == self.__selfNode and not self._isLeader():
                self.__selfRemoved = False  # mqctl: a member again (FORK.md, change 30)
            # Node already exists in cluster
            if newNode == self.__selfNode or newNode in self.__otherNodes:
                return False
            self.__otherNodes.add(newNode)
            self.__raftNextIndex[newNode] = self.__getCurrentLogIndex() + 1
            self.__raftMatchIndex[newNode] = 0
            if self._isLeader():
                self.__lastResponseTime[newNode] = self.__clock()
            self.__transport.addNode(newNode)
            return True
        else:
            oldNode = requestNode
            if oldNode == self.__selfNode:
                if not self._isLeader():  # mqctl: FORK.md, change 30 (a leader refuses its own removal)
                    self.__selfRemoved = True
                return False
            if oldNode not in self.__otherNodes:
                return False
            self.__otherNodes.discard(oldNode)
            self.__raftNextIndex.pop(oldNode, None)
            self.__raftMatchIndex.pop(oldNode, None)
            self.__transport.dropNode(oldNode)
            return True

    def __replayClusterChanges(self, fromIDx: int) -> None:
        """mqctl: the configuration in force is the latest one in the log, committed or not (Raft;
        FORK.md, change 30): the membership changes of the journal from `fromIDx` on, in order, on
        top of the partners given or the snapshot's. Each sets its node's membership, so applying
        some of them twice gives the same configuration."""
        if not self.__conf.dynamicMembershipChange:
            return
        for entry in self.__getEntries(fromIDx):
            clusterChangeRequest = self.__parseChangeClusterRequest(entry[0])
            if clusterChangeRequest is not None:
                self.__doChangeCluster(clusterChangeRequest)

    def __parseChangeClusterRequest(self, command: bytes) -> Any:
        commandType = ord(command[:1])
        if commandType != _COMMAND_TYPE.MEMBERSHIP:
            return None
        return pickle.loads(command[1:])

    def __tryLogCompaction(self) -> None:
        currTime = self.__clock()
        serializeState, serializeID = self.__serializer.checkSerializing()

        if serializeState == SERIALIZER_STATE.SUCCESS:
            self.__lastSerializedTime = currTime
            if self.__syncDumpFile():  # mqctl: the renamed snapshot is durable before the journal is cut
                self.__deleteEntriesTo(serializeID)
                self.__lastSerializedEntry = serializeID
                self.__onSnapshotStored('written')  # mqctl

        if serializeState == SERIALIZER_STATE.FAILED:
            self.__onSnapshotFailed('writing')  # mqctl: instead of 'Failed to store full dump' every tick

        if serializeState != SERIALIZER_STATE.NOT_SERIALIZING:
            return

        # mqctl: a journal removed under the node and compacted before is written anew only after a
        # snapshot (mqctl.raft.journal.DurableJournal.needs_snapshot): force one
        needSnapshot = getattr(self.__raftLog, 'needs_snapshot', False)
        if currTime < self.__snapshotRetryTime:  # mqctl: after a failed snapshot
            return

        if len(self.__raftLog) <= self.__conf.logCompactionMinEntries and \
                                currTime - self.__lastSerializedTime <= self.__conf.logCompactionMinTime and \
                not self.__forceLogCompaction and not needSnapshot:
            return

        if self.__conf.logCompactionSplit:
            allNodeIds = sorted([node.id for node in (self.__otherNodes | {self.__selfNode})])
            nodesCount = len(allNodeIds)
            selfIdx = allNodeIds.index(self.__selfNode.id)
            interval = self.__conf.logCompactionMinTime
            periodStart = int(currTime / interval ) * interval
            nodeInterval = float(interval) / nodesCount
            nodeIntervalStart = periodStart + selfIdx * nodeInterval
            nodeIntervalEnd = nodeIntervalStart + 0.3 * nodeInterval
            if currTime < nodeIntervalStart or currTime >= nodeIntervalEnd:
                return

        self.__forceLogCompaction = False

        lastAppliedEntries = self.__getEntries(self.__raftLastApplied - 1, 2)
        if len(lastAppliedEntries) < 2 or (lastAppliedEntries[0][1] == self.__lastSerializedEntry
                                           and not needSnapshot):  # mqctl
            self.__lastSerializedTime = currTime
            return

        if self.__conf.serializer is None:
            selfData = dict([(k, v) for k, v in iteritems(self.__dict__) if k not in self.__properies])
            data: Any = selfData
            if self.__consumers:
                data = [selfData]
                for consumer in self.__consumers:
                    data.append(consumer._serialize())
        else:
            data = None
        cluster = self.__otherNodes | {self.__selfNode}
        self.__serializer.serialize((data, lastAppliedEntries[1], lastAppliedEntries[0], cluster), lastAppliedEntries[0][1])

    def __loadDumpFile(self, clearJournal: bool) -> None:
        try:
            data = self.__serializer.deserialize()
            if data[0] is not None:
                if self.__consumers:
                    selfData = data[0][0]
                    consumersData = data[0][1:]
                else:
                    selfData = data[0]
                    consumersData = []

                for k, v in iteritems(selfData):
                    self.__dict__[k] = v

                for i, consumer in enumerate(self.__consumers):
                    consumer._deserialize(consumersData[i])

            # mqctl: a journal that holds the snapshot's last two entries (a crash between writing
            # the snapshot and compacting the journal) keeps the entries after them
            held = self.__getEntries(data[2][1], 2)
            if not clearJournal and len(held) == 2 and held[0] == data[2] and held[1] == data[1]:
                self.__deleteEntriesTo(data[2][1])
            elif clearJournal or \
                    len(self.__raftLog) < 2 or \
                    self.__raftLog[0] != data[2] or \
                    self.__raftLog[1] != data[1]:
                self.__raftLog.clear()
                self.__raftLog.add(*data[2])
                self.__raftLog.add(*data[1])

            self.__raftLastApplied = data[1][1]

            if self.__raftCommitIndex > self.__getCurrentLogIndex():
                logger.warning('raftCommitIndex (%d) exceeds journal end (%d) after loading dump, '
                               'likely due to unsynced journal entries lost on crash; '
                               'clamping to journal end',
                               self.__raftCommitIndex, self.__getCurrentLogIndex())
                self.__raftCommitIndex = self.__getCurrentLogIndex()
                self.__raftLog.setRaftCommitIndex(self.__raftCommitIndex)

            if self.__conf.dynamicMembershipChange:
                self.__updateClusterConfiguration([node for node in data[3] if node != self.__selfNode])
                self.__replayClusterChanges(data[1][1] + 1)  # mqctl: FORK.md, change 30
            self.__onSetCodeVersion(0)
        except:  # noqa: E722
            logger.exception('failed to load full dump')

    def __updateClusterConfiguration(self, newNodes: Any) -> None:
        # newNodes: list of Node or node ID
        newNodes = {self.__nodeClass(node) if not isinstance(node, Node) else node for node in newNodes}
        nodesToRemove = self.__otherNodes - newNodes
        nodesToAdd = newNodes - self.__otherNodes
        for node in nodesToRemove:
            self.__raftNextIndex.pop(node, None)
            self.__raftMatchIndex.pop(node, None)
            self.__transport.dropNode(node)
        self.__otherNodes = newNodes
        for node in nodesToAdd:
            self.__transport.addNode(node)
            self.__raftNextIndex[node] = self.__getCurrentLogIndex() + 1
            self.__raftMatchIndex[node] = 0

def __copy_func(f: Any, name: str) -> Any:
    if is_py3:
        res = types.FunctionType(f.__code__, f.__globals__, name, f.__defaults__, f.__closure__)
        res.__dict__ = f.__dict__
    else:
        res = types.FunctionType(f.func_code, f.func_globals, name, f.func_defaults, f.func_closure)
        res.func_dict = f.func_dict  # type: ignore[attr-defined]  # mqctl: Python 2
    return res

class AsyncResult:
    def __init__(self) -> None:
        self.result: Any = None
        self.error = None
        self.event = threading.Event()

    def onResult(self, res: Any, err: Any) -> None:
        self.result = res
        self.error = err
        self.event.set()


class _CommandsQueue(FastQueue):  # type: ignore[misc]  # mqctl: FORK.md, change 31
    """pysyncobj's FastQueue that says whether it holds anything, without raising Queue.Empty."""

    def __bool__(self) -> bool:
        return bool(self._FastQueue__queue)


def replicated(*decArgs: Any, **decKwargs: Any) -> Any:
    """Replicated decorator. Use it to mark your class members that modifies
    a class state. Function will be called asynchronously. Function accepts
    flowing additional parameters (optional):
        'callback': callback(result, failReason), failReason - `FAIL_REASON <#pysyncobj.FAIL_REASON>`_.
        'sync': True - to block execution and wait for result, False - async call. If callback is passed,
            'sync' option is ignored.
        'timeout': if 'sync' is enabled, and no result is available for 'timeout' seconds -
            SyncObjException will be raised.
    These parameters are reserved and should not be used in kwargs of your replicated method.

    :param func: arbitrary class member
    :type func: function
    :param ver: (optional) - code version (for zero deployment)
    :type ver: int
    """
    def replicatedImpl(func: Any) -> Any:
        def newFunc(self: Any, *args: Any, **kwargs: Any) -> Any:

            if kwargs.pop('_doApply', False):
                return func(self, *args, **kwargs)
            else:
                if isinstance(self, SyncObj):
                    applier = self._applyCommand
                    funcName = self._getFuncName(func.__name__)
                    funcID = self._methodToID[funcName]
                elif isinstance(self, SyncObjConsumer):
                    consumerId = id(self)
                    funcName = self._syncObj._getFuncName((consumerId, func.__name__))
                    funcID = self._syncObj._methodToID[(consumerId, funcName)]
                    applier = self._syncObj._applyCommand
                else:
                    raise SyncObjException("Class should be inherited from SyncObj or SyncObjConsumer")

                callback = kwargs.pop('callback', None)
                leaderTerm = kwargs.pop('leaderTerm', None)  # mqctl: FORK.md, change 11
                cmd: Any  # mqctl: typed
                if kwargs:
                    cmd = (funcID, args, kwargs)
                elif args and not kwargs:
                    cmd = (funcID, args)
                else:
                    cmd = funcID
                sync = kwargs.pop('sync', False)
                if callback is not None:
                    sync = False

                if sync:
                    asyncResult = AsyncResult()
                    callback = asyncResult.onResult

                timeout = kwargs.pop('timeout', None)
                applier(pickle.dumps(cmd), callback, _COMMAND_TYPE.REGULAR, leaderTerm)

                if sync:
                    res = asyncResult.event.wait(timeout)
                    if not res:
                        raise SyncObjException('Timeout')
                    if not asyncResult.error == 0:
                        raise SyncObjException(asyncResult.error)
                    return asyncResult.result

        func_dict = newFunc.__dict__ if is_py3 else newFunc.func_dict  # type: ignore[attr-defined]  # mqctl: Python 2
        func_dict['replicated'] = True
        func_dict['ver'] = int(decKwargs.get('ver', 0))
        func_dict['origName'] = func.__name__

        callframe = sys._getframe(1 if decKwargs else 2)
        namespace = callframe.f_locals
        newFuncName = func.__name__ + '_v' + str(func_dict['ver'])
        namespace[newFuncName] = __copy_func(newFunc, newFuncName)
        functools.update_wrapper(newFunc, func)
        return newFunc

    if len(decArgs) == 1 and len(decKwargs) == 0 and callable(decArgs[0]):
        return replicatedImpl(decArgs[0])

    return replicatedImpl
