"""numba as g3align compiles with it: `njit`, one on-disk cache per user and source tree, a note while compiling.

Every module with compiled kernels takes `njit` from here, not from numba. Four things differ from numba's own:

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
  though within the noise of the machine it was measured on; docs/BENCHMARKS.md "Cold start").
* **A note while compiling.** The first compile in a process prints one `[M::g3align]` line on stderr: what
  is compiled, where it is kept, and how long it takes (`g3align warmup` does it ahead of time).
* **A command's kernels compiled in parallel** before its first run on a machine (`precompile`, below), from
  the list in jit_manifest.json.

`cache_dir()` is where `g3align warmup` compiles to; `cache_root()/numba` is what `make clean-cache` removes.
"""
from __future__ import annotations

import functools
import hashlib
import os
import sys
import threading
from pathlib import Path

_PKGS = ("g3align", "g3align.aligner", "g3align.index")  # the packages whose modules (and sub-packages') hold kernels
_lock = threading.Lock()
_tree: str | None = None
_dirs: dict | None = None


def _pkg_dirs() -> dict:
    """The directories of g3align's Python packages and their sub-packages (a source tree or an install: setuptools
    maps them), each with its short name: 'g3align', 'aligner', 'aligner.mem.gpu', 'index', ..."""
    global _dirs
    if _dirs is None:
        import importlib.util
        out: dict = {}
        for name in _PKGS:
            spec = importlib.util.find_spec(name)
            for loc in (spec.submodule_search_locations or []) if spec else []:
                root = os.path.realpath(loc)
                short = name.removeprefix("g3align.")
                for d, subs, fs in os.walk(root):  # (pruned as it goes: subs is edited in place)
                    # g3align's own folder holds the others in an install: each is walked from its own root
                    subs[:] = [] if name == "g3align" else sorted(s for s in subs if not s.startswith((".", "_")))
                    if "__init__.py" in fs:
                        rel = os.path.relpath(d, root)
                        out.setdefault(d, short if rel == "." else f"{short}.{rel.replace(os.sep, '.')}")
        _dirs = out
    return _dirs


def tree_hash() -> str:
    """sha256 of the package's Python sources (their names and bytes, in name order), hex."""
    global _tree
    if _tree is None:
        h = hashlib.sha256()
        for d, short in sorted(_pkg_dirs().items(), key=lambda kv: kv[1]):
            for p in sorted(Path(d).glob("*.py")):
                h.update(f"{short}/{p.name}\0".encode())
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
    """Where this source tree's compiled kernels for this process's CPU target are kept (numba/<tree>-<target>);
    the kernels shipped in the package, where they cannot be copied there (read-only use, below)."""
    if _READ_ONLY is not None:
        return _READ_ONLY
    return cache_root() / "numba" / f"{tree_hash()[:20]}-{cpu_target()}"


# ------------------------------------------------------------------------------ the CPU the code is compiled for
# numba compiles for the host CPU by default (every instruction set extension it has), so compiled code can only
# be reused on the same kind of CPU. Kernels compiled for the x86-64-v3 level instead (AVX2, BMI2, FMA: Intel
# Haswell, AMD Excavator and later, every x86 GPU host of the last decade) run on any such machine: that is what
# a wheel carries (`make wheel`, below). They are as fast as native code for `mem`, but `map` on the CPU is up to
# ~35 % slower than code compiled for an AVX-512 host (docs/BENCHMARKS.md "Cold start"), so G3ALIGN_CPU chooses:
#   auto (default): the shipped portable kernels where the package carries them for this tree, Python and numba,
#       until `g3align warmup` has compiled native ones on this machine; native code everywhere else (a source
#       install compiles anyway, so it compiles for this CPU);
#   native: this CPU's own code; portable: x86-64-v3 (where the CPU has it).
# A NUMBA_CPU_NAME set by the user is respected as it is. The choice travels to child processes in the environment.
PORTABLE = "x86-64-v3"
_V3_FEATURES = ("avx", "avx2", "bmi", "bmi2", "cx16", "f16c", "fma", "lzcnt", "movbe", "popcnt", "sahf", "sse4.1",
                "sse4.2", "ssse3", "xsave")
_target: str | None = None


def cpu_target() -> str:
    """'x86-64-v3' or 'native' (or the user's own NUMBA_CPU_NAME, with a hash of its NUMBA_CPU_FEATURES): what
    this process compiles for and loads. The first call chooses (G3ALIGN_CPU, above), before anything compiles."""
    global _target
    if _target is None:
        with _lock:
            if _target is None:
                _target = _choose_target()
    return _target


