"""A product with a register on each operand and on the result: the shape of a DSP block's own registers."""

from amaranth import Signal, Value

from hdl.config import KEEP

__all__ = ["registered_product", "PRODUCT_LATENCY"]

#: cycles from the operands to their registered product: the operand registers, the product register (both in
#: the DSP block), and a fabric register where the product is used
PRODUCT_LATENCY = 3


def registered_product(m, a, b, *, name: str):
    """``a * b``, ``PRODUCT_LATENCY`` cycles later.

    The operand registers and the product register are reset-less and unconditional, and each operand
    register feeds this product alone (``KEEP``: Yosys would merge identical copies), so synthesis moves
    all three into the multiplier's DSP block (``sim.synth.pack_dsp_registers``); a last register takes
    the product where it is used. The DSP blocks left to anything but the MACs are wherever the device has
    one free, often across the chip: so the wire to the block and the wire back are each a path of their
    own, with neither the multiplier nor the logic using the product on them."""
    a, b = Value.cast(a), Value.cast(b)
    ra = Signal(a.shape(), name=f"{name}_a", reset_less=True, attrs=KEEP)
    rb = Signal(b.shape(), name=f"{name}_b", reset_less=True, attrs=KEEP)
    product = Signal((ra * rb).shape(), name=f"{name}_p", reset_less=True)
    landed = Signal.like(product, name=name, reset_less=True)
    m.d.sync += [ra.eq(a), rb.eq(b), product.eq(ra * rb), landed.eq(product)]
    return landed
