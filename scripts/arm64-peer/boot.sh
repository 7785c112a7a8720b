#!/bin/sh
# Fetch Debian's arm64 kernel and a static busybox, build an initramfs that
# prints the memory-management /proc and /sys files of the booted kernel
# (and, with the ptdump module, its page tables), boot it under
# qemu-system-aarch64 -M virt (TCG) and split the console output into one
# file per captured file. Exits non-zero, naming what is missing, when qemu
# fails, the guest does not reach the end of /init, or a file expected from
# it is missing or empty.
#
# usage: scripts/arm64-peer/boot.sh OUTDIR [MEM] [CPUS]
#   MEM  (default 4G) and CPUS (default 2) go to qemu's -m and -smp.
# env:  PEER_CACHE  (default ~/.cache/mmlab-arm64-peer) keeps the downloads
#       PEER_SUITE  (default unstable) the Debian suite to take the kernel from
#       PEER_KERNEL (default: newest linux-image-*-arm64 of that suite) a package name
#       PEER_MIRROR (default http://deb.debian.org/debian)
#       PEER_CPU    (default neoverse-n1) qemu's -cpu (max: FEAT_LPA2, 52-bit VA)
#       PEER_APPEND extra kernel command-line options (rodata=noalias,
#                   kfence.sample_interval=100, ...)
#       PEER_PTDUMP (default 1) loads ptdump/mmlab_ptdump.ko after the /proc
#         files are read: kernel_page_tables and pgtable_pages; 0 does not
#       PEER_BOOT_TRACE=1 records the boot's page allocations (boot_kmem)
#       PEER_TEST_VMALLOC=1 runs lib/test_vmalloc.c (test_vmalloc), one insmod
#         per line of PEER_TEST_VMALLOC_CASES (default test_vmalloc/cases)
#       PEER_MODULES (default 1) builds the two modules (once, into PEER_CACHE,
#         with aarch64-linux-gnu-gcc; see kernel-tree.sh) and puts both in the
#         initramfs whatever runs; 0 leaves them out (and PEER_PTDUMP must be 0)
# Writes OUTDIR/console.raw (the whole console output, kept for a post
# mortem), OUTDIR/kernel.txt (package, qemu command line, extra options) and
# one file per captured file.
# Needs: root or a user allowed to `dpkg --add-architecture` once; apt, dpkg-deb,
# cpio, gzip, qemu-system-aarch64 (Debian: qemu-system-arm).
set -eu

OUT=${1:?usage: boot.sh OUTDIR [MEM] [CPUS]}
MEM=${2:-4G}
CPUS=${3:-2}
CPU=${PEER_CPU:-neoverse-n1}
EXTRA=${PEER_APPEND:-}
PTDUMP=${PEER_PTDUMP:-1}
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
for a in sh mount cat ls poweroff echo find sleep uname dmesg grep sed dd rm; do ln -s busybox "$R/bin/$a"; done
cp "$HERE/init" "$R/init"
# The modules (ptdump/ and test_vmalloc/, built once per kernel into the
# cache) are in every initramfs, whether they run or not, so that every
# capture of a kernel boots the same initramfs (the initrd's size is part of
# what the kernel frees at boot); /peer.conf, of the same size whatever it
# says, tells /init what to run.
BOOT_TRACE=${PEER_BOOT_TRACE:-0}
TEST_VMALLOC=${PEER_TEST_VMALLOC:-0}
for v in "$PTDUMP" "$TEST_VMALLOC"; do
    case $v in 0|1) ;; *) echo "boot.sh: PEER_PTDUMP and PEER_TEST_VMALLOC take 0 or 1, not '$v'" >&2; exit 2 ;; esac
done
case $BOOT_TRACE in 0|1|2) ;; *) echo "boot.sh: PEER_BOOT_TRACE takes 0, 1 or 2, not '$BOOT_TRACE'" >&2; exit 2 ;; esac
if [ "${PEER_MODULES:-1}" = 1 ]; then
    cp "$("$HERE/ptdump/build.sh" "$CACHE" "$PEER_KERNEL")" "$R/mmlab_ptdump.ko"
    cp "$("$HERE/test_vmalloc/build.sh" "$CACHE" "$PEER_KERNEL")" "$R/test_vmalloc.ko"
    cp "${PEER_TEST_VMALLOC_CASES:-$HERE/test_vmalloc/cases}" "$R/test_vmalloc.cases"
    for a in insmod rmmod; do ln -sf busybox "$R/bin/$a"; done
elif [ "$PTDUMP" = 1 ] || [ "$TEST_VMALLOC" = 1 ]; then
    echo "boot.sh: PEER_MODULES=0 leaves out the modules that PEER_PTDUMP=1 or PEER_TEST_VMALLOC=1 run" >&2
    exit 2
