#!/usr/bin/env python3
"""launch_bound.py - a launch-bound PyTorch training loop for scripts/gpu-check.sh.

A deep, narrow MLP (--layers Linear+ReLU layers of width --width, batch --batch)
trains with SGD on data already on the device: each step launches hundreds of
small kernels (forward, backward, optimizer), each a few microseconds on a GPU,
so the step time is the host's launch rate, the job a profiler must not slow down
(STEPPROF_KERNEL_TIMING=auto against all, docs/cuda-capture.md). No input, no copy
but the loss read back every --log-every steps (.item()).

Each step is wrapped in an NVTX range "train_step" on a GPU (stepprof's iteration
source is then exact) and timed by the loop itself, after a cuda.synchronize at its
end (as a loop that logs its loss would). Prints one JSON line: steps, the median
and quartiles of the step times after --warmup steps, the device.

Usage: launch_bound.py [--device cuda|cpu] [--steps 300] [--warmup 20]
                       [--layers 24] [--width 64] [--batch 16] [--log-every 10]
"""
import argparse
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--log-every", type=int, default=10)
    a = ap.parse_args()
    dev = torch.device(a.device)
    torch.manual_seed(0)
    mods = []
    for _ in range(a.layers):
        mods += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(a.batch, a.width, device=dev)
    y = torch.randn(a.batch, a.width, device=dev)
    cuda = dev.type == "cuda"
    times = []
    for i in range(a.steps):
        t0 = time.perf_counter()
        if cuda:
            torch.cuda.nvtx.range_push("train_step")
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if a.log_every and i % a.log_every == 0:
            loss.item()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
        times.append(time.perf_counter() - t0)
    warm = sorted(times[a.warmup:]) or sorted(times)
    q = lambda f: warm[min(len(warm) - 1, int(f * len(warm)))] * 1e3
    print(json.dumps({"steps": a.steps, "device": str(dev), "layers": a.layers, "width": a.width,
                      "step_ms_median": statistics.median(warm) * 1e3, "step_ms_q1": q(0.25),
                      "step_ms_q3": q(0.75)}))


if __name__ == "__main__":
    main()
