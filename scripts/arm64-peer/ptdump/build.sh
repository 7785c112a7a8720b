#!/bin/sh
# Build mmlab_ptdump.ko (the kernel's page-table dump and table pages per
# level, see mmlab_ptdump.c) for Debian's arm64 kernel, with this host's
# aarch64-linux-gnu-gcc. Prints the path of the .ko.
#
# usage: scripts/arm64-peer/ptdump/build.sh CACHE KERNEL_PACKAGE
#   CACHE           the peer cache of boot.sh (its private apt configuration)
#   KERNEL_PACKAGE  linux-image-<release> (for example linux-image-7.2.13+deb14-arm64)
#
# The kernel tree comes from ../kernel-tree.sh (Debian's linux-source and
# headers of that release, prepared once and kept in CACHE). The module is
# rebuilt when mmlab_ptdump.c is newer than the .ko.
set -eu

CACHE=${1:?usage: build.sh CACHE KERNEL_PACKAGE}
KPKG=${2:?usage: build.sh CACHE KERNEL_PACKAGE}
HERE=$(cd "$(dirname "$0")" && pwd)
RELEASE=${KPKG#linux-image-}
M=$CACHE/ptdump/$RELEASE

if [ -e "$M/mmlab_ptdump.ko" ] && [ "$M/mmlab_ptdump.ko" -nt "$HERE/mmlab_ptdump.c" ]; then
    echo "$M/mmlab_ptdump.ko"
    exit 0
fi
SRC=$("$HERE/../kernel-tree.sh" "$CACHE" "$KPKG")
rm -rf "$M"
mkdir -p "$M"
cp "$HERE/mmlab_ptdump.c" "$M/"
echo 'obj-m := mmlab_ptdump.o' >"$M/Kbuild"
make -s -C "$SRC" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- KERNELRELEASE="$RELEASE" M="$M" modules >&2
aarch64-linux-gnu-strip --strip-debug "$M/mmlab_ptdump.ko"
echo "$M/mmlab_ptdump.ko"
