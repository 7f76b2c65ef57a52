"""Static memory planning for the cpu backend: every intermediate gets an offset in one arena.

Why: allocating a fresh array per intermediate (what an interpreter does)
touches far more memory than the computation needs, dirties pages and evicts
caches (seed 003). Since the whole schedule is known before the first call,
memory is *planned*, not garbage-collected (DESIGN.md): liveness analysis
says when each tensor is needed, and tensors whose lifetimes do not meet
share bytes of one arena allocated once per call (or once per computation).

Steps:

1. **Schedule** (schedule.py): the nodes in order (topological; lowering
   already turned other_deps into data flow), each node's storage kind
   (which get arena space, which are views of what) and the inputs its
   kernel may overwrite; the order is checked by `liveness.check_schedule`.
2. **Liveness** (`liveness.analyze_liveness`): for each node that owns
   storage, the first and last step it is live. Views own nothing and keep
   their root alive; results stay live to the end.
3. **In place**: a node may write its output over an input whose storage
   dies at this very step (``schedule.can_run_in_place`` agrees, same byte size, the
   input is no result, no other input of the node reads the same storage
   through a different view). The two then form one *storage* whose
   lifetime is the union of theirs.
4. **Offsets**: every storage gets an aligned offset so that no two storages
   live at a common step overlap. Several placement heuristics are tried and
   the smallest arena wins: offline *greedy-by-size with best-fit gaps*
   (biggest tensors first, each put in the tightest gap left between the
   already-placed tensors it coexists with; this is usually within a few
   percent of the lower bound) under a few orderings, and an online
   best-fit free-list allocator that walks the schedule. The result is
   checked exhaustively before it is returned.

``plan.arena_bytes`` can never be below ``plan.peak_live_bytes`` (the most
bytes live at any one step), which is reported as the lower bound to
compare against; ``plan.naive_bytes`` is what one allocation per
intermediate would cost.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...core.node import Node
from ...core.ops.leaves import Constant, Parameter
from ...errors import GraphError
from .liveness import Liveness, analyze_liveness
from .schedule import Schedule

CanRunInPlace = Callable[[Node, Node], bool]


class MemoryPlanError(GraphError):
    """A plan that breaks its own invariants (a planner bug) or impossible planning inputs."""


@dataclass
class Buffer:
    """Where one storage-owning node lives in the arena, and when.

    ``start``/``end`` are inclusive schedule steps. ``in_place_of`` is the
    input whose bytes this node overwrites (same ``offset``); that input's
    ``end`` is this node's ``start``, the one step they share.
    """

    node: Node
    offset: int
    nbytes: int
    start: int
    end: int
    in_place_of: Optional[Node] = None

    def live_at(self, step: int) -> bool:
        return self.start <= step <= self.end


@dataclass
class MemoryPlan:
    """The arena layout of one scheduled Function (see the module docstring).

    ``buffers`` has one entry per node that owns storage; ``views`` maps each
    view to its root (which may be a node without a buffer, such as a
    Parameter: then the view reads caller memory, not the arena).
    """

    arena_bytes: int
    naive_bytes: int
    buffers: Dict[Node, Buffer]
    views: Dict[Node, Node]
    peak_live_bytes: int
    alignment: int = 64
    schedule: Tuple[Node, ...] = ()
    #: Which placement heuristic produced the offsets.
    strategy: str = ""
    #: Display names as `print(function)` shows them (%0, %1, ... or user names).
    names: Dict[Node, str] = field(default_factory=dict, repr=False)

    # -- queries -----------------------------------------------------------------------
    @property
    def ratio(self) -> float:
        """arena / naive: how much of one-array-per-intermediate the arena costs."""
        return self.arena_bytes / self.naive_bytes if self.naive_bytes else 0.0

    @property
    def num_steps(self) -> int:
        return len(self.schedule)

    def storage_of(self, node: Node) -> Optional[Buffer]:
        """The buffer holding `node`'s values: its own, its view root's, or None (not in arena)."""
        return self.buffers.get(self.views.get(node, node))

    def live_at(self, step: int) -> List[Buffer]:
        """Buffers live at `step`, by offset."""
        return sorted((b for b in self.buffers.values() if b.live_at(step)),
                      key=lambda b: b.offset)

    def name(self, node: Node) -> str:
        return self.names.get(node, node.name)

    def verify(self) -> None:
        """Raise MemoryPlanError unless the plan is sound; checks every pair of buffers.

        Sound means: offsets aligned, every buffer inside the arena, and no two
        buffers live at a common step share a byte, except a node and the input
        it overwrites in place (which share exactly their one common step).
        """
        items = list(self.buffers.values())
        for b in items:
            if b.offset % self.alignment:
                raise MemoryPlanError(f"memory plan: {self.name(b.node)} at offset {b.offset} "
                                      f"is not aligned to {self.alignment}")
            if b.offset < 0 or b.offset + b.nbytes > self.arena_bytes or b.start > b.end:
                raise MemoryPlanError(f"memory plan: {self.name(b.node)} "
                                      f"[{b.offset}, {b.offset + b.nbytes}) steps "
                                      f"{b.start}..{b.end} does not fit arena "
                                      f"{self.arena_bytes}")
        n = len(items)
        if n < 2:
            return
        offset = np.array([b.offset for b in items], dtype=np.int64)
        top = offset + np.array([b.nbytes for b in items], dtype=np.int64)
        start = np.array([b.start for b in items], dtype=np.int64)
        end = np.array([b.end for b in items], dtype=np.int64)
        nonempty = top > offset
        for i, b in enumerate(items):
            clash = ((start[i + 1:] <= end[i]) & (start[i] <= end[i + 1:])
                     & (offset[i + 1:] < top[i]) & (offset[i] < top[i + 1:])
                     & nonempty[i + 1:] & nonempty[i])
            for j in np.nonzero(clash)[0] + i + 1:
                other = items[j]
                if _in_place_pair(b, other) or _in_place_pair(other, b):
                    continue
                raise MemoryPlanError(
                    f"memory plan: {self.name(b.node)} [{b.offset}, {b.offset + b.nbytes}) steps "
                    f"{b.start}..{b.end} overlaps {self.name(other.node)} "
                    f"[{other.offset}, {other.offset + other.nbytes}) steps "
                    f"{other.start}..{other.end}")

    # -- reports -----------------------------------------------------------------------
    def table(self) -> str:
        """A readable report: totals, then one line per buffer by start step, then views."""
        lines = [f"memory plan: arena {_fmt_bytes(self.arena_bytes)}, naive "
                 f"{_fmt_bytes(self.naive_bytes)} (ratio {self.ratio:.2f}), peak live "
                 f"{_fmt_bytes(self.peak_live_bytes)}, {len(self.buffers)} buffers, "
                 f"{len(self.views)} views, alignment {self.alignment}, {self.strategy}"]
        header = ("node", "op", "type", "offset", "bytes", "steps", "in place of")
        rows = []
        for b in sorted(self.buffers.values(), key=lambda b: (b.start, b.offset)):
            rows.append((self.name(b.node), b.node.op, b.node.type_str(), str(b.offset),
                         str(b.nbytes), f"{b.start}..{b.end}",
                         self.name(b.in_place_of) if b.in_place_of is not None else ""))
        widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(header)]
        numeric = {3, 4}

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.rjust(w) if k in numeric else c.ljust(w)
                             for k, (c, w) in enumerate(zip(cells, widths))).rstrip()

        lines.append(line(header))
        lines.extend(line(r) for r in rows)
        if self.views:
            lines.append("views: " + ", ".join(
                f"{self.name(v)} -> {self.name(r)}" +
                ("" if r in self.buffers else f" ({r.op}, not in arena)")
                for v, r in self.views.items()))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready summary (names as in `print(function)`)."""
        return {
            "arena_bytes": self.arena_bytes,
            "naive_bytes": self.naive_bytes,
            "peak_live_bytes": self.peak_live_bytes,
            "alignment": self.alignment,
            "num_steps": self.num_steps,
            "strategy": self.strategy,
            "buffers": [
                {"name": self.name(b.node), "op": b.node.op, "type": b.node.type_str(),
                 "offset": b.offset, "nbytes": b.nbytes, "start": b.start, "end": b.end,
                 "in_place_of": None if b.in_place_of is None else self.name(b.in_place_of)}
                for b in sorted(self.buffers.values(), key=lambda b: (b.start, b.offset))],
            "views": {self.name(v): self.name(r) for v, r in self.views.items()},
        }


