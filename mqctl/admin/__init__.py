"""What the admin commands compute, apart from rendering (docs/admin.md).

* ``syncstate``: the getSyncStateSet document (replicas, heartbeat ages, lag behind the master).
* ``epochs``: the getBrokerEpoch document, from a store directory or a broker's GetBrokerEpochCache.
* ``elect``: the electMaster candidate table and the bytes each replica would truncate.
* ``quorum``: the controller group's status as every node sees it, and a health verdict.
* ``output``: JSON and YAML text of the documents (no colours, stable key order).

Every document carries ``"version": SCHEMA_VERSION``; keys are RocketMQ's camelCase names.
Nothing here imports grpc at module level; the functions that talk to a service take a client.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

__all__ = ["SCHEMA_VERSION"]
