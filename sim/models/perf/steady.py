"""Steady state: a long run's answer from a short one, the same answer.

Once the pipeline has filled, a run's schedule repeats: every item of step n + m starts, fills, issues, sends each
group's words and has its writes granted P cycles after the same item of step n. :func:`extrapolate` simulates a
probe of the run — a few tens of steps, with the run's own last steps at its end (:func:`probe`; twice as long
while none shows a period) — and looks for the first step a and the shortest period m (a multiple of the steps'
rotation over the subsets) at which every recorded cycle of every item repeats P cycles later over four periods
(a repetition found, then two more periods confirming it), all at least :func:`margin` steps before the probe's
last. A probe of as many steps as the run modulo m is simulated (the same probe where it already is), the periods
checked again in it, and the run is that probe with k periods inserted after step a + m: the items of the steps
past them k·P cycles later, the inserted steps' items copies of steps a + m … a + 2m − 1, each period P later.

What repeats is the record, not the processes' state (``pipeline._Run``, the memory, the ring are never
compared): each item's start, half full, last MAC, last word and last write's grant, each output group's entry
into the queue and its last word, each ring word's write and read on every link it crosses. Every process and every
engine reads back at most an item or a FIFO's depth of words of them, so a state that did not repeat would have to
leave every one of them the same for three periods running. tests/test_steady.py checks the answer on random points:
extrapolated and fully simulated, every field of the :class:`Prediction` the same.

Used where each subset's items come step by step (:func:`applies`) and the memory is the ``shared`` model (the
word-level memories see addresses, which move from step to step); elsewhere, or where no period shows, the run is
simulated whole, as ``RNNPIPE_STEADY=0`` (or ``predict(..., steady=False)``) always has it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from hdl import placement

from .lap import _Lap
from .ring import _Link

__all__ = ["STEADY_ENV", "Outcome", "enabled", "applies", "rotation", "probe", "extrapolate", "extrapolated"]

#: the environment variable that turns extrapolation off (``0``)
STEADY_ENV = "RNNPIPE_STEADY"
#: the probes: the first holds ``FILL`` steps, four periods of the steps' rotation over the subsets and the margin;
#: each next one is twice as long, up to ``PROBES`` of them
FILL, PROBES = 8, 3
#: periods tried, in rotations
MAX_PERIOD = 8
#: the runs extrapolated so far in this process (tests read it, to know the check was not vacuous)
extrapolated = 0


def enabled(steady: bool) -> bool:
    """Whether to extrapolate: asked for (``predict``'s ``steady``) and not turned off (``RNNPIPE_STEADY=0``)."""
    return steady and os.environ.get(STEADY_ENV, "1") != "0"


def applies(*, baseline: bool, layers: int, blocks: int, groups: int) -> bool:
    """Whether a run's items come step by step in every subset: a baseline's, a stack's, or a partition's of G groups
    with one group of column blocks (J ≤ G: ``hdl.order.subset_items``)."""
    return baseline or layers > 1 or blocks <= groups


def rotation(*, baseline: bool, layers: int, groups: int) -> int:
    """The steps a subset's items come round in: every step's in a baseline or a stack, every G-th in a partition."""
    return 1 if baseline or layers > 1 else groups


def probe(subsets: int, rotation: int) -> int:
    """The first probe's steps: the fill, four periods of the rotation and the margin."""
    return FILL + 4 * rotation + margin(subsets)


def margin(subsets: int) -> int:
    """The steps at a probe's end left out of the search: the last steps' own work (no ring words, the final
    state) reaches back while their items overlap the steps before, about a lap of the subsets."""
    return subsets + 2


@dataclass
class Outcome:
    """What a simulated run reports of its items: per subset, in the order it runs them, ``(step, column block,
    rounds, begin, end, written)`` (``written``: the grant of its last memory write, -1 for none)."""
    items: list

    @staticmethod
    def of(run) -> Outcome:
        return Outcome([[(it.step, it.column_block, len(it.rows), sub.begin[n], sub.end[n], sub.written[n].value)
                         for n, it in enumerate(sub.items)] for sub in run.subsets])

    def last(self) -> int:
        """The run's last event: its last output word or its last write's grant (``pipeline._Run.run``)."""
        return max(max(items[-1][4], max(it[5] for it in items)) for items in self.items if items)


def _signatures(run) -> dict[int, tuple]:
    """Per step: the items of every subset that run it (subset, column block, groups, whether it wrote) and every
    cycle recorded of them — start, half full, last MAC, last word, last write's grant (a write that never was: the
    start again), each group's entry into the output queue and its last word, each ring word's write and read on
    each link it crosses — as (keys, reference cycle, the cycles less the reference); empty where an item's groups
    differ from its subset's first or a cycle is not a whole number."""
    keys, chunks = {}, {}
    log = getattr(getattr(run, "lap", None), "log", None)          # round the ring: each item's words, as they went
    logged = set()
    for s, sub in enumerate(run.subsets):
        q = ring = 0
        groups = len(sub.items[0].rows) * run.W if sub.items else 0
        link = run.links[s] if isinstance(run.links[s], _Link) else None     # a link's words, each written and read
        for n, it in enumerate(sub.items):
            g = len(it.rows) * run.W
            if g != groups:
                return {}
            written, begin = sub.written[n].value, sub.begin[n]
            k, c = keys.setdefault(it.step, []), chunks.setdefault(it.step, [])
            k.append((s, it.column_block, g, written >= 0))
            c.append([begin, sub.filled[n].value, sub.done[n].value, sub.end[n], written if written >= 0 else begin,
                      *(f.value for f in sub.outq[q:q + g]), *(f.value for f in sub.gd[q:q + g])])
            q += g
            if it.ring and link is not None:
                words = slice(ring * link.words_per_item, (ring + 1) * link.words_per_item)
                c += (link.w[words], link.r[words])
                ring += 1
            if log is not None and it.to_ring:
                key = n if isinstance(run.lap, _Lap) else (placement.group_of(run.cfg, s, run.partition), n)
                if key not in logged:
                    logged.add(key)
                    words = np.array(log[key]).reshape(-1, 3)
                    k.append(words[:, 0].tobytes())
                    c.append(words[:, 1:].ravel())
    out = {}
    for step, parts in chunks.items():
        times = np.concatenate([np.asarray(part) for part in parts])
        if times.dtype.kind != "i":
            return {}
        ref = int(times[0])
        out[step] = (tuple(keys[step]), ref, (times - ref).tobytes())
    return out


def _period(sig: dict, first: int, last: int, rotation: int) -> tuple[int, int, int] | None:
    """(a, m, P): the first step a ≥ ``first`` and the shortest period m (a multiple of ``rotation``) whose four
    periods from a, all before step ``last``, repeat each P cycles after the one before."""
    for a in range(first, last):
        for m in range(rotation, rotation * MAX_PERIOD + 1, rotation):
            if a + 4 * m > last:
                break
            if _repeats(sig, a, m):
                return a, m, sig[a + m][1] - sig[a][1]
    return None


def _repeats(sig: dict, a: int, m: int) -> bool:
    P = sig[a + m][1] - sig[a][1]
    if P <= 0:
        return False
    for n in range(a, a + 3 * m):
        s0, s1 = sig.get(n), sig.get(n + m)
        if s0 is None or s1 is None or s0[0] != s1[0] or s0[2] != s1[2] or s1[1] - s0[1] != P:
            return False
    return True


def extrapolate(simulate, steps: int, subsets: int, rotation: int) -> Outcome | None:
    """The outcome of a run of ``steps`` steps from shorter ones: ``simulate(n, record=True)`` simulates the run with n
    steps, its ring's words logged, and returns its finished ``pipeline._Run``; ``subsets`` the build's S;
    ``rotation`` the steps a subset's items come round in (:func:`rotation`: the period is a multiple). None where it
    cannot be shown exactly: the caller simulates the run whole."""
    global extrapolated
    n, last = probe(subsets, rotation), margin(subsets)
    for _ in range(PROBES):
        n += (steps - n) % rotation                      # as many steps as the run, modulo the rotation
        if n >= steps:
            return None
        run = simulate(n, record=True)
        sig = _signatures(run)
        found = _period(sig, 1, n - last + 1, rotation) if sig else None
        if found is None:
            n *= 2
            continue
        a, m, P = found
        short = n + (steps - n) % m
        if short != n:
            run = simulate(short, record=True)
            sig = _signatures(run)
            if not sig or not _repeats(sig, a, m) or sig[a + m][1] - sig[a][1] != P:
                return None
        extrapolated += 1
        return _insert(Outcome.of(run), a + m, m, P, (steps - short) // m)
    return None


def _insert(short: Outcome, b: int, m: int, P: int, k: int) -> Outcome:
    """``short`` with k periods of m steps inserted at step b: step n ≥ b of the long run is step n − i·m of the
    short one, i = min((n − b) // m, k), i·P cycles later (written: -1 stays -1)."""
    out = []
    for items in short.items:
        by_step = {}
        for it in items:
            by_step.setdefault(it[0], []).append(it)
        last = max(by_step, default=0)
        long = []
        for n in range(1, last + k * m + 1):
            i = 0 if n < b else min((n - b) // m, k)
            for _, j, g, begin, end, written in by_step.get(n - i * m, ()):
                d = i * P
                long.append((n, j, g, begin + d, end + d, written + d if written >= 0 else -1))
        out.append(long)
    return Outcome(out)
