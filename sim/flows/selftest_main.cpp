// The board self-test under Verilator (sim/flows/board.py): reset, then the clock until the self-test is over,
// its UART line decoded as a terminal would (8N1, a bit every <divisor> cycles). Prints "uart <line>",
// "cycles <n>" and "leds <n>"; exits 0 when it passed, 1 when it failed, 2 at <limit> cycles (a hang).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "Vrnnpipe_selftest.h"
#include "verilated.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s DIVISOR LIMIT\n", argv[0]);
        return 2;
    }
    const long divisor = std::atol(argv[1]), limit = std::atol(argv[2]);
    VerilatedContext context;
    Vrnnpipe_selftest top(&context);
    auto tick = [&]() {
        top.clk = 0;
        top.eval();
        top.clk = 1;
        top.eval();
    };
    top.rst = 1;
    for (int i = 0; i < 4; i++) tick();
    top.rst = 0;
    std::string line;
    long cycle = 0, until = -1;   // until: the cycle of the next sample of the byte being received
    int bit = -1, byte = 0;       // bit: -1 idle, 0..7 data, 8 stop
    int last_tx = 1;
    while (cycle < limit) {
        tick();
        cycle++;
        const int tx = top.uart_tx;
        if (bit < 0 && last_tx == 1 && tx == 0) {       // a start bit: sample each bit in its middle
            bit = 0;
            byte = 0;
            until = cycle + divisor + divisor / 2;
        } else if (bit >= 0 && cycle == until) {
            if (bit < 8) {
                byte |= tx << bit;
                bit++;
                until += divisor;
            } else {
                if (byte == '\n') {
                    while (!line.empty() && line.back() == '\r') line.pop_back();
                } else {
                    line.push_back(static_cast<char>(byte));
                }
                bit = -1;
            }
        }
        last_tx = tx;
        if (top.finished && bit < 0) break;
    }
    std::printf("uart %s\ncycles %ld\nleds %d\n", line.c_str(), cycle, static_cast<int>(top.leds));
    if (cycle >= limit) return 2;
    return top.passed ? 0 : 1;
}
