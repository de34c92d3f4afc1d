"""Float Elman RNNs (PyTorch ``nn.RNN`` names, tanh) → int8 workloads of DESIGN.md §3.

The contract does not change: the quantizer only picks the integers and scales that make the
contract's arithmetic approximate the float network.

Float model (``torch.nn.RNN(nonlinearity="tanh")``, ``batch_first=False``), for layer k = 0..N-1::

    h_t = tanh(x_t @ weight_ih_lk.T + bias_ih_lk + h_{t-1} @ weight_hh_lk.T + bias_hh_lk)

where layer 0's ``x_t`` is the input and layer k ≥ 1's is layer k-1's ``h_t`` (PyTorch's stacking).
:func:`rnn_float` is this, in numpy float64: the reference every quantization error is measured against.

Scales (real value = integer × scale; all per tensor, symmetric, int8 values in -127..127)::

    s_x0   max |calibration x| / 127       s_h0   max |float h on the calibration run| / 127 (≤ 1/127)
    r      (s_x0 · max|W_ih|) / (s_h0 · max|W_hh|)    how much wider the x product is than the h product
    s_h    s_h0 · √r if r > 1, else s_h0   s_x    s_x0 / √r if r < 1, else s_x0  (layer k ≥ 1: s_x fixed)
    s_acc  max(s_h · max|W_hh|, s_x · max|W_ih|) / 127      one accumulator scale for both products
    s_whh = s_acc / s_h,   s_wih = s_acc / s_x,   bias = round((bias_ih + bias_hh) / s_acc)  (int32)
    shift  the smallest with 127 · s_acc · 2^shift ≥ z_sat (below);  s_lut = s_acc · 2^shift
    lut    lut[q + 128] = round(tanh(q · s_lut) / s_h), clipped to ±127: q = acc >> shift is the
           tanh input in steps of s_lut, the output h in steps of s_h

Why: the contract sums ``h @ weight_hh.T`` and ``x @ weight_ih.T`` in one accumulator, so both products
need one scale, s_whh · s_h == s_wih · s_x. When h and x (times their weights) span the same range
(r = 1: the digits model, pixels in 0..1 and h in ±1) every tensor fills int8 and there is nothing to
choose. Otherwise some tensor must use less than int8's range, and there are three ways to pay:

* one activation scale for h and x (then one weight scale for A = [W_hh | W_ih]): the narrower
  activation is r× coarser;
* h and x each at full range, the weights rescaled: the weight matrix of the narrower product is r×
  coarser (W_hh when the inputs are wide);
* split the factor: the narrower activation and its weight matrix each √r coarser — what this module
  does. Both errors then stay √r instead of one of them r.

Measured (random H=16, I=8 models, gain 1, 8 seeds, RMS h error vs float): inputs of σ = 5 (r ≈ 20)
0.044 shared activation scale, 0.052 rescaled weights, 0.025 split; at σ = 1 0.019 / 0.020 / 0.018.
For layers ≥ 1, x is the previous layer's int8 h, taken as it is, so only the h side can give way.

z_sat: the activation sees only q, an int8, so the LUT's input range should reach where its output
saturates, z_sat = atanh((v - 0.5) · s_h) with v = min(127, round(1/s_h)) its largest output (3.11
for s_h = 1/127), and no further: the shift is the smallest that covers ±z_sat, so the tanh input
step s_lut is within 2× of the ideal z_sat / 127 while the weights keep their full range. Giving up
weight bits to hit the ideal step exactly (s_acc up to 2× larger) was measured worse on the digits
model (RMS h error 0.020 against 0.016): every weight error recurs at every step.

Stacked layers: layer k ≥ 1 takes layer k-1's int8 h as its x unchanged (its s_x is layer k-1's s_h),
so a stack is a chain of contract runs with no extra requantization; :meth:`QuantizedRNN.run_golden`
chains :func:`sim.models.golden.run_golden` that way, and so does the hardware (one subset per layer). A
stacked workload (:meth:`QuantizedRNN.workload`, written by :func:`save_stacked`) holds layer 0 under
the plain workload keys of DESIGN.md §5 and layer k ≥ 1 under the same keys with the suffix ``_l<k>``
(``weight_hh_l1``, ``weight_ih_l1``, ``bias_l1``, ``h0_l1``, ``shift_l1``, ``lut_l1``; no ``x_l<k>``:
that is layer k-1's output); see :mod:`sim.models.workload`.

Initial state (PyTorch's ``h0``, and an LSTM's ``c0``; :func:`load_state` reads them from a file): h0 is
quantized as h is, at each layer's h scale (:meth:`QuantizedRNN.quantize_h0`); c0 to the contract's int16 in
units of 2^-11 (:func:`quantize_c`: round to nearest, saturate), the cell state's fixed format.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from hdl.config import Config, UserError
from hdl.run.rules import CELL_FRAC, CELL_SHIFT, CELLS, GATE_FRAC, GATE_ROWS
from sim.models.golden import run_golden
from sim.models.workload import MAX_SHIFT, Layer, Workload, joined, save_workload, sigmoid_lut, tanh_lut
from sim.models.workload.files import _read_npz
from sim.models.workload.record import _gates

__all__ = ["TORCH_MODULES", "FloatLayer", "Scales", "QuantizedLayer", "QuantizedRNN", "Error", "parse_state",
           "load_model", "load_calibration", "load_state", "rnn_float", "quantize", "quantize_c", "quantization_error",
           "save_stacked", "CELL_C_STEP", "Clipped", "clipping"]

#: the PyTorch module of each cell
TORCH_MODULES = {"rnn": "nn.RNN", "lstm": "nn.LSTM", "gru": "nn.GRU"}

#: the largest int8 magnitude the quantizer uses (symmetric: -128 is never produced)
QMAX = 127

_KEY = re.compile(r"^(?:(?P<prefix>.+)\.)?(?P<kind>weight_ih|weight_hh|bias_ih|bias_hh|weight_hr)"
                  r"_l(?P<layer>\d+)(?P<reverse>_reverse)?$")


# ---- float model --------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class FloatLayer:
    """One float layer in PyTorch's layout: ``nn.RNN`` (tanh), ``nn.LSTM`` or ``nn.GRU``.

    Members
    -------
    weight_ih : (G·H, I) float64.    weight_hh : (G·H, H) float64 — G = 1, 4 (i, f, g, o), 3 (r, z, n).
    bias_ih, bias_hh : (G·H,) float64; zeros when ``has_bias`` is False (``bias=False``).
    cell : ``"rnn"``, ``"lstm"`` or ``"gru"`` (told by the shapes: G·H rows of H columns).
    reverse : a bidirectional layer's reverse direction (PyTorch's ``*_reverse`` parameters: a FloatLayer of the same
        shapes, run on x from the last step back), or None; a layer above a bidirectional one takes 2H inputs.
    """

    weight_ih: np.ndarray
    weight_hh: np.ndarray
    bias_ih: np.ndarray
    bias_hh: np.ndarray
    has_bias: bool
    cell: str = "rnn"
    reverse: FloatLayer | None = None

    @property
    def hidden(self) -> int:
        return self.weight_hh.shape[1]

    @property
    def directions(self) -> list[FloatLayer]:
        """The layer's directions, forward first: itself, and its reverse direction if it has one."""
        return [self] if self.reverse is None else [self, self.reverse]

    @property
    def input(self) -> int:
        return self.weight_ih.shape[1]


