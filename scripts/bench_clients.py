"""Replays of the file I/O of KV-cache clients, for scripts/bench's clients mode.

Each class below does, per key, the system calls one client does on a
filesystem it offloads KV blocks to, written from the client's public code
(the repository, file, commit and line of each op are cited next to it).
The calls are made from Python with the same flags, order and buffer
sizes; where a client is written in Python, its own calls (open(), os.*)
are used, so the extra fstat(2) of Python's open() is part of the replay.

Phases, each timed over all keys, one worker:
  put         the client's store of one block (its own existence check
              first where it does one, temp file and rename where it uses
              them, O_DIRECT where it uses it)
  get_after_put  the client's load of the blocks it just put, on each
              target right after its own puts, in their order
  exists_put  the client's existence check, right after the puts
  get_cold    the client's load of one block, after the page cache is dropped
  get_warm    the same again
  exists_get  the existence check after the gets
  delete      unlink (the client's eviction, or the storage-side cleanup
              for clients that leave it to the storage)
A client whose existence check does not touch the filesystem (an index in
memory) has no exists phases.  O_DIRECT is probed once per target the way
vLLM does (an aligned one-page write); where it fails, a client that falls
back does so, and one that does not is skipped on that target.
"""
import errno
import mmap
import os
import random
import threading
import time
import uuid

O_DIRECT = getattr(os, "O_DIRECT", 0)
PHASES = ("put", "exists_put", "get_cold", "get_warm", "exists_get", "delete")
# Run by scripts/bench beside put (on each target right after it), not as a phase of its own.
EXTRA_PHASES = ("get_after_put",)
REPORT_PHASES = ("put", "get_after_put", "exists_put", "get_cold", "get_warm", "exists_get", "delete")
REFS = "LMCache/LMCache@005121ac (local disk), LMCache/LMCache@0219539f (fs connector), " \
       "sgl-project/sglang@001067ff, vllm-project/vllm@0320ab4d, " \
       "llm-d/llm-d-kv-cache-manager@3492df93 and @37a20604, kvcache-ai/Mooncake@3b5a5941"


def aligned(size):
    """A page-aligned buffer of size bytes (O_DIRECT needs aligned memory)."""
    return mmap.mmap(-1, max(size, mmap.PAGESIZE))


def o_direct_error(directory):
    """None if O_DIRECT works in directory, else which call failed and why:
    vllm/v1/kv_offload/tiering/fs/io.py probe_o_direct() (line 29) creates a
    file with O_DIRECT, writes one aligned page, closes and removes it."""
    if not O_DIRECT:
        return "no O_DIRECT"
    path = os.path.join(directory, ".o_direct_probe")
    page = aligned(mmap.PAGESIZE)
    step = "open"
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | O_DIRECT, 0o644)
        try:
            step = "write"
            os.write(fd, page)
        finally:
            os.close(fd)
        return None
    except OSError as e:
        return "%s: %s" % (step, errno.errorcode.get(e.errno, str(e.errno)))
    finally:
        page.close()
        try:
            os.remove(path)
        except OSError:
            pass


def _write_all(fd, mv):
    n = os.write(fd, mv)
    while n < len(mv):
        n += os.write(fd, mv[n:])


class Client:
    """One client's ops on keys 0..n-1 under root (a directory on a target)."""
    name = "?"
    o_direct = False        # uses O_DIRECT
    falls_back = True       # buffered I/O where O_DIRECT fails (else: skipped there)
    has_exists = True       # its existence check is a filesystem call

    def __init__(self, root, n, size, value, o_direct_ok):
        self.root = root
        self.size = size
        self.direct = self.o_direct and o_direct_ok
        self.val = aligned(size)
        self.val[:size] = value[:size]
        self.vmv = memoryview(self.val)[:size]
        self.buf = aligned(size)
        self.bmv = memoryview(self.buf)[:size]
        # Block hashes as file names, as every client uses.
        self.keys = ["%016x" % random.Random(i).getrandbits(64) for i in range(n)]
        self.setup()

    def setup(self):
        os.makedirs(self.root, exist_ok=True)

    def close(self):
        self.vmv.release()
        self.bmv.release()
        self.val.close()
        self.buf.close()


