"""ctypes bindings of liblevelfeed (client/levelfeed.h): the structs, the
functions, finding the shared library, and turning codes into exceptions.

The library is found, in this order, at:
  1. $LEVELFEED_LIB (a path to liblevelfeed.so), and only there when set;
  2. beside this package (levelfeed/liblevelfeed.so: a copy put there by
     whoever packaged it with the library);
  3. $LF_BUILD/lib/liblevelfeed.so (the build directory `make test` names);
  4. <repository>/build/default/lib/liblevelfeed.so, when this package is
     used from the source tree (python/levelfeed/ -> ../../build/default);
  5. <prefix>/lib/liblevelfeed.so, when this package is installed as
     <prefix>/lib/python3.X/dist-packages/levelfeed (make install);
  6. the system loader (liblevelfeed.so.1, then liblevelfeed.so): a
     `make install` into /usr/local, or LD_LIBRARY_PATH.
A library of another release than this package (lf_version) is passed
over with the reason, so a pip-installed package never drives an older
library's ABI by accident.
"""
import ctypes
import os

from ._version import __version__

# Codes of levelfeed.h.
E_END = -20001
E_TIMEOUT = -20002
E_SERVER = -20003
E_GONE = -20004
E_PROTOCOL = -20005
E_STATE = -20006
E_ORDER = -20007
EPOCH_NEXT = -1     # lf_client_epoch_batches: the epoch of the next batch


class LevelfeedError(RuntimeError):
    """A liblevelfeed call failed: .code is its negative return code,
    str() the library's words (lf_strerror, plus lf_client_error or the open
    failure's reason where there is one)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class LevelfeedTimeout(LevelfeedError, TimeoutError):
    """No batch within the loader's timeout (LF_E_TIMEOUT)."""


class Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("dtype", ctypes.c_uint32),
                ("ndim", ctypes.c_uint32),
                ("shape", ctypes.POINTER(ctypes.c_uint64)),
                ("size", ctypes.c_uint64),
                ("host", ctypes.c_void_p),
                ("device", ctypes.c_void_p)]


class Batch(ctypes.Structure):
    _fields_ = [("epoch", ctypes.c_uint32),
                ("step", ctypes.c_uint64),
                ("seq", ctypes.c_uint64),
                ("nsamples", ctypes.c_uint32),
                ("ntensors", ctypes.c_uint32),
                ("tensors", ctypes.POINTER(Tensor)),
                ("wait_ns", ctypes.c_uint64),
                ("slot", ctypes.c_uint32),
                ("step_tokens", ctypes.c_uint64)]


class Options(ctypes.Structure):
    _fields_ = [("endpoint", ctypes.c_char_p),
                ("rank", ctypes.c_int),
                ("world_size", ctypes.c_int),
                ("local_rank", ctypes.c_int),
                ("device", ctypes.c_int),
                ("connect_timeout_ms", ctypes.c_int),
                ("error", ctypes.c_char_p),
                ("error_size", ctypes.c_size_t)]


def _candidates():
    if os.environ.get("LEVELFEED_LIB"):
        yield os.environ["LEVELFEED_LIB"]
        return
    pkg = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(pkg, "liblevelfeed.so")
    if os.environ.get("LF_BUILD"):
        yield os.path.join(os.environ["LF_BUILD"], "lib", "liblevelfeed.so")
    source_root = os.path.join(pkg, "..", "..")              # python/levelfeed
    prefix_lib = os.path.join(pkg, "..", "..", "..")         # lib/python3.X/dist-packages/levelfeed
    yield os.path.normpath(os.path.join(source_root, "build", "default", "lib", "liblevelfeed.so"))
    yield os.path.normpath(os.path.join(prefix_lib, "liblevelfeed.so"))
    yield "liblevelfeed.so.1"
    yield "liblevelfeed.so"


def _release_of(lib):
    """The library's lf_version(), or None for one older than it."""
    try:
        f = lib.lf_version
    except AttributeError:
        return None
    f.restype, f.argtypes = ctypes.c_char_p, []
    return f().decode("ascii", "replace")


def _load():
    """(the loaded library, its path)."""
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        release = _release_of(lib)
        if release == __version__:
            return lib, path
        tried.append("%s (%s, this package is %s)" % (
            path, "release " + release if release else "an older release, without lf_version",
            __version__))
    raise ImportError("levelfeed %s: no usable liblevelfeed; tried: %s. Build it (make) or "
                      "install it (make install), or set LEVELFEED_LIB to the path of "
                      "liblevelfeed.so %s." % (__version__, "; ".join(tried), __version__))


def _declare(lib):
    p = ctypes.c_void_p
    sigs = {
        "lf_client_options_default": (None, [ctypes.POINTER(Options)]),
        "lf_client_open": (ctypes.c_int, [ctypes.POINTER(Options), ctypes.POINTER(p)]),
        "lf_next": (ctypes.c_int, [p, ctypes.POINTER(Batch), ctypes.c_int]),
        "lf_release": (ctypes.c_int, [p, ctypes.POINTER(Batch)]),
        "lf_release_stream": (ctypes.c_int, [p, ctypes.POINTER(Batch), p]),
        "lf_client_use_device": (ctypes.c_int, [p, ctypes.c_int, ctypes.c_uint32]),
        "lf_report_step": (ctypes.c_int, [p, ctypes.c_uint64]),
        "lf_report_step_sync": (ctypes.c_int, [p, ctypes.c_uint64, ctypes.c_uint64]),
        "lf_client_report": (ctypes.c_int, [p, p, ctypes.c_size_t, ctypes.c_int]),
        "lf_client_trace": (ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]),
        "lf_state_save": (ctypes.c_long, [p, p, ctypes.c_size_t]),
        "lf_state_restore": (ctypes.c_int, [p, p, ctypes.c_size_t]),
        "lf_client_error": (ctypes.c_char_p, [p]),
        "lf_client_close": (None, [p]),
        "lf_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "lf_client_plan_id": (ctypes.c_uint64, [p]),
        "lf_client_epoch_batches": (ctypes.c_int64, [p, ctypes.c_int64]),
        "lf_client_epoch_batches_wait": (ctypes.c_int64, [p, ctypes.c_int64, ctypes.c_int]),
        "lf_eval_begin": (ctypes.c_int, [p]),
        "lf_eval_next": (ctypes.c_int, [p, ctypes.POINTER(Batch), ctypes.c_int]),
        "lf_client_eval_batches": (ctypes.c_int64, [p]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


_lib, lib_path = _load()
lib = _declare(_lib)


def strerror(code):
    return lib.lf_strerror(code).decode("utf-8", "replace")


def error(code, client=None, detail=None):
    """The exception for `code`: the library's name for it, and the server's
    or the connection's own message when there is one."""
    msg = strerror(code)
    if detail and detail != msg:
        msg += ": " + detail
    elif client and code in (E_SERVER, E_PROTOCOL, E_TIMEOUT):
        msg += ": " + lib.lf_client_error(client).decode("utf-8", "replace")
    cls = LevelfeedTimeout if code == E_TIMEOUT else LevelfeedError
    return cls(code, msg)


def check(code, client=None):
    if code < 0:
        raise error(code, client)
    return code