def _in_place_pair(writer: Buffer, overwritten: Buffer) -> bool:
    """`writer` runs in place of `overwritten`: same bytes, touching only at writer's step."""
    return (writer.in_place_of is overwritten.node and writer.offset == overwritten.offset
            and overwritten.end == writer.start)


def _fmt_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 ** 2:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 ** 2:.2f} MiB"


def _round_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


# -- storages: in-place chains of buffers that share one block ---------------------------

@dataclass
class _Storage:
    """One block of the arena: an owner, then the nodes that ran in place over it in turn."""

    size: int      # padded to the alignment
    nbytes: int    # largest member's real size
    start: int
    end: int


def _node_nbytes(node: Node, shapes: Mapping[Node, Tuple[int, ...]]) -> int:
    """Bytes of `node`'s value: concrete shape from `shapes` (static shapes may be omitted)."""
    shape = shapes.get(node)
    if shape is None:
        if not node.shape.is_static:
            raise MemoryPlanError(f"memory plan: no concrete shape given for {node.op} "
                                  f"{node.name} {node.type_str()}", node.location)
        shape = tuple(node.shape)
    return math.prod(int(d) for d in shape) * node.element_type.dtype.itemsize


def _choose_in_place(node: Node, liveness: Liveness, nbytes: Dict[Node, int],
                     can_run_in_place: CanRunInPlace) -> Optional[Node]:
    """The input `node` may overwrite, or None.

    The input must own its storage, die at this step (no later reader, of
    it or of a view of it), not be pinned (a result, or viewed by one), be
    exactly as large, and be read by `node` only directly: another input
    that is a *different* view of the same storage would be read after being
    overwritten (Add(x, Transpose(x)) must not run over x).
    """
    at = liveness.step[node]
    for candidate in dict.fromkeys(node.inputs):
        if candidate not in nbytes or candidate in liveness.pinned:
            continue
        if isinstance(candidate, (Parameter, Constant)):   # caller's or shared data: read-only
            continue
        if liveness.end[candidate] != at or nbytes[candidate] != nbytes[node]:
            continue
        if any(other is not candidate and liveness.storage_root(other) is candidate
               for other in node.inputs):
            continue
        if can_run_in_place(node, candidate):
            return candidate
    return None


