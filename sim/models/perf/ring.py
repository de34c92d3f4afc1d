"""The ring of a run in S groups (G = S): one link into each subset, word by word (:class:`_Link`), and what
the receiver's fill opens on it (:class:`_Opening`)."""

from __future__ import annotations

from bisect import bisect_left

from .kernel import _Future, _Kernel


class _Opening:
    """The receiver fills one ring item from cycle ``at``; memory responses of the same fill take its
    buffer port first: in word-level memory the responses of ``request`` (after ``tiles`` A-tile words,
    which do not go to the buffer), ``latency`` after their grants; else the cycles [first, end)."""
    __slots__ = ("at", "request", "tiles", "latency", "first", "end")

    def __init__(self, at, request=None, tiles=0, latency=0, first=0, end=0):
        self.at, self.request, self.tiles, self.latency, self.first, self.end = at, request, tiles, latency, first, end


class _Link:
    """One ring link: a ``SyncFIFOBuffered`` of ``depth`` words from a producer's serializer into the
    next subset's fill side, word by word.

    For word i: ``w`` the cycle it is written, ``m`` the cycle it moves from the inner memory to the
    output register (``max(w + 1, r of word i-1)``), ``r`` the cycle the receiver takes it (from m + 1,
    while it fills the word's item and no memory response has its buffer port). The writer waits while
    the inner memory holds ``depth - 1`` words: word i goes in no earlier than ``m[i - depth + 1] + 1``.
    """

    def __init__(self, kernel: _Kernel, memory, depth: int, words_per_item: int):
        self._k = kernel
        self._mem = memory
        self._depth = depth
        self._per_item = self.words_per_item = words_per_item
        self.w, self.r = [], []
        self._open = []
        self._opened, self._received = [], []
        self._progress = None       # set while reads wait for the memory to settle a cycle

    def _future(self, futures, item):
        while len(futures) <= item:
            futures.append(_Future())
        return futures[item]

    def open(self, item: int, opening: _Opening):
        assert item == len(self._open)
        self._open.append(opening)
        self._k.resolve(self._future(self._opened, item), opening.at)
        self._advance()

    def received(self, item: int) -> _Future:
        """Resolves to the cycle the receiver took the item's last word."""
        return self._future(self._received, item)

    def _advance(self):
        w, r, per = self.w, self.r, self._per_item
        j = len(r)
        while j < len(w):
            item = j // per
            if item >= len(self._open):
                return
            op = self._open[item]
            x = max(w[j] + 1, r[j - 1] if j else 0) + 1
            if x < op.at:
                x = op.at
            rq = op.request
            if rq is None:
                if op.first <= x < op.end:
                    x = op.end
            else:
                grants, lat = rq.grants, op.latency
                while True:
                    y = x - lat                 # a response in cycle x was granted in cycle y
                    if y < rq.start:
                        break
                    if rq.done.value is None and y > self._mem.arbitrated:
                        self._wait(y)
                        return
                    at = bisect_left(grants, y, op.tiles)
                    if at < len(grants) and grants[at] == y:
                        x += 1
                    else:
                        break
            r.append(x)
            j += 1
            if j % per == 0:
                self._k.resolve(self._future(self._received, item), x)

    def _wait(self, cycle):
        if self._progress is None:
            self._progress = _Future()
            self._k.call_at(cycle + 0.75, self._settled)

    def _settled(self):
        fut, self._progress = self._progress, None
        self._advance()
        self._k.resolve(fut, self._k.now)

    def push_run(self, start: int, words: int):
        """Write ``words`` words, each no earlier than the cycle after the previous one went in (the
        first no earlier than ``start``); returns (via ``yield from``) the cycle the last went in.

        The common case — the FIFO drained, the receiver filling this item with its buffer port free —
        is worked out at once: the words go in a cycle apart and are read two cycles later."""
        w, r, per = self.w, self.r, self._per_item
        i = len(w)
        item = i // per
        if (self._depth >= 3 and len(r) == i and (not r or r[-1] <= start) and item < len(self._open)
                and (i + words - 1) // per == item and self._free(self._open[item], start, words)):
            w.extend(range(start, start + words))
            r.extend(range(start + 2, start + words + 2))
            if len(r) % per == 0:
                self._k.resolve(self._future(self._received, item), r[-1])
            return start + words - 1
        last = start - 1
        for _ in range(words):
            last = yield from self.push(last + 1)
        return last

    def _free(self, op: _Opening, start: int, words: int) -> bool:
        """The receiver takes a word in each cycle start + 2 … start + words + 1."""
        first, end = start + 2, start + words + 2
        if op.at > first:
            return False
        rq = op.request
        if rq is None:
            return op.end <= first or op.first >= end
        if rq.done.value is None:
            return False
        grants, lat = rq.grants, op.latency
        at = bisect_left(grants, first - lat, op.tiles)
        return at == len(grants) or grants[at] >= end - lat

    def push(self, start: int):
        """Write the next word no earlier than ``start``; returns (via ``yield from``) the cycle written."""
        w, r = self.w, self.r
        i = len(w)
        j = i - self._depth + 1          # the word that must have left the inner memory
        if j >= 0:
            if j >= 1:
                while len(r) < j:
                    item = (j - 1) // self._per_item
                    if item >= len(self._open):
                        yield self._future(self._opened, item)
                    else:
                        yield self._progress
                    self._advance()
                m = max(w[j] + 1, r[j - 1])
            else:
                m = w[j] + 1
            if start < m + 1:
                start = m + 1
        w.append(start)
        self._advance()
        return start
