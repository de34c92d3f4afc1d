"""What quantizing costs: every layer's error against the float model, and the values the chosen scales clip."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .floats import FloatLayer, rnn_float
from .quantized import CELL_C_STEP, QMAX, QuantizedRNN


@dataclass(frozen=True)
class Error:
    """Float vs quantized hidden states of one layer, in real units (and in h steps: ``/ scales.h``)."""

    max_abs: float
    rms: float

    @classmethod
    def between(cls, value: np.ndarray, reference: np.ndarray) -> Error:
        """The error of ``value`` against ``reference`` (arrays of one shape)."""
        d = np.asarray(value, np.float64) - reference
        return cls(float(np.abs(d).max()), float(np.sqrt(np.mean(d * d))))


def quantization_error(q: QuantizedRNN, layers: list[FloatLayer], x: np.ndarray, h0: np.ndarray | None = None,
                       c0: np.ndarray | None = None) -> tuple[list[Error], bool]:
    """Every layer's error of the dequantized integer model against :func:`rnn_float`, over every step, both from
    the initial state ``h0`` (and an LSTM's ``c0``; None: zeros).

    Returns ``(errors, overflow)``, one :class:`Error` per layer and the golden model's overflow flag.
    """
    ref = rnn_float(layers, x, h0, c0)
    hs, overflow = q.run_golden(x, h0, c0)
    errors = []
    for k, (h, r) in enumerate(zip(hs, ref, strict=True)):
        errors.append(Error.between(q.dequantize_h(h, k), r))
    return errors, overflow


@dataclass(frozen=True)
class Clipped:
    """Values a scale cannot hold, clipped to what it can: ``name`` (``x``, ``h0``, ``c0``, ``weight_hh_l0``, …),
    ``count`` of ``total``, the magnitude ``bound`` the scale holds (``holds`` says whose), and ``rms``, what the
    clipping alone costs: the float model's top-layer h on the calibration run from the clipped values against it
    from the given ones (RMS over every step)."""

    name: str
    count: int
    total: int
    bound: float
    holds: str
    rms: float

    def describe(self, source: str) -> str:
        """One line, ``source`` naming where the values came from (``h0 from s.pt``)."""
        return (f"{source}: {100 * self.count / self.total:.1f} % of its values ({self.count:,} of {self.total:,}) lie "
                f"beyond ±{self.bound:.4g}, what {self.holds}, and are clipped: that costs RMS {self.rms:.4f} on the "
                f"calibration run (the float model from the clipped {self.name} against it from the given one)")


def _beyond(values: np.ndarray, scale: float, low: int = -QMAX, high: int = QMAX) -> tuple[int, np.ndarray]:
    """How many of ``values`` round beyond ``low``…``high`` steps of ``scale``, and the values clipped there."""
    steps = np.rint(np.asarray(values, np.float64) / scale)
    return int(np.count_nonzero((steps < low) | (steps > high))), np.clip(values, low * scale, high * scale)


def clipping(q: QuantizedRNN, layers: list[FloatLayer], x: np.ndarray, h0: np.ndarray | None = None,
             c0: np.ndarray | None = None) -> list[Clipped]:
    """Every tensor of the run whose values the chosen scales cannot all hold (:class:`Clipped`, none when every
    value fits): the calibration inputs ``x`` (L, B, I), the initial state ``h0`` and an LSTM's ``c0`` (N·D, B, H)
    and each layer's weights (every direction's). The quantizer's scales cover x by construction; h's scale is fixed
    (2^-7) for a cell and at most 1/127 for an Elman cell, and c's int16 in units of 2^-11 (±16), so a state beyond
    them clips."""
    ref = rnn_float(layers, x, h0, c0)[-1]

    def cost(layers_=layers, x_=x, h0_=h0, c0_=c0) -> float:
        d = rnn_float(layers_, x_, h0_, c0_)[-1] - ref
        return float(np.sqrt(np.mean(d * d)))

    found = []
    s_x = q.layers[0].scales.x
    n, clipped = _beyond(x, s_x)
    if n:
        found.append(Clipped("x", n, x.size, QMAX * s_x, f"x's int8 holds at its scale {s_x:.4g}", cost(x_=clipped)))
    if h0 is not None:
        parts = [_beyond(h0[n], one.scales.h) for n, (_, one) in enumerate(q.rows)]
        n = sum(p[0] for p in parts)
        if n:
            s_h = q.layers[0].scales.h
            found.append(Clipped("h0", n, h0.size, QMAX * s_h, f"h's int8 holds at its scale {s_h:.4g}",
                                 cost(h0_=np.stack([p[1] for p in parts]))))
    if c0 is not None:
        info = np.iinfo(np.int16)
        n, clipped = _beyond(c0, CELL_C_STEP, info.min, info.max)
        if n:
            found.append(Clipped("c0", n, c0.size, info.max * CELL_C_STEP,
                                 "the cell state's int16 holds (units of 2^-11)", cost(c0_=clipped)))
    for k, (layer, ql) in enumerate(zip(layers, q.layers, strict=True)):
        for d, one in enumerate(layer.directions):
            for kind in ("weight_ih", "weight_hh"):
                scale = getattr(ql.scales, kind)
                n, clipped = _beyond(getattr(one, kind), scale)
                if n:
                    changed = [_with_weight(f, d, kind, clipped) if j == k else f for j, f in enumerate(layers)]
                    found.append(Clipped(f"{kind}_l{k}{'_reverse' if d else ''}", n, clipped.size, QMAX * scale,
                                         f"its int8 holds at the scale {scale:.4g} the accumulator's leaves it",
                                         cost(layers_=changed)))
    return found


def _with_weight(layer: FloatLayer, d: int, kind: str, value: np.ndarray) -> FloatLayer:
    """``layer`` with direction ``d``'s weight ``kind`` replaced by ``value``."""
    if d == 0:
        return dataclasses.replace(layer, **{kind: value})
    return dataclasses.replace(layer, reverse=dataclasses.replace(layer.reverse, **{kind: value}))