# -- placement heuristics -------------------------------------------------------------

def _greedy_by_size(storages: Sequence[_Storage], order: Sequence[int]) -> List[int]:
    """Place storages in `order`; each goes into the tightest gap it fits among placed ones.

    Only placed storages that coexist in time constrain a new one. Their
    intervals are swept by offset: the gaps between the running maximum of
    their tops and the next offset are the holes; the smallest hole that
    fits wins (best fit), else the storage goes on top of them.
    """
    n = len(storages)
    offsets = [0] * n
    p_start = np.empty(n, dtype=np.int64)
    p_end = np.empty(n, dtype=np.int64)
    p_off = np.empty(n, dtype=np.int64)
    p_top = np.empty(n, dtype=np.int64)
    k = 0
    for i in order:
        s = storages[i]
        if s.size == 0:
            continue
        mask = (p_start[:k] <= s.end) & (p_end[:k] >= s.start)
        idx = np.nonzero(mask)[0]
        offset = 0
        if idx.size:
            by_offset = idx[np.argsort(p_off[idx], kind="stable")]
            offs = p_off[by_offset]
            tops = np.maximum.accumulate(p_top[by_offset])
            floors = np.concatenate(([0], tops[:-1]))
            gaps = offs - floors
            fits = np.nonzero(gaps >= s.size)[0]
            if fits.size:
                best = fits[np.argmin(gaps[fits])]
                offset = int(floors[best])
            else:
                offset = int(tops[-1])
        offsets[i] = offset
        p_start[k], p_end[k], p_off[k], p_top[k] = s.start, s.end, offset, offset + s.size
        k += 1
    return offsets


def _online_best_fit(storages: Sequence[_Storage], num_steps: int) -> List[int]:
    """Walk the schedule like a malloc that knows nothing of the future: best-fit free list.

    At each step the storages starting there are allocated (while the inputs
    of that step are still held), then those ending there are freed, with
    neighbouring free blocks merged and a free block at the top given back.
    """
    offsets = [0] * len(storages)
    starting: Dict[int, List[int]] = {}
    ending: Dict[int, List[int]] = {}
    for i, s in enumerate(storages):
        if s.size:
            starting.setdefault(s.start, []).append(i)
            ending.setdefault(s.end, []).append(i)
    free: List[List[int]] = []  # [offset, size], sorted by offset, all below `top`
    top = 0
    for step in range(num_steps):
        for i in sorted(starting.get(step, ()), key=lambda i: -storages[i].size):
            need = storages[i].size
            best = None
            for j, (_, size) in enumerate(free):
                if size >= need and (best is None or size < free[best][1]):
                    best = j
            if best is not None:
                offsets[i] = free[best][0]
                free[best][0] += need
                free[best][1] -= need
                if free[best][1] == 0:
                    del free[best]
            elif free and free[-1][0] + free[-1][1] == top:
                offsets[i] = free[-1][0]
                top = offsets[i] + need
                del free[-1]
            else:
                offsets[i] = top
                top += need
        for i in ending.get(step, ()):
            block = [offsets[i], storages[i].size]
            j = 0
            while j < len(free) and free[j][0] < block[0]:
                j += 1
            free.insert(j, block)
            if j + 1 < len(free) and free[j][0] + free[j][1] == free[j + 1][0]:
                free[j][1] += free[j + 1][1]
                del free[j + 1]
            if j > 0 and free[j - 1][0] + free[j - 1][1] == free[j][0]:
                free[j - 1][1] += free[j][1]
                del free[j]
                j -= 1
            if free and free[-1][0] + free[-1][1] == top:
                top = free[-1][0]
                del free[-1]
    return offsets


