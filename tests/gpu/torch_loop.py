#!/usr/bin/env python3
"""torch_loop.py - the short PyTorch training loop of scripts/gpu-check.sh.

A DataLoader with --workers processes reads --files small files (one per item,
created here in --data when missing), batches of --batch items go to the device
(from pinned memory with non_blocking=True when --pin, else pageable), and a
small MLP trains for --iters iterations. Each iteration is wrapped in an NVTX
range "train_step" (torch.cuda.nvtx, on a GPU; --mark api: stepprof_step()
through ctypes, for CPU runs) so stepprof's iteration source is exact, and its
wall time is measured by the loop itself.

Prints one JSON line of ground truth: iterations, files and bytes read, the
median step time (after the first 3 iterations), the device.

Usage: torch_loop.py --data DIR [--device cuda|cpu] [--pin 0|1] [--iters 30]
                     [--files 2000] [--batch 64] [--workers 4] [--mark auto|nvtx|api|none]
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Files(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            raw = f.read()
        x = torch.frombuffer(bytearray(raw[:1024]), dtype=torch.float32)[:256].clone()
        x = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0).clamp(-1, 1)
        return x, len(raw)


def make_files(d, n):
    os.makedirs(d, exist_ok=True)
    paths = []
    for i in range(n):
        p = os.path.join(d, "s%05d.bin" % i)
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(os.urandom(4096 + 64 * (i % 64)))
        paths.append(p)
    return paths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--pin", type=int, default=1)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--mark", default="auto", choices=("auto", "nvtx", "api", "none"))
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        print("torch_loop: no CUDA device visible to torch", file=sys.stderr)
        return 1
    paths = make_files(a.data, a.files)
    dev = torch.device(a.device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Files(paths), batch_size=a.batch, shuffle=False, num_workers=a.workers,
                        pin_memory=bool(a.pin) and a.device == "cuda", drop_last=True)
    cuda = a.device == "cuda"
    mark = a.mark if a.mark != "auto" else ("nvtx" if cuda else "api")
    nvtx = torch.cuda.nvtx if mark == "nvtx" else None
    step = getattr(ctypes.CDLL(None), "stepprof_step", None) if mark == "api" else None
    steps, files, nbytes = [], 0, 0
    it = None  # made inside the first iteration: the workers' first reads fall in it
    t_prev = time.perf_counter()
    for i in range(a.iters):
        if nvtx:
            nvtx.range_push("train_step")
        if step:
            step()
        if it is None:
            it = iter(loader)
        try:
            x, sizes = next(it)
        except StopIteration:
            it = iter(loader)
            x, sizes = next(it)
        files += len(sizes)
        nbytes += int(sizes.sum())
        x = x.to(dev, non_blocking=bool(a.pin))
        y = torch.zeros(x.shape[0], dtype=torch.long, device=dev)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        lv = loss.item()  # a D2H copy and a sync: the step ends when the GPU is done
        if nvtx:
            nvtx.range_pop()
        t = time.perf_counter()
        steps.append(t - t_prev)
        t_prev = t
    if step:
        step()  # the start of the next iteration ends the last one
    warm = steps[3:] if len(steps) > 5 else steps
    print(json.dumps({"iters": a.iters, "files": files, "bytes": nbytes, "pin": a.pin, "device": a.device,
                      "workers": a.workers, "step_ms_median": statistics.median(warm) * 1e3,
                      "loss": round(lv, 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
