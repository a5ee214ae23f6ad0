# g3align's compiled-kernel cache carried between GPU-box runs (sourced by scripts/gpu_map_check.sh with NBCACHE=1;
# a fresh box otherwise compiles for minutes, or run `g3align warmup` there).
# $NBCACHE_DIR (git-ignored, carried) holds g3cache.tgz.* (parts of one tar of $G3ALIGN_CACHE_DIR/numba/<tree>
# of an earlier run). The cache is keyed by the whole source tree (g3align/jit.py): entries of another tree
# are never used, so nothing has to be checked here; an edited tree compiles again.
# numba keys cached code by the host's CPU name too. The boxes come with Sapphire Rapids (H100) or Emerald Rapids
# (H200) CPUs, whose LLVM feature strings are the same: on either, NUMBA_CPU_NAME is pinned to emeraldrapids so
# one cache serves both.
NBCACHE_CPU=emeraldrapids
nbcache_in() {
    [ "${NBCACHE:-0}" = 1 ] || return 0
    case $(python3 -c 'import llvmlite.binding as ll; print(ll.get_host_cpu_name())' 2>/dev/null) in
        sapphirerapids|emeraldrapids) export NUMBA_CPU_NAME=$NBCACHE_CPU; echo "numba: CPU name pinned to $NBCACHE_CPU";;
    esac
    export G3ALIGN_CACHE_DIR=${G3ALIGN_CACHE_DIR:-/tmp/g3cache}
    mkdir -p "$G3ALIGN_CACHE_DIR"
    ls "$NBCACHE_DIR"/g3cache.tgz* >/dev/null 2>&1 || return 0
    cat "$NBCACHE_DIR"/g3cache.tgz* | tar xzf - -C "$G3ALIGN_CACHE_DIR"
    echo "kernel cache in: $(find "$G3ALIGN_CACHE_DIR" -name '*.nbi' | wc -l) index files"
}
nbcache_out() {
    [ "${NBCACHE:-0}" = 1 ] || return 0
    local tree; tree=$(python3 -c 'from g3align import jit; print(jit.cache_dir().relative_to(jit.cache_root()))')
    tar czf /tmp/g3cache.tgz -C "$G3ALIGN_CACHE_DIR" "$tree"
    # files come back from the box only up to 16 MiB each: parts of 15 MiB (g3cache.tgz.aa, .ab, ...)
    split -b 15M /tmp/g3cache.tgz "$OUT/g3cache.tgz."
    echo "kernel cache out: $(du -h /tmp/g3cache.tgz | cut -f1) in $(ls "$OUT"/g3cache.tgz.* | wc -l) parts"
}
# Python bytecode, made once per box as `pip install` makes it (BYTECODE=0: not). The boxes run Python with
# PYTHONDONTWRITEBYTECODE=1, and their numpy came without any (0 of 407 modules): every process
# compiled numpy's sources again, 0.20-0.25 s of its start-up (`import numpy`: ~250 ms, ~50 ms with bytecode),
# and g3align's own modules, which the runs use from the checkout. compileall writes bytecode whatever
# PYTHONDONTWRITEBYTECODE says. The rest of what map imports had none either (py-spy: ~0.09 s of a chr20 run's GIL in
# _compile_bytecode, over the standard library, numba, CuPy, click and yaml): compiled too, as an installation
# (pip, Debian's python3) leaves it.
bytecode_in() {
    [ "${BYTECODE:-1}" = 1 ] || return 0
    local dirs t=$SECONDS
    dirs=$(python3 -c 'import os
for m in ("os", "numpy", "numba", "llvmlite", "cupy", "cupy_backends", "click", "yaml", "fastrlock"):
    try:
        print(os.path.dirname(__import__(m).__file__))
    except Exception:
        pass' 2>/dev/null) || return 0
    python3 -m compileall -q -j 0 -x '/(tests?|idle_test|idlelib|tkinter|turtledemo)/' $dirs aligner index kernels \
        /tmp/pkg/g3align >/dev/null 2>&1
    echo "bytecode: the standard library, numpy, numba, CuPy and g3align compiled ($((SECONDS - t)) s)"
}