def _host_has_portable() -> bool:
    import platform
    try:
        import llvmlite.binding as ll
        have = ll.get_host_cpu_features()
    except Exception:  # noqa: BLE001 (no feature list: not known to have it)
        return False
    return platform.machine() in ("x86_64", "AMD64") and all(have.get(f, False) for f in _V3_FEATURES)


def _set_numba_cpu(name: str | None) -> None:
    if name is None:
        os.environ.pop("NUMBA_CPU_NAME", None)
        os.environ.pop("NUMBA_CPU_FEATURES", None)
    else:
        os.environ["NUMBA_CPU_NAME"], os.environ["NUMBA_CPU_FEATURES"] = name, ""
    if "numba.core.config" in sys.modules:  # else numba reads them when it is imported
        sys.modules["numba.core.config"].reload_config()


def _numba_started() -> bool:
    """numba's CPU code generator exists already (this process compiled before g3align chose): its CPU is fixed."""
    reg = sys.modules.get("numba.core.registry")
    return reg is not None and "_toplevel_target_context" in vars(reg.cpu_target)


def _choose_target() -> str:
    mode = os.environ.get("G3ALIGN_CPU", "auto")
    name = os.environ.get("NUMBA_CPU_NAME")
    feats = os.environ.get("NUMBA_CPU_FEATURES", "")
    if mode == "native" and name == PORTABLE and not feats and not _numba_started():  # inherited from a parent
        _set_numba_cpu(name := None)
    elif not name and mode != "native" and not _numba_started():
        want = mode == "portable" or (shipped_dir(PORTABLE) is not None and not (
            cache_root() / "numba" / f"{tree_hash()[:20]}-native" / "ready" / "all").exists())
        if want and _host_has_portable():
            _set_numba_cpu(name := PORTABLE)
    if not name:
        return "native"
    return name if not feats else f"{name}-{hashlib.sha256(feats.encode()).hexdigest()[:8]}"


# --------------------------------------------------------------------------- kernels shipped in a wheel
# `make wheel` (G3ALIGN_BUILD_KERNELS=1, setup.py) runs `g3align warmup` for the portable target while building and
# puts the resulting cache into the package as compiled/<tree>-<target>/ with a stamp of the Python and numba it
# was made with. On the first use of an installed package whose stamp matches, the shipped kernels are copied into
# the user's cache (a fraction of a second, once per version) and nothing is compiled. Where the user's cache
# cannot be written, they are loaded from the package itself, read-only. A different Python or numba, another
# target or another tree: not used, compiled as usual.
SHIPPED = Path(__file__).with_name("compiled")
_READ_ONLY: Path | None = None


def stamp(target: str | None = None) -> dict:
    """What compiled code is bound to besides the sources: the interpreter's bytecode and numba's version."""
    from importlib.metadata import version  # numba itself is not imported for this
    return {"python": sys.implementation.cache_tag, "numba": version("numba"), "target": target or cpu_target(),
            "tree": tree_hash()}


def shipped_dir(target: str | None = None) -> Path | None:
    """The package's compiled kernels for this tree, target, Python and numba, if it carries them."""
    if not SHIPPED.is_dir():
        return None
    return _shipped(target or cpu_target())


@functools.lru_cache(maxsize=None)
def _shipped(target: str) -> Path | None:  # once per process: the target choice, the seeding and precompile ask
    import json
    d = SHIPPED / f"{tree_hash()[:20]}-{target}"
    try:
        return d if json.loads((d / "stamp.json").read_text()) == stamp(target) else None
    except (OSError, ValueError):
        return None


def _seed() -> None:
    """Copy the shipped kernels into the user's cache before anything is compiled (once: the cache's directory
    for this tree exists afterwards); where that cannot be written, use them from the package read-only."""
    global _READ_ONLY
    src = shipped_dir()
    if src is None:
        return
    dst = cache_dir()
    if dst.exists():
        return
    import shutil
    import tempfile
    tmp = None
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent)
        shutil.copytree(src, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("stamp.json"))
        os.rename(tmp, dst)  # whole or not at all; another process's copy may have landed first
        tmp = None
    except OSError:  # the user's cache cannot be written (or is full): the package's own copy, read-only
        if not dst.exists():
            _READ_ONLY = src
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def warmup_done() -> None:
    """`g3align warmup` compiled everything for this target (auto mode prefers native kernels marked so)."""
    try:
        (cache_dir() / "ready").mkdir(parents=True, exist_ok=True)
        (cache_dir() / "ready" / "all").touch()
    except OSError:
        pass