class SGLangHiCacheFile(Client):
    """sgl-project/sglang python/sglang/srt/mem_cache/hicache_storage.py
    (commit 001067ff), class HiCacheFile, with its metadata cache off (with it
    on, exists() answers from memory for the keys it has seen)."""
    name = "sglang"

    def setup(self):
        super().setup()
        # _get_suffixed_key(): key + "_" + model + "_" + tp_rank + "_" + tp_size, then ".bin"
        self.paths = [os.path.join(self.root, "%s_model_0_1.bin" % k) for k in self.keys]

    def put(self, i):
        p = self.paths[i]
        # HiCacheFile.set(): "if self.exists(key)" first, which is os.path.exists(tensor_path)
        if os.path.exists(p):
            return
        # set(): tmp_path = f"{tensor_path}.tmp.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex}"
        tmp = "%s.tmp.%d.%d.%s" % (p, os.getpid(), threading.get_ident(), uuid.uuid4().hex)
        # numpy tofile(tmp_path): fopen("wb") (O_WRONLY|O_CREAT|O_TRUNC, 0666), stdio's
        # fstat for its buffer size, one fwrite of the block (larger than the buffer), fclose
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            os.fstat(fd)
            _write_all(fd, self.vmv)
        finally:
            os.close(fd)
        # set(): os.replace(tmp_path, tensor_path)
        os.replace(tmp, p)

    def exists(self, i):
        # HiCacheFile.exists(): os.path.exists(tensor_path)
        return os.path.exists(self.paths[i])

    def get(self, i):
        # HiCacheFile.get(): with open(tensor_path, "rb", buffering=0) as f: f.readinto(buf)
        with open(self.paths[i], "rb", buffering=0) as f:
            if f.readinto(self.bmv) != self.size:
                raise OSError("short read")

    def delete(self, i):
        # HiCacheFile.clear() and its LRU evictor remove files with os.remove
        os.remove(self.paths[i])


class LMCacheLocalDisk(Client):
    """LMCache/LMCache lmcache/v1/storage_backend/local_disk_backend.py
    (commit 005121ac), class LocalDiskBackend, use_odirect off (the default)."""
    name = "lmcache-disk"
    # contains() looks the key up in self.dict (in memory): no filesystem call
    has_exists = False

    def setup(self):
        super().setup()
        # _key_to_path(): key.to_string().replace("/", "-") + ".pt"
        self.paths = [os.path.join(self.root, "vllm@model@1@0@%s.pt" % k) for k in self.keys]
        # write_file()/read_file() use O_DIRECT only if size % statvfs().f_bsize == 0
        self.direct = self.direct and self.size % os.statvfs(self.root).f_bsize == 0

    def put(self, i):
        if self.direct:
            # write_file(): os.open(path, O_CREAT | O_WRONLY | O_DIRECT, 0o644), os.write, os.close
            fd = os.open(self.paths[i], os.O_CREAT | os.O_WRONLY | O_DIRECT, 0o644)
            try:
                _write_all(fd, self.vmv)
            finally:
                os.close(fd)
        else:
            # write_file(): with open(path, "wb") as f: f.write(buffer)
            with open(self.paths[i], "wb") as f:
                f.write(self.vmv)

    def get(self, i):
        if self.direct:
            # read_file(): fd = os.open(path, O_RDONLY | O_DIRECT);
            # with os.fdopen(fd, "rb", buffering=0) as fdo: fdo.readinto(buffer)
            fd = os.open(self.paths[i], os.O_RDONLY | O_DIRECT)
            with os.fdopen(fd, "rb", buffering=0) as f:
                if f.readinto(self.bmv) != self.size:
                    raise OSError("short read")
        else:
            # read_file(): with open(path, "rb") as f: f.readinto(buffer)
            with open(self.paths[i], "rb") as f:
                if f.readinto(self.bmv) != self.size:
                    raise OSError("short read")

    def delete(self, i):
        # remove(): os.remove(path)
        os.remove(self.paths[i])


class LMCacheLocalDiskODirect(LMCacheLocalDisk):
    """The same with extra_config {"use_odirect": True} (LMCache's
    local_storage docs recommend it when CPU memory is short).  LMCache
    does not probe: where O_DIRECT fails its puts fail, so it is skipped."""
    name = "lmcache-disk-odirect"
    o_direct = True
    falls_back = False