def _float_array(key: str, value) -> np.ndarray:
    value = np.asarray(value)
    if value.dtype.kind not in "fiu" or value.dtype == np.bool_:
        raise UserError(f"model key {key!r} must hold real numbers, not {value.dtype}")
    value = value.astype(np.float64)
    if not np.isfinite(value).all():
        raise UserError(f"model key {key!r} holds NaN or infinite values")
    return value


def parse_state(state: Mapping[str, object]) -> tuple[list[FloatLayer], list[str]]:
    """The layers of a PyTorch ``nn.RNN`` state dict (or the same names in an ``.npz``).

    Keys are ``weight_ih_l<k>``, ``weight_hh_l<k>``, ``bias_ih_l<k>``, ``bias_hh_l<k>``, all with one
    optional common prefix (``rnn.weight_ih_l0`` from a module holding an ``nn.RNN`` as ``rnn``), and a
    bidirectional module's ``…_l<k>_reverse`` of every layer (its reverse direction; a layer above takes 2H inputs).
    Returns ``(layers, ignored)``: ``ignored`` lists the keys that are not RNN weights (a readout layer,
    say). Projected RNNs, gaps in the layer numbers, missing weights, a lone bias, a reverse direction some layers
    lack and shapes that do not chain raise :class:`UserError` naming the key.
    """
    found: dict[tuple[int, str, str], tuple[str, object]] = {}
    prefixes: dict[str, str] = {}
    ignored = []
    for key in state:
        m = _KEY.match(str(key))
        if m is None:
            ignored.append(str(key))
            continue
        if m["kind"] == "weight_hr":
            raise UserError(f"model key {key!r}: LSTMs with proj_size are not supported (h is the cell's output "
                            "here, H wide)")
        prefix = m["prefix"] or ""
        if prefixes and prefix not in prefixes:
            other = next(iter(prefixes.values()))
            raise UserError(f"model key {key!r} belongs to another RNN than {other!r}: import one RNN at a time")
        prefixes.setdefault(prefix, str(key))
        found[int(m["layer"]), m["kind"], m["reverse"] or ""] = (str(key), state[key])
    if not found:
        raise UserError("model has no RNN weights: expected PyTorch nn.RNN, nn.LSTM or nn.GRU keys weight_ih_l0, "
                        "weight_hh_l0, bias_ih_l0, bias_hh_l0 (…_l1 for a second layer)")
    prefix = next(iter(prefixes))
    name = (prefix + ".") if prefix else ""
    count = max(layer for layer, _, _ in found) + 1
    bidirectional = any(reverse for _, _, reverse in found)

    layers = []
    for k in range(count):
        forward = _float_layer(found, name, k, "", count, layers)
        reverse = _float_layer(found, name, k, "_reverse", count, layers) if bidirectional else None
        layers.append(dataclasses.replace(forward, reverse=reverse))
    return layers, sorted(ignored)


