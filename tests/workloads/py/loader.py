"""loader.py - a real PyTorch input pipeline with a known ground truth.

    loader.py make DIR N                    create N files of 2-16 KiB (fixed seed)
    loader.py tiny DIR N                    create N files of 256-704 bytes (t00000...)
    loader.py run DIR N EPOCHS WORKERS      DataLoader(num_workers=WORKERS, batch_size=32)
                                            over a Dataset that reads one file per item
    loader.py epochs DIR N EPOCHS WORKERS PERSISTENT STARTUP_MS BATCH
                                            the same Dataset for EPOCHS epochs of N/BATCH
                                            steps, persistent_workers=PERSISTENT (0/1), a
                                            worker_init_fn that spins STARTUP_MS, about
                                            10 ms of host work per step, stepprof_step()
                                            (through ctypes, when the preload is there)
                                            before each step's batch is fetched
    loader.py cpu DIR N STEPS WORKERS BATCH [CUDART]
                                            an input pipeline bound by a CPU-heavy
                                            transform: each item reads one file of
                                            `make` (item i: file i mod N), then runs 10
                                            96x96 matrix products and tanh on it
                                            (about 6 ms of CPU on one core)
    loader.py smallfiles DIR N STEPS WORKERS BATCH PER_ITEM [CUDART]
                                            an input pipeline bound by file calls: each
                                            item stats, opens, reads and closes PER_ITEM
                                            files of `tiny` (os.stat/open/read/close),
                                            with no transform

`cpu` and `smallfiles` run STEPS steps of BATCH items with
DataLoader(num_workers=WORKERS, persistent_workers=True), a worker_init_fn that
sets torch.set_num_threads(1) (a worker uses one core), the iterator (the
workers' start) created in the first step, stepprof_step() (through ctypes, when the preload is there) before each step's
batch is fetched and a short step of the main process: with CUDART (the path of
a libcudart.so, the simulated GPU's in the tests), a 2 MiB cudaMemcpy from
pageable memory to the device, then host work up to 6 ms in all; without it,
6 ms of host work. The workers need longer for a batch than the main process
for a step, so the loop waits for its input.

`run` prints one JSON line: the files opened and bytes read by the Dataset (what
the workload did, counted by itself), the pids of the worker processes that
served the items, and the main process's pid. `epochs` prints one JSON line too:
the steps, the steps whose batch came from workers created for it (a new
iterator's workers: every epoch's first step without persistent workers, the
first step only with them), the pids that served each epoch and each step's
wall time. `cpu` and `smallfiles` print one JSON line of what the workers did, as
each item measured it (time.perf_counter around its file calls and around the
transform, time.process_time around the transform), per worker pid (`workers`)
and in all (`file_ms`, `transform_ms`, `transform_cpu_ms`, `getitem_ms`: the
whole of __getitem__), with each step's wall time, its wait for the batch
(`wait_ms`: next() on the iterator, which also takes the batch over from the
worker) and its own work (`work_ms`).
Used by tests/e2e/test_torch.c;
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


def tiny(d, n):
    os.makedirs(d, exist_ok=True)
    total = 0
    for i in range(n):
        size = 256 + (i % 8) * 64
        with open(os.path.join(d, "t%05d" % i), "wb") as f:
            f.write(bytes([i % 256]) * size)
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


def split_dataset(mode, d, n, length, per_item):
    """The Dataset of `cpu` and `smallfiles`: each item returns a value of its data,
    the serving pid and the ns its file calls, its transform (wall and CPU) and
    the whole of __getitem__ took, as the item measured them."""
    import torch
    from torch.utils.data import Dataset

    w = torch.linspace(-0.02, 0.02, 96 * 96).reshape(96, 96)

    def transform(data):
        v = torch.tensor(list(data[:96]), dtype=torch.float32) / 255.0
        x = torch.outer(v, v)
        for _ in range(10):
            x = torch.tanh(x @ w + x)
        return x.sum() * 1000

    class Split(Dataset):
        def __len__(self):
            return length

        def __getitem__(self, i):
            g0 = time.perf_counter()
            file_s = tr_s = tr_cpu = 0.0
            if mode == "cpu":
                t = time.perf_counter()
                fd = os.open(os.path.join(d, "s%05d.bin" % (i % n)), os.O_RDONLY)
                data = os.read(fd, 16384)  # the files of `make` hold at most 16 KiB
                os.close(fd)
                file_s = time.perf_counter() - t
                t, c = time.perf_counter(), time.process_time()
                value = transform(data)
                tr_s, tr_cpu = time.perf_counter() - t, time.process_time() - c
            else:
                value = 0
                for k in range(per_item):
                    p = os.path.join(d, "t%05d" % ((i * per_item + k) % n))
                    t = time.perf_counter()
                    os.stat(p)
                    fd = os.open(p, os.O_RDONLY)
                    value += len(os.read(fd, 4096))
                    os.close(fd)
                    file_s += time.perf_counter() - t
            g = time.perf_counter() - g0
            # one tensor per item, so one per batch crosses to the main process
            return torch.tensor([int(value), os.getpid(), int(file_s * 1e9), int(tr_s * 1e9), int(tr_cpu * 1e9),
                                 int(g * 1e9)], dtype=torch.int64)

    return Split()


def split(mode, d, n, nsteps, workers, batch, per_item, cudart):
    # the modules a DataLoader's first iterator imports in the main process, at
    # set-up: the first step then holds no import of the main process (18 stats
    # and opens that would count in its metadata operations)
    import multiprocessing.popen_fork  # noqa: F401
    import multiprocessing.queues  # noqa: F401
    import multiprocessing.synchronize  # noqa: F401
    import torch
    from torch.utils.data import DataLoader

    def init(_):
        torch.set_num_threads(1)

    gpu = None
    if cudart:
        # the main process's step on the device: a pageable host-to-device copy
        gpu = ctypes.CDLL(cudart)
        dev = ctypes.c_void_p()
        host = ctypes.create_string_buffer(2 << 20)
        if gpu.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(2 << 20)) != 0:
            sys.exit("cudaMalloc failed")
    loader = DataLoader(split_dataset(mode, d, n, nsteps * batch, per_item), batch_size=batch,
                        num_workers=workers, shuffle=False, persistent_workers=True, worker_init_fn=init)
    step = getattr(ctypes.CDLL(None), "stepprof_step", None)
    per = {}
    walls, waits, works = [], [], []
    it = None
    for k in range(nsteps):
        t0 = time.perf_counter()
        if step:
            step()
        if k == 0:
            it = iter(loader)  # as `for batch in loader` does before its first batch
        rows = next(it)
        t1 = time.perf_counter()
        for _, pid, file_ns, tr_ns, tr_cpu_ns, get_ns in rows.tolist():
            w = per.setdefault(pid, [0, 0, 0, 0, 0])
            w[0] += 1
            w[1] += file_ns
            w[2] += tr_ns
            w[3] += tr_cpu_ns
            w[4] += get_ns
        if gpu:
            if gpu.cudaMemcpy(dev, host, ctypes.c_size_t(2 << 20), 1) != 0:  # cudaMemcpyHostToDevice
                sys.exit("cudaMemcpy failed")
        spin(0.006 - (time.perf_counter() - t1))  # the step's own work: 6 ms in all
        t2 = time.perf_counter()
        waits.append(round((t1 - t0) * 1000, 3))
        works.append(round((t2 - t1) * 1000, 3))
        walls.append(round((t2 - t0) * 1000, 3))
    if step:
        step()  # closes the last step
    if gpu:
        gpu.cudaFree(dev)
    it = None

    def ms(ns):
        return round(ns / 1e6, 3)

    rows = [{"pid": p, "items": w[0], "file_ms": ms(w[1]), "transform_ms": ms(w[2]), "transform_cpu_ms": ms(w[3]),
             "getitem_ms": ms(w[4])} for p, w in sorted(per.items())]
    print(json.dumps({"mode": mode, "steps": nsteps, "batch": batch, "items": sum(w[0] for w in per.values()),
                      "files_per_item": 1 if mode == "cpu" else per_item, "cuda": bool(gpu),
                      "file_ms": ms(sum(w[1] for w in per.values())),
                      "transform_ms": ms(sum(w[2] for w in per.values())),
                      "transform_cpu_ms": ms(sum(w[3] for w in per.values())),
                      "getitem_ms": ms(sum(w[4] for w in per.values())),
                      "workers": rows, "wall_ms": walls, "wait_ms": waits, "work_ms": works,
                      "main_pid": os.getpid()}))
    sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "tiny":
        tiny(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "cpu":
        a = sys.argv[2:]
        split("cpu", a[0], int(a[1]), int(a[2]), int(a[3]), int(a[4]), 0, a[5] if len(a) > 5 else None)
    elif sys.argv[1] == "smallfiles":
        a = sys.argv[2:]
        split("smallfiles", a[0], int(a[1]), int(a[2]), int(a[3]), int(a[4]), int(a[5]),
              a[6] if len(a) > 6 else None)
    elif sys.argv[1] == "epochs":
        epochs(sys.argv[2], *(int(a) for a in sys.argv[3:9]))
    else:
        run(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
