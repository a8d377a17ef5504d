"""The watchdog's report: who arrived, what every rank is doing, in rank-tagged lines.

Pure formatting of the states the watchdog gathers (see :mod:`.watchdog`); no MPI here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["describe_group", "format_report"]


def _same_call(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    if not a or not b or a.get("op") != b.get("op"):
        return False
    if a.get("group") is not None and b.get("group") is not None:
        return bool(a["group"] == b["group"])
    return bool(a.get("size") == b.get("size"))


def _arrived(state: Mapping[str, Any] | None, call: Mapping[str, Any] | None) -> bool:
    return state is not None and bool(state.get("inside")) and _same_call(state.get("call"),
                                                                           call)


def ranks_text(ranks: Sequence[int]) -> str:
    """``rank 3`` or ``ranks 0-2, 5``."""
    ordered = sorted(set(ranks))
    if not ordered:
        return "none"
    spans = []
    start = prev = ordered[0]
    for r in [*ordered[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        spans.append(str(start) if start == prev else
                     f"{start}, {prev}" if prev == start + 1 else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ("rank " if len(ordered) == 1 else "ranks ") + ", ".join(spans)


def describe_group(ranks: Sequence[int] | None, size: int | None, world_size: int) -> str:
    """``the world (ranks 0..3)``, ``the group [1, 2]`` or ``a group of 2 rank(s)``."""
    if ranks is None:
        return f"a group of {size if size is not None else '?'} rank(s)"
    if tuple(ranks) == tuple(range(world_size)):
        return f"the world (ranks 0..{world_size - 1})"
    return f"the group {list(ranks)}"


def _describe_call(call: Mapping[str, Any] | None, world_size: int) -> str:
    if not call:
        return "a blocking call"
    text = f"{call['op']} on {describe_group(call.get('group'), call.get('size'), world_size)}"
    if call.get("peer") is not None:
        text += f" with rank {call['peer']}"
    if call.get("debug"):
        text += " (MPIFLOW_DEBUG's check of the arguments)"
    return text


def _describe_state(state: Mapping[str, Any] | None, exit_info: Mapping[str, Any] | None,
                    world_size: int) -> tuple[str, float | None]:
    """A rank's state without times (so equal states group), and its seconds, if any."""
    if exit_info is not None:
        how = exit_info.get("how") or "its Python interpreter shut down"
        return f"has exited ({how})", exit_info.get("ago")
    if state is None:
        return ("did not answer (dead, busy in code that holds the GIL, or its watchdog is "
                "off)"), None
    if state.get("inside"):
        call = state.get("call")
        text = f"waiting in {_describe_call(call, world_size)}"
        if call and call.get("site"):
            text += f", called at {call['site']}"
        return text, state.get("waited")
    return f"not in an mpiflow call: running {state.get('where', 'unknown')}", None


def format_report(reason: str, rank: int, world_size: int, timeout: float,
                  states: Mapping[int, Mapping[str, Any] | None],
                  exited: Mapping[int, Mapping[str, Any]], *, asked: bool = True,
                  thread_level: str = "", skipped: Mapping[int, str] | None = None) -> str:
    """The watchdog's report, every line tagged with ``[rank N]``.

    Args:
        reason: ``"timeout"``, ``"exited"``, ``"interrupt"`` or ``"skipped"``.
        rank: the reporting rank (its state is ``states[rank]``).
        world_size: the number of ranks.
        timeout: the watchdog timeout in seconds.
        states: the answers by world rank (None: did not answer); ranks asked but missing
            are reported as not answering.
        exited: ranks known to have exited: ``{"how", "ago"}``.
        asked: False when the other ranks could not be asked (no MPI_THREAD_MULTIPLE).
        thread_level: the MPI thread level, for the explanation when ``asked`` is False.
        skipped: for ``"skipped"``, the ranks of the group that raised in a call on it before
            taking part, and what they raised.

    Returns:
        The report, ending with a newline.
    """
    me = states.get(rank) or {}
    call = me.get("call")
    what = _describe_call(call, world_size)
    waited = float(me.get("waited") or 0.0)
    lines = []
    if reason == "timeout":
        lines.append(f"mpiflow watchdog: {what} has not completed after {waited:.1f} s "
                     f"(MPIFLOW_TIMEOUT={timeout:g})")
    elif reason == "exited":
        lines.append(f"mpiflow watchdog: {what} has waited {waited:.1f} s on a rank that has "
                     f"exited")
    elif reason == "skipped":
        lines.append(f"mpiflow watchdog: {what} has waited {waited:.1f} s; the ranks are out "
                     f"of step on this group:")
        for src, text in sorted((skipped or {}).items()):
            lines.append(f"  rank {src}: its {text} before taking part, and the program "
                         f"caught that and went on, while this rank ran the call")
        lines.append("  Catch such an error only when every rank raises it; MPIFLOW_DEBUG=1 "
                     "makes every rank raise when some do.")
    else:
        lines.append(f"mpiflow watchdog: interrupted (Ctrl-C) after {waited:.1f} s in {what}")
    if call and call.get("site"):
        lines.append(f"  called at {call['site']} (through {call['api']})")
    members = list(call["group"]) if call and call.get("group") is not None else \
        list(range(world_size))
    if asked:
        arrived = [r for r in members if r not in exited and _arrived(states.get(r), call)]
        missing = [r for r in members if r not in arrived]
        lines.append(f"  arrived (waiting in the same call): {ranks_text(arrived)}")
        lines.append(f"  not arrived: {ranks_text(missing)}")
        lines.append("  every rank:")
        groups: dict[str, list[tuple[int, float | None]]] = {}
        for r in range(world_size):
            text, seconds = _describe_state(states.get(r), exited.get(r), world_size)
            groups.setdefault(text, []).append((r, seconds))
        for text, entries in groups.items():
            times = [s for _, s in entries if s is not None]
            when = ""
            if times:
                low, high = min(times), max(times)
                span = f"{low:.1f}" if high - low < 0.05 else f"{low:.1f}-{high:.1f}"
                when = f" ({span} s ago)" if text.startswith("has exited") else f" for {span} s"
            lines.append(f"    {ranks_text([r for r, _ in entries])}: {text}{when}")
        others = [states.get(r) for r in members if r not in arrived and r not in exited]
        if any(s is not None and s.get("inside") for s in others):
            lines.append("  Ranks wait in different calls: the program calls collectives in a "
                         "different order on different ranks. MPIFLOW_DEBUG=1 names the first "
                         "mismatch.")
        if any(s is not None and not s.get("inside") for s in others):
            lines.append("  A rank that is not in an mpiflow call skipped this call or is "
                         "still computing; if that legitimately takes longer, raise "
                         "MPIFLOW_TIMEOUT.")
    else:
        lines.append(f"  this rank only: the MPI library provides {thread_level or 'a thread'}"
                     f" level below MPI_THREAD_MULTIPLE, so the watchdog cannot ask the other "
                     f"ranks what they are doing.")
    lines.append("mpiflow: aborting the job (MPIFLOW_TIMEOUT sets the limit in seconds, 0 "
                 "turns the watchdog off)")
    return "".join(f"[rank {rank}] {line}\n" for line in lines)