def _float_layer(found: dict, name: str, k: int, suffix: str, count: int, below: list[FloatLayer]) -> FloatLayer:
    """One direction of layer ``k`` (``suffix`` ``_reverse``: its reverse one) from a state dict's keys (``found``:
    (layer, kind, suffix) → (key, value)), checked against the layers ``below`` it."""
    for kind in ("weight_ih", "weight_hh"):
        if (k, kind, suffix) not in found:
            why = ("a bidirectional model's every layer has both directions" if suffix or
                   any(s for _, _, s in found) else "")
            raise UserError(f"model key {name}{kind}_l{k!s}{suffix} is missing (layers must be numbered 0..{count - 1},"
                            f" each with weight_ih and weight_hh{'; ' + why if why else ''})")
    key_hh, w_hh = found[k, "weight_hh", suffix]
    w_hh = _float_array(key_hh, w_hh)
    # the cell from the shape: nn.RNN (H, H), nn.GRU (3H, H), nn.LSTM (4H, H)
    cells = {GATE_ROWS[c]: c for c in CELLS}
    if (w_hh.ndim != 2 or w_hh.shape[1] < 1 or w_hh.shape[0] % w_hh.shape[1]
            or w_hh.shape[0] // w_hh.shape[1] not in cells):
        raise UserError(f"model key {key_hh!r} must have shape (H, H) (nn.RNN), (3H, H) (nn.GRU) or "
                        f"(4H, H) (nn.LSTM) with H ≥ 1, not {w_hh.shape}")
    hidden = w_hh.shape[1]
    cell = cells[w_hh.shape[0] // hidden]
    G = GATE_ROWS[cell]
    if below and cell != below[0].cell:
        raise UserError(f"model key {key_hh!r} is of a layer of cell {cell}, layer 0 of cell {below[0].cell}: "
                        "every layer must be of one cell")
    key_ih, w_ih = found[k, "weight_ih", suffix]
    w_ih = _float_array(key_ih, w_ih)
    if k == 0:
        if w_ih.ndim != 2 or w_ih.shape[0] != G * hidden or w_ih.shape[1] < 1:
            raise UserError(f"model key {key_ih!r} must have shape ({G * hidden}, I) with I ≥ 1 "
                            f"({_gates(cell)}H with H = {hidden} from {key_hh}), not {w_ih.shape}")
    else:
        D = len(below[-1].directions)
        want = (G * hidden, D * below[-1].hidden)
        if w_ih.shape != want:
            of = f"H of layer {k - 1}" if D == 1 else f"2H of layer {k - 1}, both directions"
            raise UserError(f"model key {key_ih!r} must have shape {want} ({_gates(cell)}H of this layer × {of}), "
                            f"not {w_ih.shape}")
    has = [(k, kind, suffix) in found for kind in ("bias_ih", "bias_hh")]
    if any(has) and not all(has):
        missing = "bias_hh" if has[0] else "bias_ih"
        raise UserError(f"model key {name}{missing}_l{k}{suffix} is missing (give both biases of a layer or neither)")
    biases = []
    for kind in ("bias_ih", "bias_hh"):
        if all(has):
            key_b, b = found[k, kind, suffix]
            b = _float_array(key_b, b)
            if b.shape != (G * hidden,):
                raise UserError(f"model key {key_b!r} must have shape ({G * hidden},), not {b.shape}")
            biases.append(b)
        else:
            biases.append(np.zeros(G * hidden))
    for a in (w_ih, w_hh, *biases):
        a.setflags(write=False)
    return FloatLayer(w_ih, w_hh, biases[0], biases[1], all(has), cell)


def load_model(path) -> tuple[list[FloatLayer], list[str]]:
    """:func:`parse_state` of a ``.npz`` file or a PyTorch ``.pt``/``.pth`` state dict (needs torch)."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npz":
        return parse_state(_read_npz(path, "model"))
    if ext not in (".pt", ".pth"):
        raise UserError(f"model file {path!r} must be an .npz of arrays, a PyTorch .pt state dict or an .onnx model, "
                        f"not {ext or 'no'} suffix")
    if not os.path.isfile(path):
        raise UserError(f"model file {path!r} does not exist")
    try:
        import torch  # lazy and optional: only a .pt model needs PyTorch
    except ImportError:
        raise UserError(f"model file {path!r} is a PyTorch state dict, and reading it needs PyTorch, which is not "
                        "installed (pip install torch; the CPU build is enough), or save the weights with "
                        "numpy.savez and import the .npz"
                        ) from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        # weights_only refuses any class but tensors and plain containers: a whole pickled module
        # (torch.save(model)) is the common case, and torch's text (many lines, terminal escapes) says nothing of
        # what to do here
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(e))
        if found is None:
            raise UserError(f"model file {path!r} is not a PyTorch state dict (not a file torch.save wrote)") from None
        raise UserError(f"model file {path!r} holds a pickled {found.group(1)}, not a state dict: save the weights "
                        "alone with torch.save(model.state_dict(), path) and import that file") from None
    except Exception as e:  # torch raises many kinds (zip, runtime) for a bad file
        first = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip().splitlines()
        raise UserError(f"model file {path!r} is not a readable PyTorch state dict ({type(e).__name__}"
                        f"{': ' + first[0] if first else ''})") from None
    if not isinstance(state, Mapping):
        raise UserError(f"model file {path!r} holds a {type(state).__name__}, not a state dict "
                        "(save it with torch.save(model.state_dict(), path))")
    arrays = {}
    for key, value in state.items():
        arrays[key] = value.detach().cpu().double().numpy() if isinstance(value, torch.Tensor) else value
    return parse_state(arrays)


def load_calibration(path, inputs: int, batch_first: bool = False) -> np.ndarray:
    """Calibration inputs from an ``.npy`` file, as (L, B, I) real numbers: the file's (L, B, I), or (B, L, I) when
    ``batch_first`` (PyTorch's ``batch_first=True``), I matching the model."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise UserError(f"calibration file {path!r} does not exist")
    try:
        x = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise UserError(f"calibration file {path!r} is not a readable .npy array ({e})") from None
    if not isinstance(x, np.ndarray):
        raise UserError(f"calibration file {path!r} must hold one array (.npy), not an archive")
    x = _check_x(x, inputs, f"calibration file {path!r}", batch_first)
    return x.transpose(1, 0, 2) if batch_first else x


def load_state(path, layers: list[FloatLayer], batch: int, steps: int | None = None,
               batch_first: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """A run's initial state from a file, as PyTorch's modules take it: ``(h0, c0)``, float64 (N·D, B, H) each (D = 2
    directions of a bidirectional model, row k·D + d), c0 None when the file has none (zeros).

    The file is an ``.npz`` with keys ``h0`` and optionally ``c0``, or a PyTorch ``.pt`` (needs torch) of
    ``torch.save((h0, c0), path)`` (``nn.LSTM``'s) or ``torch.save(h0, path)`` (``nn.GRU``'s, ``nn.RNN``'s, or
    an LSTM's with c0 = 0). Shapes are (N·D, B, H) with N, D and H the model's (``layers``) and B ``batch`` (the
    run's inputs'), or (B, H) for a one-layer model of one direction. A missing or unreadable file, a c0 for a GRU or
    Elman model and any other shape raise :class:`UserError` in one line; when its B is the calibration inputs'
    ``steps``, the line says the calibration file's layout may be the other one (``batch_first``: the one it was read
    as).
    """
    path = os.fspath(path)
    what = f"state file {path!r}"
    if not os.path.exists(path):
        raise UserError(f"{what} does not exist")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npz":
        d = _read_npz(path, "state")
        for key in d:
            if key not in ("h0", "c0"):
                raise UserError(f"{what} has key {key!r}: a state file holds h0 and, for an LSTM, c0")
        if "h0" not in d:
            raise UserError(f"{what} has no key 'h0' (keys: h0, and c0 for an LSTM; save them with numpy.savez)")
        h0, c0 = d["h0"], d.get("c0")
    elif ext in (".pt", ".pth"):
        h0, c0 = _load_torch_state(path)
    else:
        raise UserError(f"{what} must be an .npz (keys h0 and c0) or a PyTorch .pt of (h0, c0) or h0, not "
                        f"{ext or 'no'} suffix")
    cell = layers[0].cell
    if c0 is not None and cell != "lstm":
        raise UserError(f"{what} holds a c0, but the model is an {TORCH_MODULES[cell]}: only an LSTM has a cell "
                        "state; give h0 alone")
    hint = (steps, batch_first)
    return _state_array(what, "h0", h0, layers, batch, hint), (None if c0 is None
                                                               else _state_array(what, "c0", c0, layers, batch, hint))


def _load_torch_state(path: str) -> tuple[object, object]:
    """``(h0, c0)`` (c0 None) as numpy arrays from a ``.pt`` file of ``(h0, c0)``, ``(h0,)`` or ``h0``."""
    what = f"state file {path!r}"
    try:
        import torch  # lazy and optional: only a .pt state needs PyTorch
    except ImportError:
        raise UserError(f"{what} is a PyTorch file, and reading it needs PyTorch, which is not installed (pip "
                        "install torch; the CPU build is enough), or save h0 and c0 with numpy.savez and give the "
                        ".npz") from None
    try:
        value = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many kinds (zip, runtime, unpickling) for a bad file
        first = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip().splitlines()
        raise UserError(f"{what} is not a readable PyTorch file ({type(e).__name__}"
                        f"{': ' + first[0] if first else ''})") from None
    parts = list(value) if isinstance(value, tuple | list) else [value]
    if not 1 <= len(parts) <= 2 or not all(isinstance(p, torch.Tensor) for p in parts):
        got = (f"a {type(value).__name__} of {len(parts)}" if isinstance(value, tuple | list)
               else f"a {type(value).__name__}")
        raise UserError(f"{what} holds {got}, not (h0, c0) or h0: save the tensors with torch.save((h0, c0), path) "
                        "or torch.save(h0, path)")
    arrays = [p.detach().cpu().double().numpy() for p in parts]
    return arrays[0], (arrays[1] if len(arrays) == 2 else None)


def _state_array(what: str, name: str, value, layers: list[FloatLayer], batch: int,
                 hint: tuple[int | None, bool] = (None, False)) -> np.ndarray:
    """h0 or c0 as float64 (N·D, B, H): the model's N, D and H, the run's B; (B, H) is one layer's. ``hint``: the
    calibration inputs' L and whether they were read batch first, for the error's hint."""
    D, hidden = len(layers[0].directions), layers[0].hidden
    count = len(layers) * D
    want = (count, batch, hidden)
    value = np.asarray(value)
    if value.ndim == 2 and count == 1:
        value = value[None]
    if value.shape != want:
        one = " (or (B, H) for one layer)" if count == 1 else ""
        rows = (f"{len(layers)} layer{'s' if len(layers) > 1 else ''}" if D == 1 else
                f"{len(layers)} layer{'s' if len(layers) > 1 else ''} × 2 directions, PyTorch's num_layers · 2")
        raise UserError(f"{what}: {name} must have shape {want}{one} (layers × batch × hidden: {rows} and H = "
                        f"{hidden} from the model, B = {batch} from the calibration inputs), not "
                        f"{tuple(int(n) for n in value.shape)}{_layout_hint(value, hint)}")
    return _real(value, f"{what}: {name}")


def _layout_hint(value: np.ndarray, hint: tuple[int | None, bool]) -> str:
    """What an initial state whose batch is the calibration inputs' L says of their layout (read the other way, B
    would be L)."""
    steps, batch_first = hint
    if steps is None or value.ndim < 2 or value.shape[-2] != steps:
        return ""
    return (f": its B is the calibration inputs' L = {steps} — if they are (L, B, I), drop --batch-first" if batch_first
            else f": its B is the calibration inputs' L = {steps} — if they are (B, L, I) (batch_first=True), give "
            "--batch-first")


def _check_x(x, inputs: int, what: str, batch_first: bool = False) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 3 or x.shape[0] < 1 or x.shape[1] < 1 or x.shape[2] != inputs:
        layout = (f"(B, L, {inputs}) (batch × steps × the model's input features: --batch-first" if batch_first else
                  f"(L, B, {inputs}) (steps × batch × the model's input features, PyTorch's batch_first=False; "
                  "--batch-first for (B, L, I)")
        raise UserError(f"{what} must have shape {layout}), not {x.shape}")
    return _real(x, what)


def _real(value: np.ndarray, what: str) -> np.ndarray:
    """``value`` as float64, or a UserError: it must hold finite real numbers."""
    if value.dtype.kind not in "fiu" or value.dtype == np.bool_:
        raise UserError(f"{what} must hold real numbers, not {value.dtype}")
    value = value.astype(np.float64)
    if not np.isfinite(value).all():
        raise UserError(f"{what} holds NaN or infinite values")
    return value


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def rnn_float(layers: list[FloatLayer], x: np.ndarray, h0: np.ndarray | None = None,
              c0: np.ndarray | None = None) -> list[np.ndarray]:
    """``torch.nn.RNN`` (tanh), ``nn.LSTM`` or ``nn.GRU`` in numpy float64: every layer's h for every step.

    ``x`` is (L, B, I); ``h0`` and an LSTM's ``c0`` are (N·D, B, H) as in PyTorch (D = 2 directions of a
    bidirectional model: row k·D + d), or None for zeros. Returns one (L, B, D·H) array per layer: a bidirectional
    layer's reverse direction runs on x from the last step back and its h stands beside the forward one's at every
    step (``sim.models.workload.joined``).
    """
    x = np.asarray(x, np.float64)
    D = len(layers[0].directions)
    outs = []
    for k, layer in enumerate(layers):
        runs = [_float_run(one, x if d == 0 else x[::-1], None if h0 is None else h0[k * D + d],
                           None if c0 is None else c0[k * D + d]) for d, one in enumerate(layer.directions)]
        x = runs[0] if D == 1 else joined(*runs)
        outs.append(x)
    return outs


def _float_run(layer: FloatLayer, x: np.ndarray, h0: np.ndarray | None, c0: np.ndarray | None) -> np.ndarray:
    """One direction of one layer over ``x`` (L, B, I) in its order, from ``h0`` and an LSTM's ``c0`` (B, H) (None:
    zeros): its h at every step, (L, B, H)."""
    H = layer.hidden
    h = np.zeros((x.shape[1], H)) if h0 is None else np.asarray(h0, np.float64)
    c = np.zeros_like(h) if c0 is None else np.asarray(c0, np.float64)
    gx = x @ layer.weight_ih.T + layer.bias_ih             # every step's input part at once
    out = np.empty(gx.shape[:2] + (H,))
    for t in range(x.shape[0]):
        gh = h @ layer.weight_hh.T + layer.bias_hh
        if layer.cell == "rnn":
            h = np.tanh(gx[t] + gh)
        elif layer.cell == "lstm":
            i, f, g, o = np.split(gx[t] + gh, 4, axis=-1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
        else:
            r = _sigmoid(gx[t, :, :H] + gh[:, :H])
            z = _sigmoid(gx[t, :, H:2 * H] + gh[:, H:2 * H])
            n = np.tanh(gx[t, :, 2 * H:] + r * gh[:, 2 * H:])
            h = (1 - z) * n + z * h
        out[t] = h
    return out


# ---- quantized model ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Scales:
    """The real value of one integer step of each quantity of one layer (see the module docstring)."""

    x: float
    h: float
    weight_ih: float
    weight_hh: float
    acc: float
    lut: float


@dataclass(frozen=True, eq=False)
class QuantizedLayer:
    """One layer's integers (DESIGN.md §3) and the scales that give them meaning.

    Members
    -------
    weight_hh : (G·H, H) int8.   weight_ih : (G·H, I) int8.   bias : (H,) or a cell's (4H,) int32.
    has_bias : whether the float layer had biases.
    shift : the requantization shift.   lut : (256,) int8 tanh table (a cell's σ).
    scales : :class:`Scales`.
    cell : ``"rnn"``, ``"lstm"``, ``"gru"``;  lut_tanh : a cell's (256,) int8 tanh table.
    reverse : a bidirectional layer's reverse direction, or None: its own weights and bias, the layer's scales, shift
        and LUTs (the layer above reads both directions' h as one int8 x, at one scale).
    """

    weight_hh: np.ndarray
    weight_ih: np.ndarray
    bias: np.ndarray
    has_bias: bool
    shift: int
    lut: np.ndarray
    scales: Scales
    cell: str = "rnn"
    lut_tanh: np.ndarray | None = None
    reverse: QuantizedLayer | None = None

    @property
    def directions(self) -> list[QuantizedLayer]:
        """The layer's directions, forward first."""
        return [self] if self.reverse is None else [self, self.reverse]

    @property
    def hidden(self) -> int:
        return self.weight_hh.shape[1]

    def workload(self, x: np.ndarray, h0: np.ndarray | None = None, c0: np.ndarray | None = None) -> Workload:
        """The contract run of this layer on int8 inputs ``x`` (L, B, I), int8 ``h0`` (B, H) (zeros) and an
        LSTM's int16 ``c0`` (B, H) (None: zeros)."""
        batch = x.shape[1]
        h0 = np.zeros((batch, self.hidden), np.int8) if h0 is None else h0
        return Workload(weight_hh=self.weight_hh, weight_ih=self.weight_ih, bias=self.bias, h0=h0, x=x,
                        steps=x.shape[0], shift=self.shift, lut=self.lut, has_bias=self.has_bias, cell=self.cell,
                        lut_tanh=self.lut_tanh, scale_x=self.scales.x, scale_h=self.scales.h, c0=c0)

    def stacked(self, h0: np.ndarray, c0: np.ndarray | None) -> Layer:
        """This direction as a workload's :class:`~sim.models.workload.Layer` (a stacked layer, or a reverse
        direction), from int8 ``h0`` and an LSTM's int16 ``c0`` (None: zeros)."""
        return Layer(weight_hh=self.weight_hh, weight_ih=self.weight_ih, bias=self.bias, h0=h0, shift=self.shift,
                     lut=self.lut, has_bias=self.has_bias, lut_tanh=self.lut_tanh, scale_x=self.scales.x,
                     scale_h=self.scales.h, c0=c0)


def _to_int8(values: np.ndarray, scale: float) -> np.ndarray:
    return np.clip(np.rint(values / scale), -QMAX, QMAX).astype(np.int8)


#: the real value of one step of an LSTM's cell state c (DESIGN.md §3: int16 in units of 2^-CELL_FRAC)
CELL_C_STEP = 2.0 ** -CELL_FRAC


def quantize_c(c: np.ndarray) -> tuple[np.ndarray, int]:
    """A float cell state → the contract's int16 in units of 2^-11 (nearest, ties to even; saturated to int16,
    ±16), and how many values saturated."""
    v = np.rint(np.asarray(c, np.float64) / CELL_C_STEP)
    info = np.iinfo(np.int16)
    saturated = int(np.count_nonzero((v < info.min) | (v > info.max)))
    return np.clip(v, info.min, info.max).astype(np.int16), saturated


@dataclass(frozen=True, eq=False)
class QuantizedRNN:
    """A quantized stack of layers (usually one), of one direction or two.

    Members
    -------
    layers : one :class:`QuantizedLayer` per float layer (a bidirectional one's with its ``reverse``); layer k ≥ 1's
        x scale is layer k-1's h scale.
    """

    layers: tuple[QuantizedLayer, ...]

    @property
    def rows(self) -> list[tuple[int, QuantizedLayer]]:
        """The rows of PyTorch's initial and final state, (N·D, B, H): (layer, direction) — layer-major, a
        bidirectional layer's forward direction first."""
        return [(k, one) for k, layer in enumerate(self.layers) for one in layer.directions]

    def quantize_x(self, x: np.ndarray) -> np.ndarray:
        """Float inputs (L, B, I) → int8 at layer 0's input scale (clipped to ±127)."""
        return _to_int8(_check_x(x, self.layers[0].weight_ih.shape[1], "x"), self.layers[0].scales.x)

    def quantize_h0(self, h0: np.ndarray | None, batch: int) -> list[np.ndarray]:
        """Float (N·D, B, H) initial states (None: zeros) → one int8 (B, H) array per row (:attr:`rows`)."""
        if h0 is None:
            return [np.zeros((batch, one.hidden), np.int8) for _, one in self.rows]
        return [_to_int8(np.asarray(h0[n], np.float64), one.scales.h) for n, (_, one) in enumerate(self.rows)]

    def quantize_c0(self, c0: np.ndarray | None) -> list[np.ndarray | None]:
        """An LSTM's float (N·D, B, H) initial cell state → one int16 (B, H) array per row (:func:`quantize_c`);
        None: None for every row (zeros)."""
        if c0 is None:
            return [None] * len(self.rows)
        return [quantize_c(c0[n])[0] for n in range(len(self.rows))]

    def workload(self, x: np.ndarray, h0: np.ndarray | None = None, c0: np.ndarray | None = None) -> Workload:
        """The stack's contract run on float inputs ``x`` (L, B, I), float ``h0`` (N·D, B, H) (zeros) and an LSTM's
        float ``c0`` (N·D, B, H) (None: zeros): layer 0 with its inputs, layers k ≥ 1 as its stacked
        :class:`~sim.models.workload.Layer` s, a bidirectional one's reverse directions beside them."""
        xq = self.quantize_x(x)
        h0q = self.quantize_h0(h0, xq.shape[1])
        c0q = self.quantize_c0(c0)
        D = len(self.layers[0].directions)
        upper = tuple(u.stacked(h0q[k * D], c0q[k * D]) for k, u in enumerate(self.layers[1:], start=1))
        reverse = tuple(u.reverse.stacked(h0q[k * D + 1], c0q[k * D + 1])
                        for k, u in enumerate(self.layers) if u.reverse is not None)
        return dataclasses.replace(self.layers[0].workload(xq, h0q[0], c0q[0]), upper=upper, reverse=reverse)

    def run_golden(self, x: np.ndarray, h0: np.ndarray | None = None, c0: np.ndarray | None = None, *,
                   acc_width: int = Config().acc_width, last_only: bool = False) -> tuple[list[np.ndarray], bool]:
        """The exact integer model of the whole stack on float ``x`` (and ``h0``, an LSTM's ``c0``): every layer's
        int8 output, chained (:func:`sim.models.golden.run_golden` of :meth:`workload`).

        Returns ``(hs, overflow)``: one (L, B, D·H) int8 array per layer ((1, B, D·H) for the last layer when
        ``last_only``) and whether any accumulator saturated.
        """
        result = run_golden(self.workload(x, h0, c0), acc_width=acc_width, last_only=last_only)
        return list(result.outputs), result.overflow

    def dequantize_h(self, h: np.ndarray, layer: int = -1) -> np.ndarray:
        """int8 h of ``layer`` → float64 real values."""
        return h.astype(np.float64) * self.layers[layer].scales.h


def _max_abs(*arrays) -> float:
    return max((float(np.abs(a).max()) for a in arrays if a.size), default=0.0)


def quantize(layers: list[FloatLayer], calib: np.ndarray, h0: np.ndarray | None = None) -> QuantizedRNN:
    """Quantize float layers with scales calibrated on inputs ``calib`` (L, B, I) (and float ``h0``).

    The rules are the module docstring's. Raises :class:`UserError` if a bias does not fit int32 at the
    accumulator scale (which takes a bias ~10^7 times the weights).
    """
    calib = _check_x(calib, layers[0].input, "calibration x")
    if layers[0].cell != "rnn":
        return _quantize_cells(layers, calib)
    outs = rnn_float(layers, calib, h0)
    s_x = (_max_abs(calib) or 1.0) / QMAX
    quantized = []
    D = len(layers[0].directions)
    for k, (layer, out) in enumerate(zip(layers, outs, strict=True)):
        # a bidirectional layer's directions share the scales: the layer above reads both h as one int8 x
        state = () if h0 is None else h0[k * D:(k + 1) * D]
        s_h = (min(1.0, _max_abs(out, *state)) or 1.0) / QMAX
        w_hh = _max_abs(*(one.weight_hh for one in layer.directions)) or 1.0
        w_ih = _max_abs(*(one.weight_ih for one in layer.directions)) or 1.0
        # Split the products' range mismatch r evenly between the narrower activation and its weights.
        r = (s_x * w_ih) / (s_h * w_hh)
        if r > 1:
            s_h *= math.sqrt(r)
        elif k == 0:                    # layer k ≥ 1 reads layer k-1's int8 h as it is: its s_x is fixed
            s_x /= math.sqrt(r)
        s_acc = max(s_h * w_hh, s_x * w_ih) / QMAX
        top = min(QMAX, round(1 / s_h))                 # the LUT's largest output, tanh's asymptote
        z_sat = math.atanh(min((top - 0.5) * s_h, 1 - 1e-12))
        shift = max(0, min(MAX_SHIFT, math.ceil(math.log2(z_sat / (QMAX * s_acc)))))
        s_lut = s_acc * 2 ** shift
        scales = Scales(x=s_x, h=s_h, weight_ih=s_acc / s_x, weight_hh=s_acc / s_h, acc=s_acc, lut=s_lut)
        lut = np.clip(tanh_lut(in_scale=s_lut, out_scale=s_h), -QMAX, QMAX).astype(np.int8)
        lut.setflags(write=False)
        quantized.append(_quantized_layer(layer, k, scales, shift, lut=lut))
        s_x = s_h                       # the next layer reads this layer's int8 h unchanged
    return QuantizedRNN(tuple(quantized))


def _quantized_layer(layer: FloatLayer, k: int, scales: Scales, shift: int, **luts) -> QuantizedLayer:
    """Layer ``k``'s weights and bias at its ``scales`` (every direction's, the layer's scales, shift and LUTs
    ``luts`` shared), the bias at the accumulator's scale: an Elman cell's and an LSTM's b_ih + b_hh per gate; a
    GRU's r and z the same, then n's b_in and b_hn apart (r multiplies b_hn). A bias beyond int32 is a UserError."""
    directions = []
    for one, suffix in zip(layer.directions, ("", "_reverse"), strict=False):
        H, b_ih, b_hh = one.hidden, one.bias_ih, one.bias_hh
        bias = (b_ih + b_hh) if one.cell != "gru" else np.concatenate([b_ih[:2 * H] + b_hh[:2 * H], b_ih[2 * H:],
                                                                        b_hh[2 * H:]])
        bias = np.rint(bias / scales.acc)
        info = np.iinfo(np.int32)
        if bias.size and (bias.min() < info.min or bias.max() > info.max):
            raise UserError(f"model key bias_ih_l{k}{suffix} + bias_hh_l{k}{suffix} does not fit int32 at the "
                            f"accumulator scale {scales.acc:.3g} (|bias| up to {_max_abs(b_ih + b_hh):.3g})")
        directions.append(QuantizedLayer(
            weight_hh=_to_int8(one.weight_hh, scales.weight_hh), weight_ih=_to_int8(one.weight_ih, scales.weight_ih),
            bias=bias.astype(np.int32), has_bias=one.has_bias, shift=shift, scales=scales, cell=one.cell, **luts))
    return dataclasses.replace(directions[0], reverse=directions[1] if len(directions) > 1 else None)


#: a cell's LUT input step (``hdl.run.rules.CELL_SHIFT``: tanh(c') reads c' in units of 2^-(CELL_FRAC - CELL_SHIFT))
CELL_LUT_STEP = 2.0 ** -(11 - CELL_SHIFT)
#: a cell's h and gate step (DESIGN.md §3)
CELL_H_STEP = 2.0 ** -GATE_FRAC


def _quantize_cells(layers: list[FloatLayer], calib: np.ndarray) -> QuantizedRNN:
    """LSTM and GRU layers: the contract fixes h's step (2^-7) and the LUTs' input step (2^-5, the cell state's
    tanh), so each layer has one free choice, the shift: the finest whose weights still fit int8. The
    accumulator step is s_acc = 2^-5 / 2^shift, the weights' s_acc / s_h and s_acc / s_x; x's step is its
    calibration range / 127 (layer 0) or layer k-1's h step. Biases: :func:`_quantized_layer`. A bidirectional
    layer's directions share the shift: the finest both directions' weights allow."""
    s_x = (_max_abs(calib) or 1.0) / QMAX
    s_h = CELL_H_STEP
    quantized = []
    for k, layer in enumerate(layers):
        w_hh = _max_abs(*(one.weight_hh for one in layer.directions)) or 1.0
        w_ih = _max_abs(*(one.weight_ih for one in layer.directions)) or 1.0
        need = max(w_hh * s_h, w_ih * s_x) / QMAX             # the smallest accumulator step the weights allow
        shift = max(0, min(MAX_SHIFT, math.floor(math.log2(CELL_LUT_STEP / need))))
        s_acc = CELL_LUT_STEP / 2 ** shift
        scales = Scales(x=s_x, h=s_h, weight_ih=s_acc / s_x, weight_hh=s_acc / s_h, acc=s_acc, lut=CELL_LUT_STEP)
        quantized.append(_quantized_layer(layer, k, scales, shift,
                                          lut=sigmoid_lut(in_scale=CELL_LUT_STEP, out_scale=s_h),
                                          lut_tanh=tanh_lut(in_scale=CELL_LUT_STEP, out_scale=s_h)))
        s_x = s_h                       # the next layer reads this layer's int8 h unchanged
    return QuantizedRNN(tuple(quantized))


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


def save_stacked(q: QuantizedRNN, x: np.ndarray, path, h0: np.ndarray | None = None,
                 c0: np.ndarray | None = None) -> None:
    """Write the stack run on float ``x`` (from ``h0`` and an LSTM's ``c0``) as a workload file: layer 0 under the
    plain keys (a one-layer stack is an ordinary workload), layer k ≥ 1 under ``<key>_l<k>`` (see the module
    docstring)."""
    save_workload(q.workload(x, h0, c0), path)
