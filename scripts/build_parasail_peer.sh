#!/bin/bash
# Build the parasail CPU peer (scripts/parasail_peer.c) here, for the GPU box (which has no compiler):
#   bash scripts/build_parasail_peer.sh            ->  .whl/parasail_peer  (about 25 KB)
# The parasail wheel in .whl/ is extracted to build/parasail_peer/ (git-ignored, not carried: its
# libparasail.so is 65 MB and .whl/ may carry 64 MiB in all).  The binary dlopens libparasail.so
# (see the header of parasail_peer.c for why it is not linked) and finds it through
#   LD_LIBRARY_PATH, then its RUNPATH: $ORIGIN/../build/parasail_peer/parasail (this checkout) and
#   /tmp/site/parasail (where scripts/gpu_pairwise_run.sh installs the wheel on the box).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEEL=$(ls .whl/parasail-*.whl | head -1)
DEST=build/parasail_peer
if [ ! -f "$DEST/parasail/libparasail.so" ] || [ "$WHEEL" -nt "$DEST/parasail/libparasail.so" ]; then
    rm -rf "$DEST"; mkdir -p "$DEST"
    python3 -m zipfile -e "$WHEEL" "$DEST"
fi
INC=$DEST/parasail/include
# -std=gnu11 keeps parasail.h's `restrict`; glibc >= 2.34 has dlopen and pthreads in libc, -ldl and
# -pthread keep older toolchains working.
gcc -O3 -std=gnu11 -Wall -Wextra -pthread -I"$INC" -o .whl/parasail_peer scripts/parasail_peer.c -ldl \
    -Wl,--enable-new-dtags,-rpath,'$ORIGIN/../build/parasail_peer/parasail:/tmp/site/parasail'
strip .whl/parasail_peer
ls -l .whl/parasail_peer
ldd .whl/parasail_peer
objdump -p .whl/parasail_peer | grep -E 'NEEDED|RUNPATH'
# newest glibc symbol version the binary needs (the box must have at least this one)
objdump -T .whl/parasail_peer | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -1
