#!/bin/bash
# Packs programs built here, with the shared libraries the GPU machine lacks, into one tarball to
# take to the GPU machine (../shared/device/README.md). Unlike ../shared/device/bundle.sh it works
# from a git worktree, and writes where it is told: helpers in worktrees stage their bundle inside
# the main checkout (the device tool carries only that one), e.g. /work/main/.device-attn.
#
#   tools/device/bundle.sh OUT_DIR PROGRAM...     # writes OUT_DIR/bundle.txz
#
# There: mkdir -p /tmp/b && tar -xJf OUT_DIR/bundle.txz -C /tmp/b && export PATH=/tmp/b/bin:$PATH LD_LIBRARY_PATH=/tmp/b/lib
# Left out: glibc, libstdc++/libgcc_s, the CUDA driver and the toolkit's runtime libraries (the GPU
# machine has them); everything else a program links goes into lib/.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUT_DIR PROGRAM..." >&2; exit 2; }
out=$1; shift
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$out"
skip='^(linux-vdso|/lib64/ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libgcc_s|libstdc\+\+|libcuda\.so|libcudart|libcublas|libcublasLt|libnvidia)'
for prog in "$@"; do
  [ -x "$prog" ] || { echo "not an executable: $prog" >&2; exit 2; }
  cp "$prog" "$stage/bin/"
  ldd "$prog" | awk '/=>/ {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    [ -f "$path" ] && cp -L "$path" "$stage/lib/$name"
  done
done
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/* 2>/dev/null || true
# xz: half of gzip's size (17 vs 37 MiB for strata + test_cuda + libs), and the device tool carries
# at most 64 MiB with the working tree (which holds ~40 MiB of test data and the embedded model).
rm -f "$out/bundle.tgz"
XZ_OPT="-9 -T0" tar -cJf "$out/bundle.txz" -C "$stage" bin lib
echo "wrote $out/bundle.txz ($(du -h "$out/bundle.txz" | cut -f1))"