def ship(build_lib: str) -> Path:
    """Compile every kernel for the portable target (`g3align warmup` on all cores, into the user's cache) and put
    the cache into build_lib/g3align/compiled/ with its stamp: what `make wheel` carries. Run with build_lib's
    g3align importable (setup.py does it)."""
    import json
    import shutil
    import subprocess
    if cpu_target() != PORTABLE:
        raise SystemExit(f"[E::ship] this machine cannot compile for {PORTABLE} (target: {cpu_target()})")
    # the GPU paths' CPU kernels too, on a machine without a GPU (warmup's runs cover only its own devices)
    precompile(jobs(("cpu", "gpu")), log=sys.stderr)
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "warmup"], cwd="/",
                       env=dict(os.environ, G3ALIGN_CPU="portable"))
    if r.returncode != 0:
        raise SystemExit(f"[E::ship] g3align warmup failed (exit {r.returncode})")
    out = Path(build_lib) / "g3align" / "compiled"
    shutil.rmtree(out, ignore_errors=True)  # a build directory's older trees
    dst = out / cache_dir().name
    shutil.copytree(cache_dir(), dst, ignore=shutil.ignore_patterns(".*"))
    for marker in (dst / "ready").glob("*-gpu"):  # the GPU jobs' CUDA modules are built per machine: on the first
        marker.unlink()  # GPU run precompile() still runs, loading the shipped numba kernels and building those
    (dst / "stamp.json").write_text(json.dumps(stamp(), indent=1) + "\n")
    return dst


def _install_locator() -> None:
    """Put the tree-keyed locator first in numba's list (idempotent)."""
    from numba.core import caching
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl

    class TreeCacheLocator(caching._CacheLocator):
        """Functions of g3align's own files: kept in cache_dir()/<package dir name>, stamped by tree_hash()."""

        def __init__(self, py_func, py_file):
            self._lineno = py_func.__code__.co_firstlineno
            self._py_file = py_file  # numba's warnings name it
            self._path = str(cache_dir() / _pkg_dirs()[os.path.dirname(os.path.realpath(py_file))])

        def ensure_cache_path(self):
            if _READ_ONLY is None:  # the shipped kernels, read-only: loaded, never written (see njit)
                super().ensure_cache_path()

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


# ------------------------------------------------------------------ the kernels a command needs, compiled in parallel
# A command's kernels are the numba functions that Python calls directly (the compiled code they call is linked
# into them) and its CUDA modules. They are listed, with their argument types and compile times, in
# jit_manifest.json, made by `scripts/jit_manifest.py` (runs of `g3align warmup`'s plan with G3ALIGN_JIT_RECORD
# set). Before a command's first run on a machine, precompile() compiles its list in as many processes as there
# are cores, each taking the longest-first share of the work; the command then loads them from the cache. An
# entry the list lacks (the code changed since it was made) is compiled where it is first called, as numba does:
# slower, never different.
_MANIFEST = Path(__file__).with_name("jit_manifest.json")


def jobs(devices) -> list[str]:
    """The manifest's jobs of these devices ('cpu', 'gpu'), index first: what warmup and ship compile."""
    return ["index"] + [f"{j}-{d}" for d in devices for j in ("mem-se", "mem-pe", "map", "align")]


def _record_to(path: str) -> None:
    """G3ALIGN_JIT_RECORD: append every function Python calls into compiled code for new argument types (and every
    CUDA module built) to `path`, a JSON line each, as it happens (the CLI leaves through os._exit)."""
    import base64
    import json
    import pickle
    import time

    from numba.core.dispatcher import Dispatcher

    def put(rec):
        with _lock, open(path, "a") as fh:
            fh.write(json.dumps(rec) + "\n")

    orig = Dispatcher._compile_for_args

    def compile_for_args(self, *args, **kws):
        before = set(self.overloads)
        t = time.perf_counter()
        try:
            return orig(self, *args, **kws)
        finally:
            dt = round(time.perf_counter() - t, 2)
            f = self.py_func
            for sig in [s for s in self.overloads if s not in before]:
                put({"m": f.__module__, "f": f.__qualname__, "s": dt,
                     "sig": base64.b64encode(pickle.dumps(sig)).decode(), "types": str(sig)})

    Dispatcher._compile_for_args = compile_for_args
    RECORD["cupy"] = lambda name, defines, options, dt: put(
        {"cupy": name, "defines": defines or {}, "options": list(options), "s": round(dt, 2)})


