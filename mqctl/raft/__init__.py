"""mqctl's Raft layer under the controller: a fork of pysyncobj's `syncobj.py` (see FORK.md), the
durable journal it writes to (`journal`) and the file layer every journal write goes through
(`storage`, with the test-only crash simulator and fault injection)."""
