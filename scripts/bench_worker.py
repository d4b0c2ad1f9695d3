"""The timed inner loops of scripts/bench.

One call of run_cell() runs one cell: NTHREADS workers (threads, or forked
processes with mode="process") each take every NTHREADS-th entry of the op
sequence, wait at a common start line, and time every op with
time.perf_counter_ns (CLOCK_MONOTONIC, comparable across processes).

Ops, on one key each:
  put     open(O_WRONLY|O_CREAT|O_TRUNC) + write the value + close
          raw: one pwrite at the key's offset in the preallocated file
  get     open(O_RDONLY) + read the value into a reused buffer + close
          raw: one preadv at the key's offset
  exists  stat
  delete  unlink

The result: wall time (first start to last end over all workers), every
op's latency, the bytes moved, and the number of failed ops (a failed op
is counted, not timed, and the cell goes on).
"""
import array
import math
import os
import threading
import time

OPS = ("put", "get", "exists", "delete")


def _loop(op, keys, size, idxs, raw_fd, lat, value):
    """Run op on keys[i] for i in idxs; append each latency to lat.

    keys: list of paths (files) or of byte offsets (raw_fd set).
    Returns (errors, bytes).
    """
    pc = time.perf_counter_ns
    ap = lat.append
    errors = 0
    nbytes = 0
    if op == "put":
        mv = memoryview(value)
        if raw_fd is not None:
            pw = os.pwrite
            for i in idxs:
                off = keys[i]
                t0 = pc()
                try:
                    n = pw(raw_fd, mv, off)
                    while n < size:
                        n += pw(raw_fd, mv[n:], off + n)
                except OSError:
                    errors += 1
                    continue
                ap(pc() - t0)
            return errors, len(lat) * size
        o, w, c = os.open, os.write, os.close
        fl = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        for i in idxs:
            p = keys[i]
            t0 = pc()
            try:
                fd = o(p, fl, 0o644)
                try:
                    n = w(fd, mv)
                    while n < size:
                        n += w(fd, mv[n:])
                finally:
                    c(fd)
            except OSError:
                errors += 1
                continue
            ap(pc() - t0)
        return errors, len(lat) * size
    if op == "get":
        buf = bytearray(size)
        mv = memoryview(buf)
        bufs = [mv]
        if raw_fd is not None:
            prv = os.preadv
            for i in idxs:
                off = keys[i]
                t0 = pc()
                n = prv(raw_fd, bufs, off)
                while 0 < n < size:
                    r = prv(raw_fd, [mv[n:]], off + n)
                    if r <= 0:
                        break
                    n += r
                t1 = pc()
                if n != size:
                    errors += 1
                    continue
                ap(t1 - t0)
                nbytes += n
            return errors, nbytes
        o, rv, c = os.open, os.readv, os.close
        rd = os.O_RDONLY
        for i in idxs:
            p = keys[i]
            t0 = pc()
            try:
                fd = o(p, rd)
                try:
                    n = rv(fd, bufs)
                    while 0 < n < size:
                        r = rv(fd, [mv[n:]])
                        if r <= 0:
                            break
                        n += r
                finally:
                    c(fd)
            except OSError:
                errors += 1
                continue
            t1 = pc()
            if n != size:
                errors += 1
                continue
            ap(t1 - t0)
            nbytes += n
        return errors, nbytes
    if op == "exists":
        st = os.stat
        for i in idxs:
            p = keys[i]
            t0 = pc()
            try:
                st(p)
            except OSError:
                errors += 1
                continue
            ap(pc() - t0)
        return errors, 0
    if op == "delete":
        ul = os.unlink
        for i in idxs:
            p = keys[i]
            t0 = pc()
            try:
                ul(p)
            except OSError:
                errors += 1
                continue
            ap(pc() - t0)
        return errors, 0
    raise ValueError("unknown op %r" % op)


def _slices(seq, n):
    return [seq[t::n] for t in range(n)]


def _run_threads(op, keys, size, seq, nthreads, raw_fd, value):
    parts = _slices(seq, nthreads)
    lats = [array.array("q") for _ in range(nthreads)]
    res = [None] * nthreads
    spans = [None] * nthreads
    gate = threading.Barrier(nthreads)

    def body(t):
        gate.wait()
        t0 = time.perf_counter_ns()
        res[t] = _loop(op, keys, size, parts[t], raw_fd, lats[t], value)
        spans[t] = (t0, time.perf_counter_ns())

    if nthreads == 1:
        body(0)
    else:
        ths = [threading.Thread(target=body, args=(t,)) for t in range(nthreads)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
    return lats, res, spans


def _read_full(fd):
    chunks = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def _run_procs(op, keys, size, seq, nprocs, raw_fd, value):
    parts = _slices(seq, nprocs)
    go_r, go_w = os.pipe()
    kids = []
    for t in range(nprocs):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            code = 0
            try:
                os.close(r)
                os.close(go_w)
                os.read(go_r, 1)
                lat = array.array("q")
                t0 = time.perf_counter_ns()
                err, nb = _loop(op, keys, size, parts[t], raw_fd, lat, value)
                t1 = time.perf_counter_ns()
                head = array.array("q", [t0, t1, err, nb, len(lat)])
                data = head.tobytes() + lat.tobytes()
                mv = memoryview(data)
                while mv:
                    mv = mv[os.write(w, mv):]
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        kids.append((pid, r))
    os.close(go_r)
    os.write(go_w, b"g" * nprocs)
    os.close(go_w)
    lats, res, spans = [], [], []
    pending = [pid for pid, _ in kids]
    try:
        for pid, r in kids:
            data = _read_full(r)
            os.close(r)
            os.waitpid(pid, 0)
            pending.remove(pid)
            if len(data) < 40:
                raise RuntimeError("a bench worker process failed")
            head = array.array("q")
            head.frombytes(data[:40])
            lat = array.array("q")
            lat.frombytes(data[40:])
            lats.append(lat)
            res.append((head[2], head[3]))
            spans.append((head[0], head[1]))
    except BaseException:
        # Interrupted or failed: stop our own workers before the caller unmounts.
        for pid in pending:
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except OSError:
                pass
        raise
    return lats, res, spans


def run_cell(op, keys, size, seq, nthreads=1, mode="thread", raw_path=None, value=None):
    """Run one cell; returns dict(wall_ns, lat (sorted array of ns), ops, errors, bytes)."""
    raw_fd = None
    if raw_path is not None:
        raw_fd = os.open(raw_path, os.O_RDWR)
    try:
        if value is None and op == "put":
            value = os.urandom(size)
        runner = _run_procs if (mode == "process" and nthreads > 1) else _run_threads
        lats, res, spans = runner(op, keys, size, seq, nthreads, raw_fd, value)
    finally:
        if raw_fd is not None:
            os.close(raw_fd)
    lat = array.array("q")
    for a in lats:
        lat.extend(a)
    lat = array.array("q", sorted(lat))
    errors = sum(r[0] for r in res)
    nbytes = sum(r[1] for r in res)
    wall = max(s[1] for s in spans) - min(s[0] for s in spans)
    return {"wall_ns": wall, "lat": lat, "ops": len(lat), "errors": errors, "bytes": nbytes}


def percentile(sorted_lat, q):
    """Nearest-rank percentile of a sorted sequence (q in 0..100)."""
    if not sorted_lat:
        return float("nan")
    k = max(0, min(len(sorted_lat) - 1, math.ceil(q / 100.0 * len(sorted_lat)) - 1))
    return sorted_lat[k]