class LMCacheFS(Client):
    """LMCache/LMCache lmcache/v1/storage_backend/connector/fs_connector.py
    (commit 0219539f), class FSConnector (save_chunk_meta: a 28-byte header
    before the data)."""
    name = "lmcache-fs"
    META = 28  # METADATA_BYTES_LEN

    def setup(self):
        super().setup()
        # _get_file_name(): key.to_string().replace("/", "-") + ".data"; _get_file_and_tmp_path():
        # without relative_tmp_dir, tmp_path = file_path.with_suffix(".tmp")
        self.paths = [os.path.join(self.root, "vllm@model@1@0@%s.data" % k) for k in self.keys]
        self.tmps = [p[:-len(".data")] + ".tmp" for p in self.paths]
        self.meta = bytes(self.META)
        self.md = bytearray(self.META)

    def put(self, i):
        # put(): async with aiofiles.open(temp_path, "wb") as f: write(metadata), write(buffer)
        with open(self.tmps[i], "wb") as f:
            f.write(self.meta)
            f.write(self.vmv)
        # put(): await aiofiles.os.replace(temp_path, final_path)
        os.replace(self.tmps[i], self.paths[i])

    def exists(self, i):
        # exists_sync(): os.path.exists(file_path) (exists(): aiofiles.os.path.exists)
        return os.path.exists(self.paths[i])

    def get(self, i):
        # get(): aiofiles.open(file_path, "rb"); readinto(md_buffer of 28 bytes); readinto(buffer)
        with open(self.paths[i], "rb") as f:
            if f.readinto(self.md) != self.META or f.readinto(self.bmv) != self.size:
                raise OSError("short read")

    def delete(self, i):
        # remove_sync(): os.remove(file_path)
        os.remove(self.paths[i])


class VLLMFs(Client):
    """vllm-project/vllm vllm/v1/kv_offload/tiering/fs/io.py (commit 0320ab4d),
    store_block() and load_block() with use_o_direct=True (their default)."""
    name = "vllm-fs"
    o_direct = True

    def setup(self):
        super().setup()
        self.paths = [os.path.join(self.root, "blocks", k) for k in self.keys]
        os.makedirs(os.path.join(self.root, "blocks"), exist_ok=True)
        # _get_tmp_suffix() (line 25): f"_{random.randint(0, 2**63 - 1)}.tmp", one per thread
        self.suffix = "_%d.tmp" % random.randint(0, 2 ** 63 - 1)

    def put(self, i):
        p = self.paths[i]
        # store_block() line 73: if os.path.exists(dest_path): return
        if os.path.exists(p):
            return
        tmp = p + self.suffix
        # line 78: _ensure_dirs(dest_path): os.makedirs(os.path.dirname(path), exist_ok=True)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        # lines 85-98: os.open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_TRUNC | O_DIRECT, 0o644),
        # one os.write, os.close, os.replace(tmp_path, dest_path)
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC |
                     (O_DIRECT if self.direct else 0), 0o644)
        try:
            if os.write(fd, self.vmv) < self.size:
                raise OSError("short write")
        finally:
            os.close(fd)
        os.replace(tmp, p)

    def exists(self, i):
        # the same check as store_block() line 73
        return os.path.exists(self.paths[i])

    def get(self, i):
        # load_block() lines 121-122: os.open(source_path, O_RDONLY | O_DIRECT); os.readv(fd, [view])
        fd = os.open(self.paths[i], os.O_RDONLY | (O_DIRECT if self.direct else 0))
        try:
            if os.readv(fd, [self.bmv]) < self.size:
                raise OSError("short read")
        finally:
            os.close(fd)

    def delete(self, i):
        os.remove(self.paths[i])


