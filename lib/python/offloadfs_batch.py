"""offloadfs_batch: many keys of an offloadfs tenant per call (ctypes over
liboffloadfs_batch; docs/batch.md).  Standard library only.

    import offloadfs_batch as ob
    t = ob.Tenant("/mnt/mooncake-offload/t1")
    t.put_many(["a/k0", "a/k1"], [b"x" * 131072, b"y" * 131072])
    bufs = [bytearray(131072), bytearray(131072)]
    sizes = t.get_many(["a/k0", "a/k1"], bufs)      # sizes, or raises
    t.exists_many(["a/k0", "nope"])                  # [True, False]
    t.delete_many(["a/k0", "a/k1"])

Each call raises OSError for the first key that failed; the *_errs variants
return a list of 0 or negative errno values per key instead.
"""
import ctypes
import ctypes.util
import errno
import os

SYNC = 1

_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    names = [os.environ.get("OFFLOADFS_BATCH_LIB"), "liboffloadfs_batch.so.1",
             ctypes.util.find_library("offloadfs_batch")]
    last = None
    for name in names:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name, use_errno=True)
            break
        except OSError as e:
            last = e
    else:
        raise OSError(errno.ENOENT, "liboffloadfs_batch not found (set OFFLOADFS_BATCH_LIB): %s" % last)
    c_char_pp = ctypes.POINTER(ctypes.c_char_p)
    sz_p = ctypes.POINTER(ctypes.c_size_t)
    int_p = ctypes.POINTER(ctypes.c_int)
    vp_p = ctypes.POINTER(ctypes.c_void_p)
    lib.offloadfs_put_many.argtypes = [ctypes.c_char_p, c_char_pp, vp_p, sz_p, ctypes.c_size_t,
                                       ctypes.c_int, int_p]
    lib.offloadfs_get_many.argtypes = [ctypes.c_char_p, c_char_pp, vp_p, sz_p, ctypes.c_size_t,
                                       sz_p, int_p]
    lib.offloadfs_exists_many.argtypes = [ctypes.c_char_p, c_char_pp, ctypes.c_size_t, int_p]
    lib.offloadfs_delete_many.argtypes = [ctypes.c_char_p, c_char_pp, ctypes.c_size_t, int_p]
    for f in (lib.offloadfs_put_many, lib.offloadfs_get_many, lib.offloadfs_exists_many,
              lib.offloadfs_delete_many):
        f.restype = ctypes.c_int
    _lib = lib
    return lib


def _keys(keys):
    arr = (ctypes.c_char_p * max(len(keys), 1))()
    for i, k in enumerate(keys):
        arr[i] = k.encode() if isinstance(k, str) else bytes(k)
    return arr


def _addr(buf, writable):
    """The address of a bytes-like buffer (kept alive by the caller)."""
    if writable:
        return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf)) if len(buf) else None
    if isinstance(buf, bytes):
        return ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value
    mv = memoryview(buf)
    if mv.readonly:
        return _addr(bytes(mv), False)
    return ctypes.addressof((ctypes.c_char * mv.nbytes).from_buffer(mv)) if mv.nbytes else None


def _same_len(keys, bufs):
    # A missing buffer would be a NULL of length 0: an empty object put, an object not read.
    if len(keys) != len(bufs):
        raise ValueError("%d keys but %d buffers" % (len(keys), len(bufs)))


def _raise(errs, keys):
    for k, e in zip(keys, errs):
        if e:
            raise OSError(-e, os.strerror(-e), k)


class Tenant:
    def __init__(self, tenant_dir):
        self.dir = os.fsencode(tenant_dir)
        self.lib = _load()

    def put_many_errs(self, keys, bufs, flags=0):
        bufs = list(bufs)
        _same_len(keys, bufs)
        n = len(keys)
        keep = [bytes(b) if not isinstance(b, (bytes, bytearray)) else b for b in bufs]
        ptrs = (ctypes.c_void_p * max(n, 1))(*[_addr(b, False) for b in keep])
        lens = (ctypes.c_size_t * max(n, 1))(*[len(b) for b in keep])
        errs = (ctypes.c_int * max(n, 1))()
        self.lib.offloadfs_put_many(self.dir, _keys(keys), ptrs, lens, n, flags, errs)
        return list(errs)[:n]

    def put_many(self, keys, bufs, flags=0):
        _raise(self.put_many_errs(keys, bufs, flags), keys)

    def get_many_errs(self, keys, bufs):
        """bufs: writable buffers (bytearray); returns (sizes, errs).  A key
        whose buffer is too small gets -EOVERFLOW and the size it needs."""
        bufs = list(bufs)
        _same_len(keys, bufs)
        n = len(keys)
        ptrs = (ctypes.c_void_p * max(n, 1))(*[_addr(b, True) for b in bufs])
        caps = (ctypes.c_size_t * max(n, 1))(*[len(b) for b in bufs])
        lens = (ctypes.c_size_t * max(n, 1))()
        errs = (ctypes.c_int * max(n, 1))()
        self.lib.offloadfs_get_many(self.dir, _keys(keys), ptrs, caps, n, lens, errs)
        return list(lens)[:n], list(errs)[:n]

    def get_many(self, keys, bufs):
        sizes, errs = self.get_many_errs(keys, bufs)
        _raise(errs, keys)
        return sizes

    def exists_many(self, keys):
        n = len(keys)
        ex = (ctypes.c_int * max(n, 1))()
        ret = self.lib.offloadfs_exists_many(self.dir, _keys(keys), n, ex)
        if ret:
            raise OSError(-ret, os.strerror(-ret))
        return [bool(x) for x in list(ex)[:n]]

    def delete_many_errs(self, keys):
        n = len(keys)
        errs = (ctypes.c_int * max(n, 1))()
        self.lib.offloadfs_delete_many(self.dir, _keys(keys), n, errs)
        return list(errs)[:n]

    def delete_many(self, keys):
        _raise(self.delete_many_errs(keys), keys)