def _arena(storages: Sequence[_Storage], offsets: Sequence[int]) -> int:
    return max((o + s.size for o, s in zip(offsets, storages)), default=0)


def _place(storages: Sequence[_Storage], num_steps: int) -> Tuple[List[int], str]:
    """The smallest arena among the heuristics (ties: the first listed)."""
    idx = range(len(storages))
    duration = [s.end - s.start + 1 for s in storages]
    candidates = [
        ("greedy-by-size best-fit",
         lambda: _greedy_by_size(storages, sorted(idx, key=lambda i: (-storages[i].size,
                                                                      -duration[i], i)))),
        ("greedy-by-area best-fit",
         lambda: _greedy_by_size(storages, sorted(idx, key=lambda i: (
             -storages[i].size * duration[i], -storages[i].size, i)))),
        ("greedy-by-duration best-fit",
         lambda: _greedy_by_size(storages, sorted(idx, key=lambda i: (-duration[i],
                                                                      -storages[i].size, i)))),
        ("online best-fit", lambda: _online_best_fit(storages, num_steps)),
    ]
    best: Optional[Tuple[int, List[int], str]] = None
    for label, run in candidates:
        offsets = run()
        size = _arena(storages, offsets)
        if best is None or size < best[0]:
            best = (size, offsets, label)
    assert best is not None
    return best[1], best[2]


# -- the entry point ------------------------------------------------------------------

def plan_memory(schedule: Schedule, alignment: int = 64) -> MemoryPlan:
    """Assign every storage-owning node of `schedule` an offset in one arena.

    `schedule.shapes[node]` is the node's concrete shape (static shapes may be
    left out); `schedule.needs_buffer(node)` says whether the node gets arena
    space; `schedule.alias_of(node)` names the node whose storage a view
    reads, or None; `schedule.can_run_in_place(node, input)` says the op may
    write its output over that input. Offsets are multiples
    of `alignment` and each buffer's block is padded to it; the plan is
    verified (no two simultaneously live buffers overlap) before it is
    returned.
    """
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment < 1:
        raise MemoryPlanError(f"memory plan: alignment must be a positive int, not {alignment!r}")
    order = tuple(schedule.nodes)  # checked by analyze_liveness
    liveness = analyze_liveness(schedule)
    nbytes = {n: _node_nbytes(n, schedule.shapes) for n in liveness.owners}

    # In place: fold each writer into the storage of the input it overwrites.
    storage_of: Dict[Node, int] = {}
    storages: List[_Storage] = []
    in_place_of: Dict[Node, Node] = {}
    for node in liveness.owners:
        target = _choose_in_place(node, liveness, nbytes, schedule.can_run_in_place)
        if target is not None:
            k = storage_of[target]
            storages[k].end = liveness.end[node]
            in_place_of[node] = target
            storage_of[node] = k
        else:
            storage_of[node] = len(storages)
            storages.append(_Storage(size=_round_up(nbytes[node], alignment),
                                     nbytes=nbytes[node], start=liveness.start[node],
                                     end=liveness.end[node]))

    offsets, strategy = _place(storages, len(order))

    buffers = {n: Buffer(node=n, offset=offsets[storage_of[n]], nbytes=nbytes[n],
                         start=liveness.start[n], end=liveness.end[n],
                         in_place_of=in_place_of.get(n))
               for n in liveness.owners}
    live = np.zeros(len(order) + 1, dtype=np.int64)
    for s in storages:
        live[s.start] += s.nbytes
        live[s.end + 1] -= s.nbytes
    plan = MemoryPlan(
        arena_bytes=_arena(storages, offsets),
        naive_bytes=sum(nbytes.values()),
        buffers=buffers,
        views=dict(liveness.root),
        peak_live_bytes=int(np.cumsum(live).max()) if len(order) else 0,
        alignment=alignment,
        schedule=order,
        strategy=strategy,
        names=dict(schedule.names),
    )
    plan.verify()
    return plan


__all__ = ["Buffer", "MemoryPlan", "MemoryPlanError", "plan_memory"]
