"""Rendering of the admin documents: rich tables, JSON, YAML, and watch mode (rich Live).

rich is imported inside the functions: `mqctl --help` must stay light. Colours follow rich's
rules (NO_COLOR, FORCE_COLOR, TERM=dumb, not a terminal) plus ``--no-color``; JSON and YAML
are plain text, never coloured.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from mqctl.errors import MqctlError, UsageError

Doc = dict[str, Any]


class Output(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


class AdminOutput(StrEnum):
    """-o of the admin commands whose output mqadmin prints too: Output's, plus ``mqadmin``, its
    text exactly (mqctl.admin.mqadmin_text)."""

    table = "table"
    json = "json"
    yaml = "yaml"
    mqadmin = "mqadmin"


def console(no_color: bool = False, stderr: bool = False) -> Any:
    """The one console every table goes through: its ``print`` lays tables out with ``whole`` (no
    value cut at any width)."""
    from rich.console import Console  # lazy: rich

    class _Console(Console):
        def print(self, *objects: Any, **kwargs: Any) -> None:
            kwargs.setdefault("crop", False)  # a value longer than a line is folded by the terminal, not cut
            super().print(*(whole(o, self.width) for o in objects), **kwargs)

    from mqctl.cli import common  # lazy: cycle with mqctl.cli.common

    kwargs: dict[str, Any] = {"highlight": False, "stderr": stderr}
    if no_color or common.no_color() or os.environ.get("NO_COLOR"):
        kwargs["no_color"] = True
        kwargs["color_system"] = None  # no escape codes at all, bold and italic neither
    c = _Console(**kwargs)
    if not c.is_terminal and not os.environ.get("COLUMNS"):
        c = _Console(width=200, **kwargs)  # piped: wide enough that tables of paths do not wrap
    return c


def emit(
    doc: Doc,
    output: Output,
    table: Callable[[Doc], Any],
    *,
    no_color: bool = False,
    error: BaseException | None = None,
) -> None:
    """Print ``doc`` once in the chosen format. ``error``, raised next by the caller, goes into the
    JSON or YAML document as ``"error"`` (the one document the command prints); a table is followed
    by the error line on stderr alone."""
    from mqctl.cli import common  # lazy: cycle with mqctl.cli.common

    if output is Output.table:
        console(no_color).print(table(doc))
        sys.stdout.flush()
        return
    if error is not None:
        doc = {**doc, "error": common.error_of(error)}
    common.print_document(doc, output.value)


def watch(
    fetch: Callable[[], Doc],
    output: Output,
    table: Callable[[Doc], Any],
    interval: float,
    *,
    no_color: bool = False,
    title: str = "",
) -> None:
    """Redraw every ``interval`` seconds until Ctrl-C (then return: exit code 0).

    Table output redraws in place (rich Live); JSON prints one compact document per line and YAML
    one document per ``---``, for scripts that follow a situation. An error (a controller failover,
    say) is shown and the watch goes on."""
    if interval <= 0:
        raise UsageError(f"-i/--watch needs a positive number of seconds, got {interval}")
    try:
        if output is not Output.table:
            from mqctl.admin.output import to_json, to_yaml  # lazy: start-up

            while True:
                try:
                    doc = fetch()
                except MqctlError as exc:
                    doc = {"version": 1, "error": str(exc), "exitCode": exc.exit_code}
                if output is Output.json:
                    sys.stdout.write(to_json(doc, compact=True) + "\n")
                else:
                    sys.stdout.write("---\n" + to_yaml(doc) + "\n")
                sys.stdout.flush()
                time.sleep(interval)
        # lazy: rich
        from rich.console import Group
        from rich.live import Live
        from rich.text import Text

        con = console(no_color)
        with Live(console=con, auto_refresh=False, transient=False, redirect_stdout=False) as live:
            while True:
                stamp = time.strftime("%H:%M:%S")
                head = Text(f"{title}  every {interval:g}s  {stamp}  (Ctrl-C to stop)", style="dim")
                try:
                    body = whole(table(fetch()), con.width)
                except MqctlError as exc:
                    body = Text(f"error: {exc}", style="bold red")
                live.update(Group(head, body), refresh=True)
                time.sleep(interval)
    except KeyboardInterrupt:
        return


# --- tables -------------------------------------------------------------------------------------


def cells(row: Doc, *keys: str, fmt: Callable[[Any], Any] = str) -> list[Any]:
    """The values of `keys` in a document's row as table cells, each through `fmt` (str; _v: None as
    "-")."""
    return [fmt(row[k]) for k in keys]


def _table(*columns: str, title: str | None = None) -> Any:
    # lazy: rich
    from rich import box
    from rich.table import Table

    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in columns:
        justify = "right" if col.split(" ")[0] in _NUMERIC else "left"
        t.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    return t


# Columns whose values are never cut or folded, whatever their length: addresses, ids, roles, paths.
_WHOLE = {
    "ADDRESS",
    "ADDR",
    "ENDPOINT",
    "RAFT",
    "ID",
    "ROLE",
    "STORE",
    "PATH",
    "BROKER",
    "NAME",
    "STATUS",
    "STATE",
    "MASTER",
    "CLUSTER",
    "KEY",
    "TOPIC",
    "GROUP",
    "CLUSTER/BROKER#ID",
}
FREE_WIDTH = 12


def _plain(cell: Any) -> str:
    from rich.text import Text  # lazy: rich

    if isinstance(cell, str):
        return Text.from_markup(cell).plain
    return str(getattr(cell, "plain", cell))


def whole(renderable: Any, width: int | None = None) -> Any:
    """``renderable`` (a Table, or a Group of them) laid out so that no value is cut (kubectl get -o
    wide, patronictl list keep theirs whole): each column is as wide as its longest value, its
    header wrapped at spaces; a table that is then too wide for ``width`` (the terminal's) shows each
    row as a block of ``HEADER value`` pairs, packed into lines, a value too long for a line on a line
    of its own; a title longer than ``width`` is a line of its own, not broken inside a path."""
    # lazy: rich
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if isinstance(renderable, Group):
        return Group(*(whole(r, width) for r in renderable.renderables))
    if not isinstance(renderable, Table) or width is None:
        return renderable
    title = str(renderable.title) if renderable.title else ""
    # the edges (their box character, their padding) and between two columns the padding and the
    # divider (three characters)
    edges = (2 if renderable.show_edge and renderable.box else 0) + (2 if renderable.pad_edge else 0)
    needed = natural = edges + 3 * max(0, len(renderable.columns) - 1)
    plan = []
    for col in renderable.columns:
        header = " ".join(str(col.header).split())
        word = max([len(w) for w in header.split()] or [0])
        longest = max([len(_plain(c)) for c in col._cells] or [0])
        # identity columns and short values (numbers, yes/no) are never folded; a long free text (a
        # hash, a message) folds down to FREE_WIDTH
        fixed = longest <= FREE_WIDTH or any(
            w in _WHOLE for w in header.upper().replace("(", " ").replace(")", " ").split()
        )
        need = max(longest, word) if fixed else max(word, FREE_WIDTH)
        plan.append((col, fixed, need))
        needed += need
        natural += max(longest, len(header))
    if natural <= width:  # as rich lays it out, every value and header on one line
        for col, fixed, need in plan:
            col.overflow = "fold"
            col.min_width = need if fixed else None
        needed = natural
    head: list[Any] = []
    if title and len(title) > min(width, needed):  # a table narrower than its title would break it
        head = [Text(title, style="table.title", overflow="ignore", no_wrap=True)]
        renderable.title = None
    gaps = max(0, len(renderable.columns) - 1)
    if needed > width >= needed - gaps:  # two spaces between columns, not three
        renderable.collapse_padding = True
        needed -= gaps
    if natural <= width:
        return Group(*head, renderable) if head else renderable
    if needed <= width:
        for col, fixed, need in plan:
            col.overflow = "fold"
            if fixed:
                col.width = need
            else:
                col.min_width = need
        return Group(*head, renderable) if head else renderable
    # record layout: one block per row
    if not head and title:
        head = [Text(title, style="table.title", overflow="ignore", no_wrap=True)]
    blocks: list[Any] = [*head]
    for i in range(renderable.row_count):
        lines: list[Text] = []
        line = Text()
        for j, col in enumerate(renderable.columns):
            cell = col._cells[i]
            value = cell.copy() if isinstance(cell, Text) else Text.from_markup(str(cell))
            pair = Text.assemble((" ".join(str(col.header).split()) + " ", "bold"), value)
            if j == 0:
                line = pair
                continue
            if line.cell_len and line.cell_len + 3 + pair.cell_len > width:
                lines.append(line)
                line = Text("  ")
            line = Text.assemble(line, "   " if line.plain.strip() else "", pair)
        lines.append(line)
        for text in lines:
            text.no_wrap, text.overflow = True, "ignore"
        blocks.extend(lines)
        blocks.append(Text(""))
    return Group(*blocks)


_NUMERIC = {
    "ID",
    "EPOCH",
    "MAX",
    "CONFIRM",
    "LAG",
    "AGE",
    "HEARTBEAT",
    "START",
    "END",
    "TERM",
    "COMMIT",
    "APPLIED",
    "MATCH",
    "NEXT",
    "PRIORITY",
    "TRUNCATE",
    "LOG",
    "BROKER",
}


def _v(x: Any) -> str:
    if x is None:
        return "-"
    if x is True:
        return "yes"
    if x is False:
        return "no"
    return str(x)


def _yes_no(x: Any, good: bool = True) -> Any:
    from rich.text import Text  # lazy: rich

    if x is None:
        return Text("-")
    ok = bool(x) == good
    return Text(_v(x), style="green" if ok else "bold red")


def _age(ms: Any) -> str:
    if ms is None:
        return "-"
    return f"{ms / 1000:.1f}s" if ms < 600_000 else f"{ms / 60000:.0f}m"


def _per_broker(doc: Doc, none: str, parts: Callable[[Doc], list[Any]]) -> Any:
    """The parts drawn for each entry of doc["brokers"], one after the other; `none` when it has none."""
    # lazy: rich
    from rich.console import Group
    from rich.text import Text

    if not doc.get("brokers"):
        return Text(none)
    return Group(*(p for b in doc["brokers"] for p in parts(b)))


def sync_state_table(doc: Doc) -> Any:
    return _per_broker(doc, "no broker sets", _sync_state_parts)


def _sync_state_parts(b: Doc) -> list[Any]:
    from rich.text import Text  # lazy: rich

    head = Text()
    head.append(f"{b['brokerName']}", style="bold")
    head.append(f"  cluster {b['clusterName'] or '-'}  master ")
    if b["masterBrokerId"] is None:
        head.append("none", style="bold red")
    else:
        head.append(f"{b['masterBrokerId']} ({b['masterAddress']})", style="bold")
    head.append(
        f"  masterEpoch {b['masterEpoch']}  syncStateSetEpoch {b['syncStateSetEpoch']}"
        f"  in sync {b['syncStateSetNums']}/"
        f"{len(b['inSyncReplicas']) + len(b['notInSyncReplicas'])}"
    )
    if b.get("failoverPaused") is not None:
        head.append(f"  failover paused: {b['failoverPaused'] or 'no reason given'}", style="bold yellow")
    t = _table(
        "ID",
        "ADDRESS",
        "ROLE",
        "IN SYNC",
        "ALIVE",
        "HEARTBEAT AGE",
        "EPOCH",
        "MAX OFFSET",
        "CONFIRM OFFSET",
        "LAG BYTES",
        "BROKER EPOCH",
    )
    for r in [*b["inSyncReplicas"], *b["notInSyncReplicas"]]:
        t.add_row(
            str(r["brokerId"]),
            r["brokerAddress"],
            r["role"],
            *cells(r, "inSyncStateSet", "alive", fmt=_yes_no),
            _age(r["heartbeatAgeMs"]),
            *cells(r, "epoch", "maxOffset", "confirmOffset", "lagBytes", "brokerEpoch", fmt=_v),
        )
    return [head, t]


def broker_epoch_table(doc: Doc) -> Any:
    return _per_broker(doc, "no brokers", _broker_epoch_parts)


def _broker_epoch_parts(b: Doc) -> list[Any]:
    from rich.text import Text  # lazy: rich

    parts: list[Any] = []
    head = Text()
    head.append(f"{b.get('clusterName') or '-'}/{b.get('brokerName') or '-'}", style="bold")
    head.append(f"  brokerId {_v(b.get('brokerId'))}")
    if b.get("brokerAddr"):
        head.append(f"  brokerAddr {b['brokerAddr']}")
    if b.get("store"):
        head.append(f"  store {b['store']}")
    head.append(f"  maxOffset {_v(b.get('maxOffset'))}")
    parts.append(head)
    if b.get("error"):
        parts.append(Text(f"  error: {b['error']}", style="bold red"))
        return parts
    t = _table("EPOCH", "START OFFSET", "END OFFSET")
    for e in b["epochs"]:
        t.add_row(str(e["epoch"]), str(e["startOffset"]), str(e["endOffset"]))
    parts.append(t)
    if b.get("source"):
        parts.append(Text(f"  read {b['source']}", style="dim"))
    for p in b.get("problems", []):
        parts.append(Text(f"  note: {p}", style="yellow"))
    return parts


def metadata_table(doc: Doc) -> Any:
    from rich.console import Group  # lazy: rich

    kv = _table("KEY", "VALUE")
    for key in (
        "group",
        "groupId",
        "controllerLeaderId",
        "controllerLeaderAddress",
        "term",
        "commitIndex",
        "lastApplied",
        "hasQuorum",
        "stateHash",
        "answeredBy",
    ):
        kv.add_row(key, _v(doc.get(key)))
    peers = _table("PEER (RAFT)", "GRPC ADDRESS", "LEADER", "CONNECTED")
    for p in doc.get("peers", []):
        peers.add_row(p["raftAddress"], _v(p["grpcAddress"]), _v(p["isLeader"]), _yes_no(p["connected"]))
    return Group(kv, peers)


def quorum_table(doc: Doc) -> Any:
    # lazy: rich
    from rich.console import Group
    from rich.text import Text

    head = Text()
    status = doc.get("status") or ("healthy" if doc["healthy"] else "unhealthy")
    head.append(
        status if status == "healthy" else status.upper(),
        style={"healthy": "bold green", "degraded": "bold yellow"}.get(status, "bold red"),
    )
    head.append(
        f"  group {_v(doc['group'])}  leader {_v(doc['leaderId'])} ({_v(doc['leaderAddress'])})"
        f"  term {_v(doc['term'])}  commit index {_v(doc['commitIndex'])}"
        f"  states agree {_v(doc['statesAgree'])}  feature level {_v(doc.get('featureLevel'))}"
    )
    # a node's error is one of the problem: lines below, not a column as well
    nodes = _table(
        "ENDPOINT",
        "RAFT ID",
        "STATE",
        "TERM",
        "COMMIT INDEX",
        "APPLIED INDEX",
        "LOG LENGTH",
        "LAG",
        "STATE HASH",
        title="endpoints",
    )
    for n in doc["nodes"]:
        state = Text(n["state"], style="red") if n["state"] == "unreachable" else n["state"]
        nodes.add_row(
            n["address"],
            _v(n["raftAddress"]),
            state,
            _v(n["term"]),
            _v(n["commitIndex"]),
            _v(n["lastApplied"]),
            _v(n["logLength"]),
            _v(n["lag"]),
            (n["stateHash"] or "-")[:12],
        )
    parts: list[Any] = [head, nodes]
    if doc["peers"]:
        rep = _table(
            "RAFT ADDRESS",
            "GRPC ADDRESS",
            "STATUS",
            "CONNECTED",
            "MATCH INDEX",
            "NEXT INDEX",
            "LAG",
            "MAX FEATURE LEVEL",
            title="replication (leader's view)",
        )
        for p in doc["peers"]:
            rep.add_row(
                p["raftAddress"],
                _v(p["grpcAddress"]),
                p["status"],
                _yes_no(p["connected"]),
                _v(p["matchIndex"]),
                _v(p["nextIndex"]),
                _v(p["lag"]),
                _v(p.get("maxFeatureLevel")),
            )
        parts.append(rep)
    for problem in doc["problems"]:
        parts.append(Text(f"problem: {problem}", style="red"))
    if doc.get("raiseFeatureLevel"):
        parts.append(
            Text(
                f"every member speaks feature level {doc['featureLevelRaisableTo']}; the group is "
                f"at {doc['featureLevel']}: raise it with `{doc['raiseFeatureLevel']}` (it is "
                "never lowered)",
                style="yellow",
            )
        )
    return Group(*parts)


def elect_table(doc: Doc) -> Any:
    # lazy: rich
    from rich.console import Group
    from rich.text import Text

    from mqctl.controller.election import DEFAULT_ELECTION_PRIORITY  # lazy: start-up

    plan = doc["plan"]
    head = Text()
    head.append(f"{plan['clusterName']}/{plan['brokerName']}", style="bold")
    head.append(
        f"  master {_v(plan['masterBrokerId'])}  masterEpoch {plan['masterEpoch']}"
        f"  syncStateSetEpoch {plan['syncStateSetEpoch']}  unclean election "
        f"{'enabled' if plan['uncleanElectionEnabled'] else 'disabled'}"
    )
    t = _table(
        "ID",
        "ADDRESS",
        "ROLE",
        "ALIVE",
        "IN SYNC",
        "EPOCH",
        "MAX OFFSET",
        "CONFIRM OFFSET",
        "PRIORITY",
        "ELECTABLE",
        "TRUNCATE IF ELECTED (bytes by id)",
    )
    for c in plan["candidates"]:
        trunc = ", ".join(f"{k}: {_v(v)}" for k, v in c["truncateBytes"].items()) or "-"
        mark = " *" if c["brokerId"] == plan["predictedMasterId"] else ""
        prio = "default" if c["electionPriority"] == DEFAULT_ELECTION_PRIORITY else str(c["electionPriority"])
        t.add_row(
            f"{c['brokerId']}{mark}",
            c["brokerAddress"],
            c["role"],
            *cells(c, "alive", "inSyncStateSet", fmt=_yes_no),
            *cells(c, "epoch", "maxOffset", "confirmOffset", fmt=_v),
            prio,
            _yes_no(c["electable"]),
            trunc,
        )
    parts: list[Any] = [head, t]
    pred = plan["predictedMasterId"]
    expected = doc.get("expectedError")
    if doc.get("alreadyMaster"):
        parts.append(Text(f"* broker {plan['designatedBrokerId']} is already the master: nothing to elect"))
    elif pred is None:
        parts.append(Text("* no new master: the controller would refuse", style="bold red"))
    else:
        how = " (designated)" if plan["designatedBrokerId"] is not None else " (controller's choice)"
        note = Text(f"* expected new master: {pred}{how}; truncation estimated from {plan['estimateBasis']}")
        parts.append(note)
    if plan["dataLoss"]:
        target = pred if pred is not None else plan["designatedBrokerId"]
        parts.append(
            Text(f"  broker {target} is outside the SyncStateSet: electing it loses data", style="bold red")
        )
    result = doc.get("result")
    if doc.get("dryRun"):
        if expected is not None:
            parts.append(
                Text(
                    f"without --dry-run: mqctl: error: {expected['message']} (exit {expected['exitCode']})",
                    style="bold red",
                )
            )
        parts.append(Text("dry run: nothing was changed", style="yellow"))
    elif result is not None and result.get("alreadyMaster"):
        parts.append(
            Text(
                f"nothing was changed: master {result['masterBrokerId']} "
                f"({result['masterAddress']}) masterEpoch {result['masterEpoch']} "
                f"syncStateSetEpoch {result['syncStateSetEpoch']}",
                style="bold green",
            )
        )
    elif result is not None:
        parts.append(
            Text(
                f"elected: master {result['masterBrokerId']} ({result['masterAddress']}) "
                f"masterEpoch {result['masterEpoch']} "
                f"syncStateSetEpoch {result['syncStateSetEpoch']}",
                style="bold green",
            )
        )
    return Group(*parts)


def config_table(doc: Doc) -> Any:
    # lazy: rich
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = []
    for c in doc["controllers"]:
        parts.append(Text(f"============{c['address']}============", style="bold"))
        if c.get("error"):
            parts.append(Text(f"error: {c['error']}", style="bold red"))
            continue
        t = _table("KEY", "VALUE")
        for k, v in c["config"].items():
            t.add_row(k, v)
        parts.append(t)
    return Group(*parts)


def message_table(doc: Doc) -> Any:
    from rich.text import Text  # lazy: rich

    return Text(str(doc.get("message", "")))


def history_line(e: Doc) -> Any:
    """One history entry on one line (``history --follow``)."""
    from rich.text import Text  # lazy: rich

    t = Text()
    t.append(f"{e['time']}  term {e['term']}  {e['brokerName'] or '-'}  ")
    t.append(e["what"], style="bold")
    t.append(f"  {e['detail']}  cause: {e['cause']}")
    el = e.get("election")
    if el:
        loss = el["lossBytes"]
        t.append(
            f"  loss {'unknown' if loss is None else f'{loss} bytes'}",
            style="bold red" if loss else "green" if loss == 0 else "yellow",
        )
        t.append(f"  {el['reason']}")
        if el.get("guard"):
            t.append(f"  save it: {el['guard']['guard']}, then {el['guard']['replay']}")
    return t


def _candidates(el: Doc) -> str:
    def one(c: Doc) -> str:
        flags = ["alive" if c["alive"] else "dead", "in SyncStateSet" if c["inSyncStateSet"] else "outside"]
        return (
            f"{c['brokerId']} (epoch {_v(c['epoch'])}, maxOffset {_v(c['maxOffset'])}, "
            f"priority {_v(c['electionPriority'])}, {', '.join(flags)})"
        )

    return "; ".join(one(c) for c in el["candidates"])


def history_table(doc: Doc) -> Any:
    # lazy: rich
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = []
    paused = doc.get("failoverPaused") or {}
    for name, reason in paused.items():
        scope = "every broker set" if name == "*" else name
        parts.append(
            Text(
                f"automatic failover of {scope} is paused: {reason or 'no reason given'}", style="bold yellow"
            )
        )
    if not doc["entries"]:
        parts.append(Text("no entries"))
    else:
        t = _table("TIME", "TERM", "BROKER SET", "WHAT", "DETAIL", "CAUSE", "LOSS BYTES")
        for e in doc["entries"]:
            el = e.get("election")
            detail = e["detail"]
            loss: Any = "-"
            if el:
                detail += (
                    f"; {el['reason']}; old master {_v(el['oldMasterBrokerId'])} maxOffset "
                    f"{_v(el['oldMasterMaxOffset'])}, new {_v(el['newMasterBrokerId'])} maxOffset "
                    f"{_v(el['newMasterMaxOffset'])}; candidates {_candidates(el)}"
                )
                loss = (
                    Text("unknown", style="yellow")
                    if el["lossBytes"] is None
                    else Text(str(el["lossBytes"]), style="bold red" if el["lossBytes"] else "green")
                )
                if el.get("guard"):
                    detail += f"; save it: {el['guard']['guard']}, then {el['guard']['replay']}"
            t.add_row(e["time"], str(e["term"]), e["brokerName"] or "-", e["what"], detail, e["cause"], loss)
        parts.append(t)
    totals = doc.get("lossTotalBytes") or {}
    if totals:
        parts.append(
            Text(
                "bytes elections may have lost: " + ", ".join(f"{name} {n}" for name, n in totals.items()),
                style="bold",
            )
        )
    if "metadata" in doc:
        parts.extend(_replica_metadata(doc["metadata"]))
    return Group(*parts)


_LACKS = (
    ("topics", "topics"),
    ("subscriptionGroups", "subscription groups"),
    ("consumerOffsets", "consumer offsets of"),
)
_SHOWN = 5  # names per kind in a cell; -o json has them all


def _replica_metadata(per_set: Doc) -> list[Any]:
    """`history`'s metadata of each replica now (brokermeta.replica_drift)."""
    from rich.text import Text  # lazy: rich

    out: list[Any] = []
    t = _table(
        "SET",
        "ID",
        "ADDRESS",
        "ROLE",
        "CONTROLLER",
        "METADATA",
        title="what each replica lacks now that another has (mqctl metadata diff -b SET for every "
        "difference)",
    )
    for name, d in per_set.items():
        if "error" in d:
            out.append(Text(f"metadata of {name} not compared: {d['error']}", style="yellow"))
            continue
        for r in d["replicas"]:
            controller = ("alive" if r["alive"] else "not alive") + (
                ", in SyncStateSet" if r["inSyncStateSet"] else ""
            )
            t.add_row(name, str(r["brokerId"]), r["address"], r["role"], controller, _lacks_cell(r))
    if t.row_count:
        out.insert(0, t)
    return out


def _lacks_cell(r: Doc) -> Any:
    from rich.text import Text  # lazy: rich

    if r["status"] != "answered":
        return Text(f"{r['status']}: {r['error']}", style="yellow")
    if r["lacks"] is None:
        return Text("answered; no other replica did, nothing to compare with", style="yellow")
    if not r["lacks"]:
        return Text("lacks nothing", style="green")

    def names(kind: str) -> str:
        shown = r["lacks"][kind]
        more = len(shown) - _SHOWN
        return ", ".join(shown[:_SHOWN]) + (f" and {more} more" if more > 0 else "")

    lacks = "; ".join(f"{label} {names(kind)}" for kind, label in _LACKS if kind in r["lacks"])
    return Text(f"lacks {lacks}\nfix: {r['fix']}", style="bold red")


def rebalance_table(doc: Doc) -> Any:
    # lazy: rich
    from rich.console import Group
    from rich.text import Text

    t = _table("BROKER SET", "MASTER", "PREFERRED", "ACTION", "REASON")
    for m in doc["moves"]:
        action = Text(
            m["action"],
            style="bold green" if m["action"] == "move" else "yellow" if m["action"] == "skip" else "",
        )
        t.add_row(m["brokerName"], _v(m["masterBrokerId"]), _v(m["preferredBrokerId"]), action, m["reason"])
    return Group(t, Text(doc["message"]))


_VERDICT_STYLE = {"OK": "bold green", "WARN": "bold yellow", "CRIT": "bold red"}


def health_table(doc: Doc) -> Any:
    """`mqctl health`: the worst verdict in one line first, then one row per check (and the doctor's)."""
    # lazy: rich
    from rich.console import Group
    from rich.text import Text

    verdict, rest = doc["summary"].split(": ", 1)
    head = Text()
    head.append(verdict, style=_VERDICT_STYLE[verdict])
    head.append(f": {rest}")
    checks = _table("CHECK", "VERDICT", "MASTER", "MASTER EPOCH", "SYNC STATE SET", "ALIVE", "REASONS")
    for c in doc["checks"]:
        if c["kind"] == "controller":
            master, epoch, sss, alive = f"leader {_v(c['leader'])}", f"term {_v(c['term'])}", "", ""
        else:
            master, epoch = _v(c["masterBrokerId"]), _v(c["masterEpoch"])
            sss = ",".join(map(str, c["syncStateSet"])) or "-"
            alive = f"{c['replicasAlive']}/{c['replicas']}"
        checks.add_row(
            c["name"],
            Text(c["verdict"], style=_VERDICT_STYLE[c["verdict"]]),
            master,
            epoch,
            sss,
            alive,
            "\n".join(r.split(": ", 1)[1] for r in c["reasons"]),
        )
    parts: list[Any] = [head, checks]
    if "replicas" in doc:
        rep = _table(
            "SET",
            "ID",
            "ADDRESS",
            "CONTROLLER SAYS",
            "MASTER EPOCH",
            "ALIVE",
            "HEARTBEAT AGE",
            "REPORTED EPOCH",
            "REPORTED MAX OFFSET",
            "LAG",
            title="controller vs heartbeats",
        )
        for r in doc["replicas"]:
            role = r["controllerRole"] + (", in SyncStateSet" if r["inSyncStateSet"] else "")
            age = None if r["heartbeatAgeMs"] is None else f"{r['heartbeatAgeMs'] / 1000:.1f} s"
            rep.add_row(
                r["brokerName"],
                str(r["brokerId"]),
                r["brokerAddress"],
                role,
                str(r["masterEpoch"]),
                _yes_no(r["alive"]),
                _v(age),
                _v(r["reportedEpoch"]),
                _v(r["reportedMaxOffset"]),
                _v(r["lagBytes"]),
            )
        parts.append(rep)
    for name, drift in (doc.get("metadata") or {}).items():
        if "error" in drift:
            parts.append(Text(f"metadata of {name} not compared: {drift['error']}", style="yellow"))
    if "findings" in doc:
        if not doc["findings"]:
            parts.append(Text("doctor: nothing found"))
        for f in doc["findings"]:
            line = Text()
            line.append(f["verdict"], style=_VERDICT_STYLE[f["verdict"]])
            line.append(f" {f['brokerName']}: {f['finding']}\n  fix: {f['fix']}")
            parts.append(line)
    return Group(*parts)