RECORD: dict = {}  # "cupy": the loader's hook when recording


WIDE = "+wide"  # a job's suffix for an FM-index of 2**32 rows or more (the superblock layout: `wide_job`)


def _entries(jobs) -> list:
    """The manifest's entries for these jobs, each once. A job named JOB+wide is JOB's entries with the CUDA modules
    of the FM-index built for the wide table layout (OCC_WIDE = index/fm.py's SUPER_SHIFT), which the manifest does
    not record: an index of 2**32 rows or more (a human genome) keeps the same array types (the numba kernels are
    the same), but kernels/smem.cu reads its superblocks."""
    import json

    from g3align.index.fm import SUPER_SHIFT
    try:
        man = json.loads(_MANIFEST.read_text())
    except (OSError, ValueError):
        return []
    out = {}
    for job in jobs:
        base, wide = (job[:-len(WIDE)], True) if job.endswith(WIDE) else (job, False)
        for e in man.get("jobs", {}).get(base, []):
            if wide and "OCC_WIDE" in (e.get("defines") or {}):   # the CUDA module of the wide table layout
                e = dict(e, defines=dict(e["defines"], OCC_WIDE=SUPER_SHIFT))
            out.setdefault(entry_key(e), e)
    return list(out.values())


def wide_job(job: str, wide: bool) -> str:
    """The precompile job for an index of the narrow or the wide (superblock) FM-index layout."""
    return job + WIDE if wide else job


def entry_key(e: dict) -> str:
    """A manifest entry's identity: everything but its compile time."""
    import json
    return json.dumps({k: v for k, v in e.items() if k != "s"}, sort_keys=True)


def _workers(n_entries: int, threads: int | None) -> int:
    """Compile processes: the cores (or -t), at most one per entry and one per 1.5 GB of free memory."""
    n = threads or len(os.sched_getaffinity(0))
    try:
        with open("/proc/meminfo") as fh:
            free = next(int(x.split()[1]) for x in fh if x.startswith("MemAvailable:")) // (1536 * 1024)
        n = min(n, max(1, free))
    except (OSError, StopIteration, ValueError):
        pass
    return max(1, min(n, n_entries))


def precompile(jobs, threads: int | None = None, log=None) -> float:
    """Compile the manifest's kernels of `jobs` ('mem-se-cpu', 'map-gpu', ...) that this tree's cache lacks, in
    parallel processes; once done, a marker per job makes later calls return at once. Returns the seconds spent.
    Failures are left to the command itself (it compiles what it misses). G3ALIGN_PRECOMPILE=0: off."""
    import subprocess
    import time
    jobs = [jobs] if isinstance(jobs, str) else list(jobs)
    if os.environ.get("G3ALIGN_PRECOMPILE", "1") == "0" or _READ_ONLY is not None:
        return 0.0
    ready = cache_dir() / "ready"
    todo = [j for j in jobs if not (ready / j).exists()]
    entries = _entries(todo)
    if not entries:
        return 0.0
    t0 = time.perf_counter()
    n = _workers(len(entries), threads)
    shipped = shipped_dir() is not None  # the CPU kernels came compiled: only loaded, the CUDA modules are built

    def cost(e):
        return e.get("s", 0) if "cupy" in e or not shipped else 0.2

    shares = [[] for _ in range(n)]  # longest first, each to the least loaded process
    load = [0.0] * n
    for e in sorted(entries, key=lambda e: -cost(e)):
        k = load.index(min(load))
        shares[k].append(e)
        load[k] += cost(e) + 0.05
    global _noted
    if log is None and os.environ.get("G3ALIGN_COMPILE_NOTE", "1") != "0":
        what = (f"the CUDA modules of {EXPECT['what']} for this GPU (the CPU kernels came compiled)" if shipped
                else f"{EXPECT['what']} for this machine")
        sys.stderr.write(f"[M::g3align] compiling {what} once, in {n} processes (about {max(load) * 1.05 + 3:.0f}"
                         f" s on this machine's cores); they are kept in {cache_dir()} (`g3align warmup` compiles "
                         f"everything ahead)\n")
        sys.stderr.flush()
    import json
    env = dict(os.environ, G3ALIGN_COMPILE_NOTE="0", G3ALIGN_PRECOMPILE="0")
    env.pop("G3ALIGN_JIT_RECORD", None)
    import tempfile

    from g3align.aligner.runtime import stop
    procs = []
    for share in shares:
        err, job = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        job.write(json.dumps(share).encode())
        job.seek(0)
        p = subprocess.Popen([sys.executable, "-c", "from g3align.jit import _compile_stdin; _compile_stdin()"],
                             stdin=job, stdout=subprocess.DEVNULL, stderr=err, env=env,
                             cwd="/")  # no g3align/ folder of the caller's (a checkout) shadows the installed one
        stop.CHILDREN.append(p)  # a stopped command stops them
        procs.append((p, err, job))
    ok = True
    for p, fh, job in procs:
        rc = p.wait()
        stop.CHILDREN.remove(p)
        fh.seek(0)
        err = fh.read().decode(errors="replace")
        fh.close()
        job.close()
        if rc != 0:
            ok = False
            if log is not None:
                log.write(f"[W::precompile] a compile process failed: "
                          f"{(err.strip().splitlines() or ['(no message)'])[-1]}\n")
    if ok:
        try:
            ready.mkdir(parents=True, exist_ok=True)
            for j in todo:
                (ready / j).touch()
        except OSError:
            pass
    dt = time.perf_counter() - t0
    _noted = False  # what the list lacked and the command compiles itself is noted again
    if log is not None:
        log.write(f"[M::precompile] {len(entries)} kernels of {', '.join(todo)} in {n} processes: {dt:.1f} s\n")
        log.flush()
    return dt


