# numba's on-disk cache carried between GPU-box calls (sourced by scripts/gpu_map_check.sh and gpu_mem_run.sh
# with NBCACHE=1; a fresh box otherwise spends minutes compiling). $NBCACHE_DIR (git-ignored, carried) holds
# nbcache.tgz.* (parts of one tar of the __pycache__ numba files of an earlier call) and stamps.txt (sha1, size
# and mtime of each source file then). A source file whose content is unchanged gets its old mtime back, so
# numba's index (keyed by the source's mtime and size) matches; a changed file is compiled again as usual, and
# so is every file that imports it, directly or not (scripts/nbcache_keep.py: a cached function holds the code
# of the jitted functions it calls from other files, which numba's index does not see).
# nbcache_out writes the cache and stamps to $OUT for the next call: copy them into $NBCACHE_DIR there.
# numba keys cached code by the host's CPU name too. The boxes come with Sapphire Rapids (H100) or Emerald Rapids
# (H200) CPUs, whose LLVM feature strings are the same: on either, NUMBA_CPU_NAME is pinned to emeraldrapids so
# one cache serves both (a fresh H100 box otherwise compiled everything again: 330 s of map warm-up, session 21);
# nbcache_out files any other-name entries under it (scripts/nbcache_rekey.py).
NBCACHE_CPU=emeraldrapids
nbcache_in() {
    [ "${NBCACHE:-0}" = 1 ] || return 0
    case $(python3 -c 'import llvmlite.binding as ll; print(ll.get_host_cpu_name())' 2>/dev/null) in
        sapphirerapids|emeraldrapids) export NUMBA_CPU_NAME=$NBCACHE_CPU; echo "numba: CPU name pinned to $NBCACHE_CPU";;
    esac
    ls "$NBCACHE_DIR"/nbcache.tgz* >/dev/null 2>&1 || return 0
    local tgz=/tmp/nbcache_in.tgz n=0 mt f
    cat "$NBCACHE_DIR"/nbcache.tgz* > $tgz   # one tar, or its parts in order
    # every other source gets a new mtime: a stale file whose mtime is still the one the cache was written
    # under (unchanged here since that call, but importing a changed numba file) must miss numba's index
    local now; now=$(date +%s)
    find aligner index -name '*.py' -exec touch -d "@$now" {} +
    while read -r mt f; do
        touch -d "@$mt" "$f" && n=$((n + 1))
    done < <(python3 scripts/nbcache_keep.py "$NBCACHE_DIR"/stamps.txt)
    tar xzf $tgz; echo "numba cache: $(tar tzf $tgz | wc -l) files, $n source stamps restored"
}
nbcache_out() {
    [ "${NBCACHE:-0}" = 1 ] || return 0
    python3 scripts/nbcache_rekey.py $NBCACHE_CPU aligner index
    find aligner index -name '*.py' | while read -r f; do
        echo "$(sha1sum < "$f" | cut -c1-40) $(stat -c '%s %.9Y' "$f") $f"; done > "$OUT/stamps.txt"
    # only the files of functions still at their place in the sources (scripts/nbcache_prune.py): stale ones grew
    # the cache from 34 to 42 MB in one session, too large to travel beside chr20
    find aligner index -path '*__pycache__*' -name '*.nb[ic]' | python3 scripts/nbcache_prune.py \
        | tar czf /tmp/nbcache.tgz -T -
    # files come back from the box only up to 16 MiB each: parts of 15 MiB (nbcache.tgz.aa, .ab, ...)
    split -b 15M /tmp/nbcache.tgz "$OUT/nbcache.tgz."
    echo "numba cache out: $(du -h /tmp/nbcache.tgz | cut -f1) in $(ls "$OUT"/nbcache.tgz.* | wc -l) parts"
}
# Python bytecode, made once per box as `pip install` makes it (BYTECODE=0: not). The boxes run Python with
# PYTHONDONTWRITEBYTECODE=1, and their numpy came without any (0 of 407 modules, session 22): every process
# compiled numpy's sources again, 0.20-0.25 s of its start-up (`import numpy`: ~250 ms, ~50 ms with bytecode),
# and g3align's own modules, which the calls run from the checkout. compileall writes bytecode whatever
# PYTHONDONTWRITEBYTECODE says. After nbcache_in: bytecode is keyed by its source's mtime, which that restores.
# The rest of what map imports had none either (py-spy, session 27: ~0.09 s of a chr20 run's GIL in
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