fi
printf 'ptdump=%s\ntest_vmalloc=%s\nboot_trace=%s\n' "$PTDUMP" "$TEST_VMALLOC" "$BOOT_TRACE" >"$R/peer.conf"
# PEER_BOOT_TRACE=1: record every page allocation and free of the boot and
# the allocator's decisions (pcp refills and drains, zone-locked blocks):
# kmem events enabled from the command line, before the first initcall,
# printed by /init as boot_kmem. PEER_BOOT_TRACE=2: the same events switched
# on after boot by /init around a small workload (4 MiB written to a
# ramfs file and removed, twice), printed as workload_kmem, with
# /proc/zoneinfo just before as workload_zoneinfo.
APPEND_TRACE=""
if [ "$BOOT_TRACE" = 1 ]; then
    APPEND_TRACE=" trace_event=kmem:mm_page_alloc,kmem:mm_page_free,kmem:mm_page_free_batched,kmem:mm_page_alloc_zone_locked,kmem:mm_page_pcpu_drain trace_buf_size=4M"
fi
chmod 755 "$R/init"
(cd "$R" && find . | cpio -o -H newc 2>/dev/null | gzip -9) >"$WORK/initrd.gz"

# TCG: about 25 s on a current x86_64 host. -nic none: the virt machine's
# default NIC needs ipxe's efi-virtio.rom, and the guest uses no network.
APPEND="nokaslr no_hash_pointers console=ttyAMA0 rdinit=/init$APPEND_TRACE${EXTRA:+ $EXTRA}"
QEMU="qemu-system-aarch64 -M virt -cpu $CPU -smp $CPUS -m $MEM -nic none"
# A capture from an earlier run in OUTDIR must not pass for this one.
for f in console.raw kernel.txt proc_zoneinfo proc_buddyinfo proc_pagetypeinfo proc_meminfo proc_vmstat \
    proc_vmallocinfo proc_cmdline proc_version proc_sys_vm_min_free_kbytes proc_sys_vm_lowmem_reserve_ratio \
    proc_sys_vm_percpu_pagelist_high_fraction sys_kernel_mm_hugepages dmesg kernel_page_tables pgtable_pages \
    boot_kmem workload_kmem workload_zoneinfo test_vmalloc; do
    rm -f "$OUT/$f"
done
rc=0
# shellcheck disable=SC2086
timeout 1200 $QEMU -nographic -no-reboot -kernel "$VMLINUZ" -initrd "$WORK/initrd.gz" \
    -append "$APPEND" </dev/null >"$OUT/console.raw" 2>&1 || rc=$?

# Split: every file sits between "=== BEGIN name ===" and "=== END name ===".
tr -d '\r' <"$OUT/console.raw" | awk -v out="$OUT" '
    /^=== BEGIN / { f = $3; gsub("/", "_", f); sub("^_", "", f); file = out "/" f; printf "" > file; next }
    /^=== END /   { close(file); file = ""; next }
    file != ""    { print >> file }
'
{
    echo "$PEER_KERNEL ($(basename "$KDEB"))"
    echo "$QEMU"
    echo "append: ${EXTRA}"
} >"$OUT/kernel.txt"

# What must have arrived: every file /init prints for this configuration,
# each non-empty, and the end marker after them.
EXPECTED="proc_zoneinfo proc_buddyinfo proc_pagetypeinfo proc_meminfo proc_vmstat proc_vmallocinfo
    proc_cmdline proc_version proc_sys_vm_min_free_kbytes proc_sys_vm_lowmem_reserve_ratio
    proc_sys_vm_percpu_pagelist_high_fraction sys_kernel_mm_hugepages dmesg"
[ "$PTDUMP" = 1 ] && EXPECTED="$EXPECTED kernel_page_tables pgtable_pages"
[ "$BOOT_TRACE" = 1 ] && EXPECTED="$EXPECTED boot_kmem"
[ "$BOOT_TRACE" = 2 ] && EXPECTED="$EXPECTED workload_kmem workload_zoneinfo"
[ "$TEST_VMALLOC" = 1 ] && EXPECTED="$EXPECTED test_vmalloc"
missing=""
for f in $EXPECTED; do
    [ -s "$OUT/$f" ] || missing="$missing $f"
done
done_marker=0
tr -d '\r' <"$OUT/console.raw" | grep -qx '=== mmlab-peer: done ===' && done_marker=1
status=0
if [ "$rc" != 0 ]; then
    if [ "$rc" = 124 ]; then
        echo "boot.sh: qemu timed out (1200 s); the console's last lines:" >&2
    else
        echo "boot.sh: qemu exited with status $rc; the console's last lines:" >&2
    fi
    tail -5 "$OUT/console.raw" >&2
    status=1
fi
if [ "$done_marker" != 1 ]; then
    echo "boot.sh: the guest did not reach the end of /init (no '=== mmlab-peer: done ===' in $OUT/console.raw)" >&2
    status=1
fi
if [ -n "$missing" ]; then
    echo "boot.sh: missing or empty in $OUT:$missing" >&2
    status=1
fi
if [ "$PTDUMP" = 1 ] && [ -s "$OUT/pgtable_pages" ] && grep -q '^error' "$OUT/pgtable_pages"; then
    echo "boot.sh: the ptdump module reported: $(grep '^error' "$OUT/pgtable_pages")" >&2
    status=1
fi
ls "$OUT"
exit $status
