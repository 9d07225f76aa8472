"""loader.py - a real PyTorch input pipeline with a known ground truth.

    loader.py make DIR N                    create N files of 2-16 KiB (fixed seed)
    loader.py run DIR N EPOCHS WORKERS      DataLoader(num_workers=WORKERS, batch_size=32)
                                            over a Dataset that reads one file per item

`run` prints one JSON line: the files opened and bytes read by the Dataset (what
the workload did, counted by itself), the pids of the worker processes that
served the items, and the main process's pid. Used by tests/e2e/test_torch.c;
run with Debian's /usr/bin/python3 (python3-torch).
"""
import json
import os
import random
import sys


def make(d, n):
    os.makedirs(d, exist_ok=True)
    rng = random.Random(1234)
    total = 0
    for i in range(n):
        size = rng.randint(2048, 16384)
        with open(os.path.join(d, "s%05d.bin" % i), "wb") as f:
            f.write((bytes(range(256)) * 65)[i % 256:i % 256 + size])
        total += size
    print(json.dumps({"files": n, "bytes": total}))


def run(d, n, epochs, workers):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Files(Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            with open(os.path.join(d, "s%05d.bin" % i), "rb") as f:
                data = f.read()
            return torch.tensor(len(data)), torch.tensor(os.getpid())

    loader = DataLoader(Files(), batch_size=32, num_workers=workers, shuffle=True)
    opened = nbytes = 0
    pids = set()
    for _ in range(epochs):
        for sizes, wpids in loader:
            opened += len(sizes)
            nbytes += int(sizes.sum())
            pids.update(int(p) for p in wpids)
    print(json.dumps({"opens": opened, "bytes": nbytes, "worker_pids": sorted(pids), "main_pid": os.getpid()}))
    sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]))
    else:
        run(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