def _compile_stdin() -> None:
    """A precompile process: compile the entries (JSON on stdin) into the cache. An entry that no longer resolves
    (renamed, a closure) or no longer compiles (argument types the code has changed) is skipped; a CUDA module is
    built only where CuPy sees a device."""
    import base64
    import importlib
    import json
    import pickle
    import signal

    from g3align.aligner.runtime import stop
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stop.SIGNALS)  # the parent's block (stop.install) is inherited
    for e in json.loads(sys.stdin.read()):
        if "cupy" in e:
            try:
                from g3align.kernels import loader
                loader.get_module(e["cupy"], e["defines"] or None, tuple(e["options"]))
            except Exception:  # noqa: BLE001 (no CuPy or no device: nothing to build here)
                pass
            continue
        if "<locals>" in e["f"]:
            continue
        try:
            obj = importlib.import_module(e["m"])
            for part in e["f"].split("."):
                obj = getattr(obj, part)
            sig = pickle.loads(base64.b64decode(e["sig"]))
        except (ImportError, AttributeError, pickle.UnpicklingError, TypeError, ValueError):
            continue
        if hasattr(obj, "compile"):
            try:
                obj.compile(sig)
            except Exception:  # noqa: BLE001 (a stale entry: its types no longer fit the code)
                # skipped, as an entry that no longer resolves: a failed process would leave the job unmarked, and
                # every later run would start the compile processes again
                continue


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
    cpu_target()  # before anything is compiled: the target is part of every cache key
    with _lock:
        if _Dispatcher is not None:
            return
        _seed()
        _install_locator()
        _install_note()
        if os.environ.get("G3ALIGN_JIT_RECORD"):
            _record_to(os.environ["G3ALIGN_JIT_RECORD"])
        _Dispatcher = _dispatcher_class()


def njit(*args, specialize_literals: bool = True, **kw):
    """numba.njit with g3align's cache place; the same arguments, and `specialize_literals=False` for a function
    that calls from compiled code should compile once for the arguments' plain types (module docstring)."""
    import numba
    _setup()

    def wrap(dispatcher):
        if not specialize_literals:
            dispatcher.__class__ = _Dispatcher  # no state of its own: the object numba built, typed as ours
        if _READ_ONLY is not None and getattr(dispatcher, "_cache", None) is not None:
            dispatcher._cache.save_overload = lambda sig, data: None  # what the package lacks is compiled, not kept
        return dispatcher

    if len(args) == 1 and callable(args[0]) and not kw:
        return wrap(numba.njit(args[0]))
    deco = numba.njit(*args, **kw)
    return lambda f: wrap(deco(f))


if __name__ == "__main__":  # python -m g3align.jit ship BUILD_LIB (setup.py, make wheel)
    from g3align import jit as _jit
    if sys.argv[1:2] != ["ship"] or len(sys.argv) != 3:
        raise SystemExit("usage: python -m g3align.jit ship BUILD_LIB")
    _jit._setup()  # with G3ALIGN_CPU=portable from the start (setup.py): the package's import chose the target
    print(f"[M::ship] {_jit.ship(sys.argv[2])}", file=sys.stderr)
