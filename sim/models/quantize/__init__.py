"""Float Elman RNNs (PyTorch ``nn.RNN`` names, tanh) → int8 workloads of DESIGN.md §3.

The contract does not change: the quantizer only picks the integers and scales that make the
contract's arithmetic approximate the float network.

The package by seam: ``floats`` (the float layers, read from a state dict, and :func:`rnn_float`, the reference every
quantization error is measured against), ``files`` (model, calibration and initial-state files), ``quantized`` (the
integer layers and stack, their workload and :func:`save_stacked`), ``calibrate`` (:func:`quantize`: the scales, and
why) and ``errors`` (the error against the float model, and what the scales clip).
"""

from .calibrate import quantize
from .errors import Clipped, Error, clipping, quantization_error
from .files import load_calibration, load_model, load_state
from .floats import TORCH_MODULES, FloatLayer, parse_state, rnn_float
from .quantized import CELL_C_STEP, QuantizedLayer, QuantizedRNN, Scales, quantize_c, save_stacked

__all__ = ["TORCH_MODULES", "FloatLayer", "Scales", "QuantizedLayer", "QuantizedRNN", "Error", "parse_state",
           "load_model", "load_calibration", "load_state", "rnn_float", "quantize", "quantize_c", "quantization_error",
           "save_stacked", "CELL_C_STEP", "Clipped", "clipping"]
