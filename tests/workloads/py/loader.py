"""loader.py - a real PyTorch input pipeline with a known ground truth.

    loader.py make DIR N                    create N files of 2-16 KiB (fixed seed)
    loader.py run DIR N EPOCHS WORKERS      DataLoader(num_workers=WORKERS, batch_size=32)
                                            over a Dataset that reads one file per item
    loader.py epochs DIR N EPOCHS WORKERS PERSISTENT STARTUP_MS BATCH
                                            the same Dataset for EPOCHS epochs of N/BATCH
                                            steps, persistent_workers=PERSISTENT (0/1), a
                                            worker_init_fn that spins STARTUP_MS, about
                                            10 ms of host work per step, stepprof_step()
                                            (through ctypes, when the preload is there)
                                            before each step's batch is fetched

`run` prints one JSON line: the files opened and bytes read by the Dataset (what
the workload did, counted by itself), the pids of the worker processes that
served the items, and the main process's pid. `epochs` prints one JSON line too:
the steps, the steps whose batch came from workers created for it (a new
iterator's workers: every epoch's first step without persistent workers, the
first step only with them), the pids that served each epoch and each step's
wall time. Used by tests/e2e/test_torch.c;
run with Debian's /usr/bin/python3 (python3-torch).
"""
import ctypes
import json
import os
import random
import sys
import time


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


def files_dataset(d, n):
    """A Dataset that reads one file per item: (its size, the reading process's pid)."""
    import torch
    from torch.utils.data import Dataset

    class Files(Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            with open(os.path.join(d, "s%05d.bin" % i), "rb") as f:
                data = f.read()
            return torch.tensor(len(data)), torch.tensor(os.getpid())

    return Files()


def run(d, n, epochs, workers):
    from torch.utils.data import DataLoader

    loader = DataLoader(files_dataset(d, n), batch_size=32, num_workers=workers, shuffle=True)
    opened = nbytes = 0
    pids = set()
    for _ in range(epochs):
        for sizes, wpids in loader:
            opened += len(sizes)
            nbytes += int(sizes.sum())
            pids.update(int(p) for p in wpids)
    print(json.dumps({"opens": opened, "bytes": nbytes, "worker_pids": sorted(pids), "main_pid": os.getpid()}))
    sys.stdout.flush()


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def epochs(d, n, nepochs, workers, persistent, startup_ms, batch):
    from torch.utils.data import DataLoader

    def init(_):
        spin(startup_ms / 1000.0)  # imports, building the dataset: CPU work before the first batch

    loader = DataLoader(files_dataset(d, n), batch_size=batch, num_workers=workers, shuffle=False,
                        persistent_workers=persistent, worker_init_fn=init)
    step = getattr(ctypes.CDLL(None), "stepprof_step", None)
    steps, started, walls, by_epoch = 0, [], [], []
    it, seen = None, set()
    for e in range(nepochs):
        pids = set()
        for k in range(len(loader)):
            t0 = time.perf_counter()
            if step:
                step()
            if k == 0:
                # iter(loader) inside the epoch's first step, as `for batch in loader` does
                # before its first batch: a new iterator's workers, or the persistent ones
                it = iter(loader)
            sizes, wpids = next(it)
            new = {int(p) for p in wpids} - seen
            if k == 0 and new:
                started.append(steps)
            seen.update(int(p) for p in wpids)
            pids.update(int(p) for p in wpids)
            spin(0.010)  # the step's own work
            walls.append(round((time.perf_counter() - t0) * 1000, 3))
            steps += 1
        by_epoch.append(sorted(pids))
    if step:
        step()  # closes the last step
    it = None
    print(json.dumps({"steps": steps, "epochs": nepochs, "persistent": bool(persistent),
                      "workers_started": started, "worker_pids_by_epoch": by_epoch,
                      "wall_ms": walls, "main_pid": os.getpid()}))
    sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "epochs":
        epochs(sys.argv[2], *(int(a) for a in sys.argv[3:9]))
    else:
        run(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
