#!/bin/sh
# Build lib/test_vmalloc.c as an out-of-tree module for Debian's arm64 kernel
# (which is built without CONFIG_TEST_VMALLOC), with this host's
# aarch64-linux-gnu-gcc. Prints the path of the .ko.
#
# usage: scripts/arm64-peer/test_vmalloc/build.sh CACHE KERNEL_PACKAGE
#   CACHE           the peer cache of boot.sh (its private apt configuration)
#   KERNEL_PACKAGE  linux-image-<release> (for example linux-image-7.2.13+deb14-arm64)
#
# How: kernel-tree.sh prepares (once) Debian's linux-source of the same
# version configured as Debian's headers package says; this script copies
# lib/test_vmalloc.c out of it, applies peer_shim.h for the one symbol the
# kernel exports only to the in-tree module, and builds it against the tree.
#
# Needs (Debian): gcc-aarch64-linux-gnu make flex bison bc libelf-dev
# libssl-dev dwarves xz-utils. One-time cost here: a 164 MB download,
# about 35 s to unpack and 30 s for modules_prepare (kernel-tree.sh).
set -eu

CACHE=${1:?usage: build.sh CACHE KERNEL_PACKAGE}
KPKG=${2:?usage: build.sh CACHE KERNEL_PACKAGE}
HERE=$(cd "$(dirname "$0")" && pwd)
RELEASE=${KPKG#linux-image-}           # 7.2.13+deb14-arm64
OUT=$CACHE/test_vmalloc/$RELEASE

if [ -e "$OUT/module/test_vmalloc.ko" ]; then
    echo "$OUT/module/test_vmalloc.ko"
    exit 0
fi
SRC=$("$HERE/../kernel-tree.sh" "$CACHE" "$KPKG")
MAKE="make -s -C $SRC ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- KERNELRELEASE=$RELEASE"
rm -rf "$OUT"
mkdir -p "$OUT/module"
M=$OUT/module
cp "$SRC/lib/test_vmalloc.c" "$HERE/peer_shim.h" "$M/"
sed -i -e 's/__vmalloc_node(/peer_vmalloc_node(/' \
    -e '/^#include <linux\/slab.h>/a #include "peer_shim.h"' \
    -e 's/^\tdo_concurrent_test();/\tif (peer_resolve())\n\t\treturn -ENOENT;\n\tdo_concurrent_test();/' \
    -e 's/^\treturn IS_BUILTIN(CONFIG_TEST_VMALLOC) ? 0:-EAGAIN;/\treturn 0;/' \
    "$M/test_vmalloc.c"
grep -q peer_resolve "$M/test_vmalloc.c" && ! grep -q EAGAIN "$M/test_vmalloc.c" ||
    { echo "build.sh: test_vmalloc.c has changed shape; peer_shim.h not applied" >&2; exit 2; }
echo 'obj-m := test_vmalloc.o' >"$M/Kbuild"
$MAKE M="$M" modules >&2
# The kernel reads the whole file into a vmalloc'd buffer to load it; without
# the debug info that is 30 pages, not 100.
aarch64-linux-gnu-strip --strip-debug "$M/test_vmalloc.ko"
echo "$M/test_vmalloc.ko"
