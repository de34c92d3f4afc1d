"""A line of text out of a UART: constant text and 32-bit numbers in decimal, 8 data bits, no parity, one stop bit."""

from amaranth import Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["UartTx", "LinePrinter"]


class UartTx(wiring.Component):
    """Sends ``data`` when ``valid`` and ``ready``: a start bit, 8 bits LSB first, a stop bit, each ``divisor``
    cycles long (the clock over the baud rate). ``tx`` idles high."""

    def __init__(self, divisor: int):
        if divisor < 2:
            raise ValueError(f"a UART bit must take at least 2 cycles, not {divisor}")
        self._divisor = divisor
        super().__init__({"valid": In(1), "data": In(8), "ready": Out(1), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        bits = Signal(10, init=0x3FF)            # stop, 8 data, start — shifted out from bit 0
        left = Signal(range(11))                 # bits still to send
        timer = Signal(range(self._divisor))
        m.d.comb += [self.ready.eq(left == 0), self.tx.eq(bits[0])]
        with m.If(left == 0):
            with m.If(self.valid):
                m.d.sync += [bits.eq(Value.cast(self.data) << 1 | 1 << 9), left.eq(10), timer.eq(self._divisor - 1)]
        with m.Elif(timer == 0):
            m.d.sync += [bits.eq(bits >> 1 | 1 << 9), left.eq(left - 1), timer.eq(self._divisor - 1)]
        with m.Else():
            m.d.sync += timer.eq(timer - 1)
        return m


class LinePrinter(wiring.Component):
    """On ``start``, sends ``items`` — constant strings, ``(condition, text, other)`` (``text`` where the condition
    holds, else ``other``, of the same length) and 32-bit values, each value in decimal without leading zeros —
    over :class:`UartTx`; ``busy`` until the last character has gone. The values are sampled as their turn comes
    (hold them while ``busy``)."""

    def __init__(self, items: list, divisor: int):
        self._items = items
        self._divisor = divisor
        super().__init__({"start": In(1), "busy": Out(1), "tx": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart = uart = UartTx(self._divisor)
        m.d.comb += self.tx.eq(uart.tx)
        # the items as a program: a character, or "print value n"
        program = []
        for item in self._items:
            if isinstance(item, str):
                program += [("char", Const(ord(c), 8)) for c in item]
            elif isinstance(item, tuple):
                condition, text, other = item
                if len(text) != len(other):
                    raise ValueError(f"{text!r} and {other!r} must be of one length")
                program += [("char", Mux(condition, ord(a), ord(b))) for a, b in zip(text, other, strict=True)]
            else:
                program.append(("value", item))
        pc = Signal(range(len(program) + 1), init=len(program))
        value = Signal(32)                       # what is left of the value being printed
        digit = Signal(4)
        power = Signal(range(10))                # 10 ** (9 - power) is the digit's weight
        shown = Signal()                         # a digit other than a leading zero has been sent
        powers = [10 ** (9 - k) for k in range(10)]
        weight = Signal(32)
        with m.Switch(power):
            for k, p in enumerate(powers):
                with m.Case(k):
                    m.d.comb += weight.eq(p)
        m.d.comb += self.busy.eq(pc != len(program))
        with m.FSM():
            with m.State("idle"):
                m.d.sync += pc.eq(len(program))
                with m.If(self.start):
                    m.d.sync += pc.eq(0)
                    m.next = "item"
            with m.State("item"):
                with m.If(pc == len(program)):
                    m.next = "idle"
                with m.Switch(pc):
                    for n, (kind, what) in enumerate(program):
                        with m.Case(n):
                            if kind == "char":
                                m.d.comb += [uart.valid.eq(1), uart.data.eq(what)]
                                with m.If(uart.ready):
                                    m.d.sync += pc.eq(pc + 1)
                            else:
                                m.d.sync += [value.eq(what), power.eq(0), digit.eq(0), shown.eq(0)]
                                m.next = "divide"
            with m.State("divide"):                # the digit of this power: subtract its weight while it fits
                with m.If(value >= weight):
                    m.d.sync += [value.eq(value - weight), digit.eq(digit + 1)]
                with m.Else():
                    m.next = "digit"
            with m.State("digit"):
                with m.If((digit == 0) & ~shown & (power != 9)):
                    m.d.sync += power.eq(power + 1)
                    m.next = "divide"
                with m.Else():
                    m.d.comb += [uart.valid.eq(1), uart.data.eq(ord("0") + digit)]
                    with m.If(uart.ready):
                        m.d.sync += [shown.eq(1), digit.eq(0)]
                        with m.If(power == 9):
                            m.d.sync += pc.eq(pc + 1)
                            m.next = "item"
                        with m.Else():
                            m.d.sync += power.eq(power + 1)
                            m.next = "divide"
        return m
