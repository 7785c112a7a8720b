#!/bin/sh
# Fetch Debian's arm64 kernel and a static busybox, build an initramfs that
# prints the memory-management /proc and /sys files of the booted kernel,
# boot it under qemu-system-aarch64 -M virt -cpu neoverse-n1 (TCG) and split
# the console output into one file per captured file.
#
# usage: scripts/arm64-peer/boot.sh OUTDIR [MEM] [CPUS]
#   MEM  (default 4G) and CPUS (default 2) go to qemu's -m and -smp.
# env:  PEER_CACHE  (default ~/.cache/mmlab-arm64-peer) keeps the downloads
#       PEER_SUITE  (default unstable) the Debian suite to take the kernel from
#       PEER_KERNEL (default: newest linux-image-*-arm64 of that suite) a package name
#       PEER_MIRROR (default http://deb.debian.org/debian)
#       PEER_BOOT_TRACE=1 records the boot's page allocations (boot_kmem)
#       PEER_TEST_VMALLOC=1 builds and runs lib/test_vmalloc.c (test_vmalloc),
#         one insmod per line of PEER_TEST_VMALLOC_CASES (default test_vmalloc/cases)
# Needs: root or a user allowed to `dpkg --add-architecture` once; apt, dpkg-deb,
# cpio, gzip, qemu-system-aarch64 (Debian: qemu-system-arm).
set -eu

