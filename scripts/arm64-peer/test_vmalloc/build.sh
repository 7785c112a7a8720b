#!/bin/sh
# Build lib/test_vmalloc.c as an out-of-tree module for Debian's arm64 kernel
# (which is built without CONFIG_TEST_VMALLOC), with this host's
# aarch64-linux-gnu-gcc. Prints the path of the .ko.
#
# usage: scripts/arm64-peer/test_vmalloc/build.sh CACHE KERNEL_PACKAGE
#   CACHE           the peer cache of boot.sh (its private apt configuration)
#   KERNEL_PACKAGE  linux-image-<release> (for example linux-image-7.2.13+deb14-arm64)
#
# How: Debian's linux-source of the same version, configured with the
# .config of Debian's linux-headers package for that release (olddefconfig
# re-evaluates only what depends on the compiler: this host's gcc 12 is not
# Debian's gcc 16; the options that change a structure's layout, BTF
# modules and sched_ext among them, stay as Debian built them, which needs
# pahole >= 1.22), `make modules_prepare` with KERNELRELEASE set to the
# release so that the vermagic matches, Debian's Module.symvers for modpost
# (Debian builds without CONFIG_MODVERSIONS, so no symbol CRCs are checked),
# and peer_shim.h for the one symbol the kernel exports only to the in-tree
# module. The module is unsigned: Debian's kernel loads it and taints itself
# (CONFIG_MODULE_SIG_FORCE is off and the QEMU boot has no Secure Boot).
#
# Needs (Debian): gcc-aarch64-linux-gnu make flex bison bc libelf-dev
# libssl-dev dwarves xz-utils. One-time cost here: a 164 MB download,
# about 35 s to unpack and 30 s for modules_prepare.
set -eu

CACHE=${1:?usage: build.sh CACHE KERNEL_PACKAGE}
KPKG=${2:?usage: build.sh CACHE KERNEL_PACKAGE}
HERE=$(cd "$(dirname "$0")" && pwd)
RELEASE=${KPKG#linux-image-}           # 7.2.13+deb14-arm64
UPSTREAM=${RELEASE%%+*}                # 7.2.13
SERIES=$(echo "$UPSTREAM" | cut -d. -f1-2) # 7.2
OUT=$CACHE/test_vmalloc/$RELEASE

if [ -e "$OUT/module/test_vmalloc.ko" ]; then
    echo "$OUT/module/test_vmalloc.ko"
    exit 0
fi
for t in aarch64-linux-gnu-gcc make flex bison bc pahole xz; do
    command -v "$t" >/dev/null || {
        echo "build.sh: $t not found (Debian: apt-get install gcc-aarch64-linux-gnu make flex bison bc libelf-dev libssl-dev dwarves xz-utils)" >&2
        exit 2
    }
done

APT="-o Dir::Etc::SourceList=$CACHE/apt/sources.list -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists=$CACHE/apt/lists -o Dir::Cache::Archives=$CACHE/apt/archives
     -o APT::Architecture=arm64 -o APT::Architectures::=arm64"
cd "$CACHE/debs"
for name in "linux-source-$SERIES" "linux-headers-$RELEASE"; do
    ls "${name}"_*.deb >/dev/null 2>&1 || {
        # shellcheck disable=SC2086
        apt-get $APT download "$name" >&2
    }
done

rm -rf "$OUT"
mkdir -p "$OUT/x" "$OUT/module"
dpkg-deb -x "$(ls "linux-source-${SERIES}"_*.deb | tail -1)" "$OUT/x"
dpkg-deb -x "$(ls "linux-headers-${RELEASE}"_*.deb | tail -1)" "$OUT/x"
echo "unpacking linux-source-$SERIES" >&2
tar xJf "$OUT/x/usr/src/linux-source-$SERIES.tar.xz" -C "$OUT"
SRC=$OUT/linux-source-$SERIES
HDR=$OUT/x/usr/src/linux-headers-$RELEASE
cp "$HDR/.config" "$SRC/.config"
cp "$HDR/Module.symvers" "$SRC/Module.symvers"
MAKE="make -s -C $SRC ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- KERNELRELEASE=$RELEASE"
$MAKE olddefconfig >&2
# Whatever olddefconfig changed, for the record (compiler features only, as
# long as the host's gcc and pahole are as described above).
diff "$HDR/.config" "$SRC/.config" >"$OUT/config.diff" || true
echo "modules_prepare" >&2
$MAKE -j"$(nproc)" modules_prepare >&2

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
rm -rf "$OUT/x" "$SRC"
echo "$M/test_vmalloc.ko"
