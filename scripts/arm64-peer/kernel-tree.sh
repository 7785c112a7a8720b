#!/bin/sh
# Prepare a kernel tree to build out-of-tree modules for Debian's arm64
# kernel with this host's aarch64-linux-gnu-gcc, and print its path. The
# tree is kept in the peer cache: the first call downloads and builds
# (164 MB, about a minute of modules_prepare here), later calls print the
# path at once.
#
# usage: scripts/arm64-peer/kernel-tree.sh CACHE KERNEL_PACKAGE
#   CACHE           the peer cache of boot.sh (its private apt configuration)
#   KERNEL_PACKAGE  linux-image-<release> (for example linux-image-7.2.13+deb14-arm64)
#
# How: Debian's linux-source of the same version, configured with the
# .config of Debian's linux-headers package for that release (olddefconfig
# re-evaluates only what depends on the compiler: this host's gcc 12 is not
# Debian's gcc 16; the options that change a structure's layout, BTF
# modules and sched_ext among them, stay as Debian built them, which needs
# pahole >= 1.22), `make modules_prepare` with KERNELRELEASE set to the
# release so that the vermagic matches, and Debian's Module.symvers for
# modpost (Debian builds without CONFIG_MODVERSIONS, so no symbol CRCs are
# checked). What olddefconfig changed is kept in config.diff beside the tree.
# A module built against it is unsigned: Debian's kernel loads it and taints
# itself (CONFIG_MODULE_SIG_FORCE is off and the QEMU boot has no Secure Boot).
#
# Needs (Debian): gcc-aarch64-linux-gnu make flex bison bc libelf-dev
# libssl-dev dwarves xz-utils.
set -eu

CACHE=${1:?usage: kernel-tree.sh CACHE KERNEL_PACKAGE}
KPKG=${2:?usage: kernel-tree.sh CACHE KERNEL_PACKAGE}
RELEASE=${KPKG#linux-image-}           # 7.2.13+deb14-arm64
UPSTREAM=${RELEASE%%+*}                # 7.2.13
SERIES=$(echo "$UPSTREAM" | cut -d. -f1-2) # 7.2
OUT=$CACHE/kbuild/$RELEASE
SRC=$OUT/linux-source-$SERIES

if [ -e "$OUT/prepared" ]; then
    echo "$SRC"
    exit 0
fi
for t in aarch64-linux-gnu-gcc make flex bison bc pahole xz; do
    command -v "$t" >/dev/null || {
        echo "kernel-tree.sh: $t not found (Debian: apt-get install gcc-aarch64-linux-gnu make flex bison bc libelf-dev libssl-dev dwarves xz-utils)" >&2
        exit 2
    }
done

APT="-o Dir::Etc::SourceList=$CACHE/apt/sources.list -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists=$CACHE/apt/lists -o Dir::Cache::Archives=$CACHE/apt/archives
     -o APT::Architecture=arm64 -o APT::Architectures::=arm64"
mkdir -p "$CACHE/debs"
cd "$CACHE/debs"
for name in "linux-source-$SERIES" "linux-headers-$RELEASE"; do
    ls "${name}"_*.deb >/dev/null 2>&1 || {
        # shellcheck disable=SC2086
        apt-get $APT download "$name" >&2
    }
done

rm -rf "$OUT"
mkdir -p "$OUT/x"
dpkg-deb -x "$(ls "linux-source-${SERIES}"_*.deb | tail -1)" "$OUT/x"
dpkg-deb -x "$(ls "linux-headers-${RELEASE}"_*.deb | tail -1)" "$OUT/x"
echo "kernel-tree.sh: unpacking linux-source-$SERIES" >&2
tar xJf "$OUT/x/usr/src/linux-source-$SERIES.tar.xz" -C "$OUT"
HDR=$OUT/x/usr/src/linux-headers-$RELEASE
cp "$HDR/.config" "$SRC/.config"
cp "$HDR/Module.symvers" "$SRC/Module.symvers"
MAKE="make -s -C $SRC ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- KERNELRELEASE=$RELEASE"
$MAKE olddefconfig >&2
# Whatever olddefconfig changed, for the record (compiler features only, as
# long as the host's gcc and pahole are as described above).
diff "$HDR/.config" "$SRC/.config" >"$OUT/config.diff" || true
echo "kernel-tree.sh: modules_prepare" >&2
$MAKE -j"$(nproc)" modules_prepare >&2
rm -rf "$OUT/x"
touch "$OUT/prepared"
echo "$SRC"