OUT=${1:?usage: boot.sh OUTDIR [MEM] [CPUS]}
MEM=${2:-4G}
CPUS=${3:-2}
CACHE=${PEER_CACHE:-$HOME/.cache/mmlab-arm64-peer}
SUITE=${PEER_SUITE:-unstable}
MIRROR=${PEER_MIRROR:-http://deb.debian.org/debian}
HERE=$(cd "$(dirname "$0")" && pwd)

for t in apt-get dpkg-deb cpio gzip qemu-system-aarch64; do
    command -v "$t" >/dev/null || { echo "boot.sh: $t not found (Debian: apt-get install qemu-system-arm cpio)" >&2; exit 2; }
done

mkdir -p "$CACHE/apt/lists/partial" "$CACHE/apt/archives/partial" "$CACHE/debs" "$OUT"

# A private apt configuration for the chosen suite, so the system's sources
# stay as they are. arm64 must be a foreign architecture of dpkg for apt to
# resolve arm64 packages.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
fi
cat >"$CACHE/apt/sources.list" <<SRC
deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $SUITE main
SRC
APT="-o Dir::Etc::SourceList=$CACHE/apt/sources.list -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists=$CACHE/apt/lists -o Dir::Cache::Archives=$CACHE/apt/archives
     -o APT::Architecture=arm64 -o APT::Architectures::=arm64"
if [ ! -e "$CACHE/apt/updated" ]; then
    # shellcheck disable=SC2086
    apt-get $APT update >&2
    touch "$CACHE/apt/updated"
fi

if [ -z "${PEER_KERNEL:-}" ]; then
    # The newest generic arm64 image package of the suite (not -rt,
    # -cloud or -16k).
    # shellcheck disable=SC2086
    PEER_KERNEL=$(apt-cache $APT pkgnames linux-image- | grep -E '^linux-image-[0-9][^-]*-arm64$' | sort -V | tail -1)
fi
[ -n "$PEER_KERNEL" ] || { echo "boot.sh: no linux-image-*-arm64 in $SUITE" >&2; exit 2; }
echo "kernel package: $PEER_KERNEL" >&2

# Debian 7.x splits the image package: vmlinuz is in linux-binary-<version>.
BINARY=linux-binary-${PEER_KERNEL#linux-image-}
cd "$CACHE/debs"
chmod 777 . 2>/dev/null || true # apt's _apt user writes here
for name in "$PEER_KERNEL" "$BINARY" busybox-static; do
    ls "${name}"_*_arm64.deb >/dev/null 2>&1 || {
        # shellcheck disable=SC2086
        apt-get $APT download "$name:arm64" >&2 || [ "$name" = "$BINARY" ]
    }
done
KDEB=$(ls "${PEER_KERNEL}"_*_arm64.deb | tail -1)
BDEB=$(ls busybox-static_*_arm64.deb | tail -1)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for d in "${PEER_KERNEL}"_*_arm64.deb "${BINARY}"_*_arm64.deb; do
    [ -e "$d" ] && dpkg-deb -x "$d" "$WORK/k"
done
dpkg-deb -x "$BDEB" "$WORK/bb"
VMLINUZ=$(find "$WORK/k" -name 'vmlinuz*' -type f | head -1)
[ -n "$VMLINUZ" ] || { echo "boot.sh: no vmlinuz in $KDEB or $BINARY" >&2; exit 2; }

# The initramfs: busybox and an /init that prints the files between markers.
R="$WORK/root"
mkdir -p "$R/bin" "$R/proc" "$R/sys" "$R/dev"
cp "$(find "$WORK/bb" -name busybox -type f -perm -u+x | head -1)" "$R/bin/busybox"
for a in sh mount cat ls poweroff echo find sleep uname dmesg grep sed; do ln -s busybox "$R/bin/$a"; done
cp "$HERE/init" "$R/init"
# PEER_BOOT_TRACE=1: record every page allocation and free of the boot
# (kmem events enabled from the command line, before the first initcall),
# printed by /init as boot_kmem.
APPEND_TRACE=""
if [ "${PEER_BOOT_TRACE:-0}" = 1 ]; then
    APPEND_TRACE=" trace_event=kmem:mm_page_alloc,kmem:mm_page_free,kmem:mm_page_free_batched trace_buf_size=4M"
    touch "$R/boot_trace"
fi
# PEER_TEST_VMALLOC=1: build lib/test_vmalloc.c for this kernel (see
# test_vmalloc/build.sh) and run it once per line of PEER_TEST_VMALLOC_CASES
# (default test_vmalloc/cases), printed by /init as test_vmalloc.
if [ "${PEER_TEST_VMALLOC:-0}" = 1 ]; then
    KO=$("$HERE/test_vmalloc/build.sh" "$CACHE" "$PEER_KERNEL")
    cp "$KO" "$R/test_vmalloc.ko"
    cp "${PEER_TEST_VMALLOC_CASES:-$HERE/test_vmalloc/cases}" "$R/test_vmalloc.cases"
    for a in insmod rmmod; do ln -sf busybox "$R/bin/$a"; done
fi
chmod 755 "$R/init"
(cd "$R" && find . | cpio -o -H newc 2>/dev/null | gzip -9) >"$WORK/initrd.gz"

# TCG: about 25 s on a current x86_64 host.
timeout 600 qemu-system-aarch64 -M virt -cpu neoverse-n1 -smp "$CPUS" -m "$MEM" -nographic -no-reboot \
    -kernel "$VMLINUZ" -initrd "$WORK/initrd.gz" \
    -append "nokaslr no_hash_pointers console=ttyAMA0 rdinit=/init$APPEND_TRACE" </dev/null >"$OUT/console.raw" 2>&1 || true

# Split: every file sits between "=== BEGIN name ===" and "=== END name ===".
tr -d '\r' <"$OUT/console.raw" | awk -v out="$OUT" '
    /^=== BEGIN / { f = $3; gsub("/", "_", f); sub("^_", "", f); file = out "/" f; printf "" > file; next }
    /^=== END /   { close(file); file = ""; next }
    file != ""    { print >> file }
'
echo "$PEER_KERNEL ($(basename "$KDEB"))" >"$OUT/kernel.txt"
echo "qemu-system-aarch64 -M virt -cpu neoverse-n1 -smp $CPUS -m $MEM" >>"$OUT/kernel.txt"
rm -f "$OUT/console.raw"
ls "$OUT"
