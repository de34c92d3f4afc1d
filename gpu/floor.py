"""Where a cluster step's time goes: the cluster kernel (Elman, fp16, one cluster of 16, batch 1) built with stages
left out (``-DRNNPIPE_CL_SKIP``: 1 the DSMEM stores, 2 the cluster barrier, 4 the products, 8 the cell, 16 the y
stores, 32 the xp prefetch), each timed alone (kernel only, µs a step, best of 5): ``python -m gpu.floor``. The
results are wrong where a stage is left out; only the times mean something (HOPPER/METHOD: time variants that leave
one stage out, and take differences)."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

from gpu.build import BUILD_DIR, cubin
from gpu.device import Kernels, Layer, cuda_time, device_info, require_gpu, run_cluster
from gpu.plan import cluster_plan

VARIANTS = (0, 1, 2, 4, 8, 16, 32, 1 | 2, 63)


def main() -> int:
    torch, _ = require_gpu()
    device, _ = device_info(torch)
    with ThreadPoolExecutor(len(VARIANTS)) as pool:
        paths = dict(zip(VARIANTS, pool.map(lambda v: cubin(BUILD_DIR / "floor", ("-DRNNPIPE_EXPERIMENT",
                                                                                    f"-DRNNPIPE_CL_SKIP={v}")),
                                           VARIANTS), strict=True))
    L = 2048
    for H in (128, 512, 1024):
        torch.manual_seed(H)
        layer = Layer.from_module("rnn", torch.nn.RNN(H, H).cuda(), "f16")
        xp = layer.input_projection(torch.randn(L, 1, H, device="cuda").half())
        h0 = torch.zeros(1, H, dtype=torch.float16, device="cuda")
        y = torch.empty(L, 1, H, dtype=torch.float16, device="cuda")
        p = cluster_plan("rnn", H, 1, L, 1, 16)
        out = []
        for v in VARIANTS:
            k = Kernels(device.smem_per_block, paths[v])

            def once(k=k, layer=layer, p=p, xp=xp, h0=h0, y=y):
                run_cluster(layer, k, p, xp, h0, y=y)

            ms = min(cuda_time(torch, once, 5))
            out.append(f"skip {v:2d}: {ms * 1000 / L:.3f}")
        print(f"rnn H={H} B=1 {p.describe()}: " + ", ".join(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