class LLMDFs(Client):
    """llm-d/llm-d-kv-cache-manager kv_connectors/llmd_fs_backend:
    src/csrc/storage/file_io.cpp (commit 3492df93) for the I/O,
    src/llmd_fs_backend/manager.py (commit 37a20604) for the lookup."""
    name = "llm-d-fs"

    def setup(self):
        super().setup()
        self.dir = os.path.join(self.root, "model", "tp_1_rank_0")
        os.makedirs(self.dir, exist_ok=True)
        self.paths = [os.path.join(self.dir, k + ".bin") for k in self.keys]

    def put(self, i):
        p = self.paths[i]
        # write_file_to_disk() line 43: fs::create_directories(parent_dir), which
        # stats the directory and stops there when it exists
        os.stat(self.dir)
        # line 51: tmp_path = target_path + std::to_string(thread_stream_idx) + ".tmp."
        tmp = p + "0.tmp."
        # lines 56-73: std::ofstream(tmp, out | binary) (O_WRONLY|O_CREAT|O_TRUNC, 0666) with
        # a 1 MiB buffer: a block up to 1 MiB leaves in one write(2) at ofs.close()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            _write_all(fd, self.vmv)
        finally:
            os.close(fd)
        # line 76: std::rename(tmp_path, target_path)
        os.rename(tmp, p)

    def exists(self, i):
        # manager.py lookup() line 73: os.path.exists(file_path)
        return os.path.exists(self.paths[i])

    def get(self, i):
        # read_file_from_disk() lines 88-108: std::ifstream(path, in | binary | ate):
        # open, seek to the end (tellg gives the size), seek to 0, one read, close
        fd = os.open(self.paths[i], os.O_RDONLY)
        try:
            os.lseek(fd, 0, os.SEEK_END)
            os.lseek(fd, 0, os.SEEK_SET)
            if os.readv(fd, [self.bmv]) < self.size:
                raise OSError("short read")
        finally:
            os.close(fd)

    def delete(self, i):
        # the backend leaves cleanup to the storage (its README, "Storage Cleanup")
        os.remove(self.paths[i])


class MooncakeFilePerKey(Client):
    """kvcache-ai/Mooncake mooncake-store/src/storage_backend.cpp (commit
    3b5a5941), StorageBackend / StorageBackendAdaptor (file per key), built
    without io_uring (its O_DIRECT reads, lines 944-948, need USE_URING)."""
    name = "mooncake-fpk"

    def setup(self):
        super().setup()
        self.paths = [os.path.join(self.root, k) for k in self.keys]

    def put(self, i):
        # StoreObject() line 471 -> create_file(path, FileMode::Write) line 930:
        # open(path, O_CLOEXEC | O_WRONLY | O_CREAT | O_TRUNC, 0644) (line 952), write, close
        fd = os.open(self.paths[i], os.O_CLOEXEC | os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, self.vmv)
        finally:
            os.close(fd)

    def exists(self, i):
        # StorageBackendAdaptor::IsExist() line 1537: fs::exists(path)
        return os.path.exists(self.paths[i])

    def get(self, i):
        # LoadObject() line 582: create_file(path, FileMode::Read) (O_CLOEXEC | O_RDONLY),
        # vector_read (preadv) of the slices at offset 0, close
        fd = os.open(self.paths[i], os.O_CLOEXEC | os.O_RDONLY)
        try:
            if os.preadv(fd, [self.bmv], 0) < self.size:
                raise OSError("short read")
        finally:
            os.close(fd)

    def delete(self, i):
        # RemoveFile() line 685: fs::remove(path) (line 727)
        os.remove(self.paths[i])


CLIENTS = [SGLangHiCacheFile, LMCacheLocalDisk, LMCacheLocalDiskODirect, LMCacheFS,
           VLLMFs, LLMDFs, MooncakeFilePerKey]
CLIENT_NAMES = [c.name for c in CLIENTS]


def by_name(name):
    for c in CLIENTS:
        if c.name == name:
            return c
    raise KeyError(name)


def phase_fn(client, phase):
    """The callable for phase, or None if the client has no such phase."""
    if phase.startswith("exists"):
        return client.exists if client.has_exists else None
    if phase.startswith("get"):
        return client.get
    return getattr(client, phase)


def run_phase(fn, seq):
    """Run fn(i) for i in seq, one worker; returns (ops, errors, wall_ns).
    A failed op is counted, not timed as a success, and the phase goes on."""
    pc = time.perf_counter_ns
    ops = errors = 0
    t0 = pc()
    for i in seq:
        try:
            fn(i)
            ops += 1
        except OSError:
            errors += 1
    return ops, errors, pc() - t0
