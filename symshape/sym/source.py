"""Where in the user's code something happened.

Guards, asserts and errors carry the first stack frame outside symshape and
torch, so a person can read which line caused them.
"""

from __future__ import annotations

import dis
import functools
import linecache
import os
import sys
import sysconfig
from dataclasses import dataclass

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE_DIR = _PKG_DIR + os.sep  # symshape's own files start with it
_SKIP_DIRS: list[str] = [PACKAGE_DIR]
_SKIP_FILES = ("<frozen ", "contextlib.py", "functools.py")
# the standard library (statistics, fractions, json asking a size's value) is not the
# user's line either; packages installed under it are
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep


def is_stdlib_file(fn: str) -> bool:
    """Is ``fn`` a file of the standard library (not a package installed under it)?"""
    return fn.startswith(_STDLIB) and "-packages" + os.sep not in fn[len(_STDLIB) :]


def skip_directory(path: str) -> None:
    """Treat frames from files under ``path`` as library code, not user code."""
    path = os.path.abspath(path) + os.sep
    if path not in _SKIP_DIRS:
        _SKIP_DIRS.append(path)
        _USER_FILES.clear()


@dataclass(frozen=True, slots=True)
class Location:
    """A line of user code: ``model.py:42 in forward``."""

    filename: str
    lineno: int
    function: str

    @property
    def line(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    @property
    def short(self) -> str:
        base = _BASENAMES.get(self.filename)
        if base is None:
            base = _BASENAMES[self.filename] = os.path.basename(self.filename)
        return f"{base}:{self.lineno}"

    def __str__(self) -> str:
        return f"{self.short} in {self.function}"

    def describe(self) -> str:
        """Location and source text, for error messages."""
        text = self.line
        return f"{self} ({self.filename}:{self.lineno})" + (f"\n    {text}" if text else "")


def _torch_dir() -> str | None:
    torch = sys.modules.get("torch")
    if torch is not _TORCH[0]:
        f = getattr(torch, "__file__", None)
        _TORCH[:] = [torch, os.path.dirname(os.path.abspath(f)) + os.sep if f else None]
    return _TORCH[1]


_TORCH: list = [None, None]  # the torch module _torch_dir saw, and its directory


def in_torch(filename: str) -> bool:
    """Is ``filename`` (a code object's) one of torch's own files?"""
    tdir = _torch_dir()
    return tdir is not None and filename.startswith(tdir)


def is_user_file(fn: str, tdir: str | None = None) -> bool:
    """Is ``fn`` (a code object's filename) the user's, not symshape's, torch's or
    the standard library's? ``tdir``: torch's directory, when the caller has it."""
    tdir = tdir if tdir is not None else _torch_dir()
    return not (
        any(fn.startswith(d) for d in _SKIP_DIRS)
        or (tdir is not None and fn.startswith(tdir))
        or fn.startswith(_SKIP_FILES)
        or fn.endswith(_SKIP_FILES)
        or is_stdlib_file(fn)
    )


def user_location(skip: int = 1) -> Location | None:
    """The innermost frame that belongs to neither symshape nor torch."""
    f = user_frame(skip + 1)
    if f is None:
        return None
    return Location(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)


def user_frame(skip: int = 1):
    """The innermost frame object that belongs to neither symshape nor torch."""
    f = sys._getframe(skip)
    tdir = _torch_dir()
    known = _USER_FILES
    if known.get(None, "") != tdir:  # the answers assumed another torch directory
        known.clear()
        known[None] = tdir
    while f is not None:
        fn = f.f_code.co_filename
        user = known.get(fn)
        if user is None:
            user = known[fn] = is_user_file(fn, tdir)
        if user:
            return f
        f = f.f_back
    return None


# filename -> is it the user's (user_location); under the key None, the torch directory
# the answers assumed. Cleared when skip_directory adds a directory.
_USER_FILES: dict = {}
_BASENAMES: dict = {}  # filename -> its basename (Location.short)


def handled(frame) -> bool:
    """Would an error raised at ``frame``'s instruction, or at its callers' in the
    traced program, meet an ``except`` of the program's? A check made when a trace runs
    raises outside them all: such a condition is read while tracing instead (the
    trace splits there), and the handler runs as in eager. ``with`` blocks and
    ``finally`` do not count: they pass the error on."""
    return any(
        any(start <= f.f_lasti < end for start, end in _try_ranges(f.f_code))
        for f in _program_frames(frame)
    )


def unwinds(frame) -> bool:
    """Would an error raised at ``frame``'s instruction pass through code of the
    program's on its way out: a ``with`` block's exit, a ``finally``, a handler's
    cleanup? Such code runs in eager whatever the error; a trace whose check fails
    when it runs has not run it (``frontend/failures.py`` runs the call again)."""
    return any(
        any(start <= f.f_lasti < end for start, end in _all_ranges(f.f_code))
        for f in _program_frames(frame)
    )


def _program_frames(frame):
    """``frame`` and its callers in the program's code, out to the call symshape
    traces (the first of symshape's frames); torch's and the standard library's
    frames between them (``nn.Module.__call__``) are passed over."""
    f = frame
    while f is not None and not f.f_code.co_filename.startswith(PACKAGE_DIR):
        if is_user_file(f.f_code.co_filename):
            yield f
        f = f.f_back


@functools.lru_cache(maxsize=4096)
def _all_ranges(code) -> tuple:
    """``(start, end)`` of each range of ``code``'s exception table (Python 3.11+)."""
    entries = getattr(dis.Bytecode(code), "exception_entries", ())
    return tuple((e.start, e.end) for e in entries)


_EXCEPT_TYPE = frozenset(
    {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR", "LOAD_DEREF", "LOAD_FAST", "BUILD_TUPLE"}
)


@functools.lru_cache(maxsize=4096)
def _try_ranges(code) -> tuple:
    """``(start, end)`` of each range of ``code``'s exception table (Python 3.11+)
    whose error reaches an ``except`` of a ``try``: its own, or through a ``with``
    block's exit, a ``finally`` or a handler's cleanup inside one (they pass the
    error on)."""
    bytecode = dis.Bytecode(code)
    entries = list(getattr(bytecode, "exception_entries", ()))
    if not entries:
        return ()
    ins = [i for i in bytecode if i.opname not in ("CACHE", "EXTENDED_ARG")]
    at = {i.offset: k for k, i in enumerate(ins)}

    def kind(e) -> str:
        k = at.get(e.target)
        if k is None or ins[k].opname != "PUSH_EXC_INFO" or k + 1 >= len(ins):
            return "cleanup"
        if ins[k + 1].opname == "WITH_EXCEPT_START":
            return "with"
        if ins[k + 1].opname == "POP_TOP":  # a bare except:
            return "try"
        j = k + 1  # except E: / except (E, F): the types loaded, then matched
        while j < len(ins) and ins[j].opname in _EXCEPT_TYPE:
            j += 1
        matches = j < len(ins) and ins[j].opname in ("CHECK_EXC_MATCH", "CHECK_EG_MATCH")
        return "try" if matches else "finally"  # a finally passes the error on

    def reaches_try(e, depth: int = 0) -> bool:
        if kind(e) == "try" or depth > 32:
            return kind(e) == "try"
        # a with's exit, a handler's cleanup: their code passes the error on to the
        # handler whose range covers it
        outer = [o for o in entries if o is not e and o.start <= e.target < o.end]
        return any(reaches_try(o, depth + 1) for o in outer)

    return tuple((e.start, e.end) for e in entries if reaches_try(e))
