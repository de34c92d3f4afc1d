"""The event kernel: processes (generators) that sleep until a cycle or wait for a :class:`_Future`."""

from __future__ import annotations

import heapq

#: the slack of the ``shared`` memory model's fractional cycles
_EPS = 1e-7


class _Future:
    """A cycle some process will know later; processes ``yield`` it to wait for it."""
    __slots__ = ("value", "waiters")

    def __init__(self):
        self.value = None
        self.waiters = []


class _Kernel:
    """Discrete events. A process is a generator that yields a time (sleep until then) or a
    :class:`_Future` (wait until it is resolved); plain callables can be scheduled too."""

    def __init__(self):
        self.now = 0
        self._heap = []
        self._seq = 0

    def spawn(self, proc, at=None):
        self._push(self.now if at is None else at, proc)

    def call_at(self, t, fn):
        self._push(t, fn)

    def _push(self, t, proc):
        heapq.heappush(self._heap, (t, self._seq, proc))
        self._seq += 1

    def next_at(self) -> float:
        """The time of the next event scheduled (infinity if none)."""
        return self._heap[0][0] if self._heap else float("inf")

    def resolve(self, fut: _Future, value):
        fut.value = value
        for proc in fut.waiters:
            self._push(self.now, proc)
        fut.waiters = None

    def run(self):
        heap = self._heap
        while heap:
            t, _, proc = heapq.heappop(heap)
            if t > self.now:
                self.now = t
            if callable(proc):
                proc()
            else:
                self._step(proc)

    def _step(self, proc):
        heap = self._heap
        while True:
            try:
                req = next(proc)
            except StopIteration:
                return
            if type(req) is _Future:
                if req.value is None:
                    req.waiters.append(proc)
                    return
            elif req > self.now:
                if heap and heap[0][0] <= req:
                    self._push(req, proc)
                    return
                # nothing else happens before ``req``: the heap would hand this process back next, so it runs on
                self.now = req
