"""numba as g3align compiles with it: `njit`, one on-disk cache per user and source tree, a note while compiling.

Every module with compiled kernels takes `njit` from here, not from numba. Three things differ from numba's own:

* **Where compiled code is kept.** numba's default cache sits in each package's `__pycache__`, keyed by the
  source file's path: a read-only install (site-packages owned by root, a container image) compiles again in
  every process, and a reinstall elsewhere compiles again. Here it sits in a per-user directory
  (`$G3ALIGN_CACHE_DIR`, else `$XDG_CACHE_HOME/g3align`, else `~/.cache/g3align`), under `numba/<tree>/`,
  where <tree> is a hash of every Python source of the package. The same hash is every entry's source stamp.
  A cached kernel holds the code of the kernels it calls from other files, which numba's per-file stamp does
  not see; with one stamp for the whole tree an edit anywhere retires every entry, so a cache is never stale,
  and two installs of the same version (any path, any mtime) share one cache. Where that directory cannot be
  written, numba's own places are used as before.
* **No specialization per literal argument, where asked.** numba types a constant argument of a call between
  compiled functions as a literal (`Literal[int](-1)`) and compiles the callee again for each literal value it
  meets: bwa's record writer was compiled five times, 28 s each, for one `mem` run. A function decorated with
  `njit(..., specialize_literals=False)` compiles such a call for the arguments' plain types (int64, bool, ...)
  first, and for the literal types only when that fails to type. The record and text writers (samout.py,
  mmformat.py) are; the alignment kernels keep numba's literal specialization, where a constant folded into the
  code can be worth its compile (a CPU `mem` paired-end run was 5-8 % slower with every function typed plainly,
  though within the noise of the machine it was measured on).
* **A note while compiling.** The first compile in a process prints one `[M::g3align]` line on stderr: what
  is compiled, where it is kept, and how long it takes (`g3align warmup` does it ahead of time).

`cache_dir()` is where `g3align warmup` compiles to; `cache_root()/numba` is what `make clean-cache` removes.
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
from pathlib import Path

_PKGS = ("g3align", "g3align.aligner", "g3align.index")  # the packages whose modules hold compiled kernels
_lock = threading.Lock()
_tree: str | None = None
_dirs: tuple | None = None


def _pkg_dirs() -> tuple:
    """The directories of g3align's Python packages (a source tree or an install: setuptools maps them)."""
    global _dirs
    if _dirs is None:
        import importlib.util
        out = []
        for name in _PKGS:
            spec = importlib.util.find_spec(name)
            for loc in (spec.submodule_search_locations or []) if spec else []:
                out.append(os.path.realpath(loc))
        _dirs = tuple(dict.fromkeys(out))
    return _dirs


def tree_hash() -> str:
    """sha256 of the package's Python sources (their names and bytes, in name order), hex."""
    global _tree
    if _tree is None:
        h = hashlib.sha256()
        for d in _pkg_dirs():
            for p in sorted(Path(d).glob("*.py")):
                h.update(f"{Path(d).name}/{p.name}\0".encode())
                h.update(p.read_bytes())
                h.update(b"\0")
        _tree = h.hexdigest()
    return _tree


def cache_root() -> Path:
    """g3align's per-user cache directory (numba's compiled kernels under numba/)."""
    env = os.environ.get("G3ALIGN_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache")) / "g3align"


def cache_dir() -> Path:
    """Where this source tree's compiled kernels are kept."""
    return cache_root() / "numba" / tree_hash()[:20]


def _install_locator() -> None:
    """Put the tree-keyed locator first in numba's list (idempotent)."""
    from numba.core import caching
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl

    class TreeCacheLocator(caching._CacheLocator):
        """Functions of g3align's own files: kept in cache_dir()/<package dir name>, stamped by tree_hash()."""

        def __init__(self, py_func, py_file):
            self._lineno = py_func.__code__.co_firstlineno
            self._path = str(cache_dir() / Path(py_file).parent.name)

        def get_cache_path(self):
            return self._path

        def get_source_stamp(self):
            return tree_hash()

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            if os.path.dirname(os.path.realpath(py_file)) not in _pkg_dirs():
                return None
            self = cls(py_func, py_file)
            try:
                self.ensure_cache_path()
            except OSError:  # not writable: numba's own locators (package __pycache__, then numba's user dir)
                return None
            return self

    if not any(getattr(c, "__name__", "") == "TreeCacheLocator" for c in impl._locator_classes):
        impl._locator_classes.insert(0, TreeCacheLocator)


# ---------------------------------------------------------------------------------------------- the note
_noted = False
EXPECT = {"what": "g3align's CPU kernels", "minutes": ""}  # set by the CLI for its subcommand (note_expect)


def note_expect(what: str, minutes: str) -> None:
    """What the note names if this process compiles: e.g. ('the bwa-mem kernels', '3-6')."""
    EXPECT["what"], EXPECT["minutes"] = what, minutes


def _install_note() -> None:
    from numba.core import event

    class Note(event.Listener):
        def on_start(self, ev):
            global _noted
            if _noted or os.environ.get("G3ALIGN_COMPILE_NOTE", "1") == "0":
                return
            with _lock:
                if _noted:
                    return
                _noted = True
            took = f", about {EXPECT['minutes']} min on a 2-core machine" if EXPECT["minutes"] else ""
            sys.stderr.write(f"[M::g3align] compiling {EXPECT['what']} for this machine once{took}; they are kept "
                             f"in {cache_dir()} (`g3align warmup` compiles everything ahead, on all cores)\n")
            sys.stderr.flush()

        def on_end(self, ev):
            pass

    event.register("numba:compile", Note())


# ------------------------------------------------------------------------------------------------ njit
def _dispatcher_class():
    from numba.core import errors, types
    from numba.core.registry import CPUDispatcher

    class Dispatcher(CPUDispatcher):
        """numba's CPU dispatcher; a call from compiled code compiles for its arguments' plain types first."""

        def get_call_template(self, args, kws):
            if self._can_compile:
                plain = tuple(types.unliteral(a) for a in args)
                plain_kws = {k: types.unliteral(v) for k, v in kws.items()}
                if plain != tuple(args) or plain_kws != kws:
                    try:
                        return super().get_call_template(plain, plain_kws)
                    except errors.TypingError:  # the callee needs a literal (a constant index, a dtype): as numba
                        pass
            return super().get_call_template(args, kws)

    return Dispatcher


_Dispatcher = None


def _setup() -> None:
    global _Dispatcher
    with _lock:
        if _Dispatcher is not None:
            return
        _install_locator()
        _install_note()
        _Dispatcher = _dispatcher_class()


def njit(*args, specialize_literals: bool = True, **kw):
    """numba.njit with g3align's cache place; the same arguments, and `specialize_literals=False` for a function
    that calls from compiled code should compile once for the arguments' plain types (module docstring)."""
    import numba
    _setup()

    def wrap(dispatcher):
        if not specialize_literals:
            dispatcher.__class__ = _Dispatcher  # no state of its own: the object numba built, typed as ours
        return dispatcher

    if len(args) == 1 and callable(args[0]) and not kw:
        return wrap(numba.njit(args[0]))
    deco = numba.njit(*args, **kw)
    return lambda f: wrap(deco(f))
