#!/bin/sh
# Make the set of captures committed under tests/data/arm64-peer/, one boot
# after another (boot.sh), into DEST:
#
#   1G-1cpu  4G-2cpu  16G-4cpu            one boot each; 4G-2cpu with
#                                         PEER_TEST_VMALLOC=1 (test_vmalloc)
#   spread/<config>/boot2, boot3          two more boots of each of the three,
#                                         for the boot-to-boot spread
#   4G-2cpu-rodata-noalias                PEER_APPEND=rodata=noalias
#   4G-2cpu-rodata-on                     PEER_APPEND=rodata=on
#   4G-2cpu-kfence                        PEER_APPEND=kfence.sample_interval=100
#   4G-2cpu-cpu-max                       PEER_CPU=max (FEAT_LPA2: 52-bit VA, 5 levels)
#
# usage: scripts/arm64-peer/capture-set.sh DEST [NAME...]
#   NAME  only these captures (as named above, e.g. 4G-2cpu spread/4G-2cpu/boot2)
# Stops at the first boot that fails. console.raw stays in each directory;
# copy-captures.sh leaves it out of the repository.
set -eu

DEST=${1:?usage: capture-set.sh DEST [NAME...]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
ALL="1G-1cpu 4G-2cpu 16G-4cpu
     spread/1G-1cpu/boot2 spread/1G-1cpu/boot3 spread/4G-2cpu/boot2 spread/4G-2cpu/boot3
     spread/16G-4cpu/boot2 spread/16G-4cpu/boot3
     4G-2cpu-rodata-noalias 4G-2cpu-rodata-on 4G-2cpu-kfence 4G-2cpu-cpu-max"
NAMES=${*:-$ALL}

for name in $NAMES; do
    case $name in
        */1G-1cpu/*|1G-1cpu) mem=1G cpus=1 ;;
        */16G-4cpu/*|16G-4cpu) mem=16G cpus=4 ;;
        *) mem=4G cpus=2 ;;
    esac
    tv=0 append="" cpu=""
    case $name in
        4G-2cpu) tv=1 ;;
        *-rodata-noalias) append=rodata=noalias ;;
        *-rodata-on) append=rodata=on ;;
        *-kfence) append=kfence.sample_interval=100 ;;
        *-cpu-max) cpu=max ;;
        1G-1cpu|16G-4cpu|spread/*) ;;
        *) echo "capture-set.sh: unknown capture $name" >&2; exit 2 ;;
    esac
    echo "capture-set.sh: $name (-m $mem -smp $cpus${cpu:+ -cpu $cpu}${append:+, $append}$([ "$tv" = 1 ] && echo ", test_vmalloc"))" >&2
    PEER_TEST_VMALLOC=$tv PEER_APPEND=$append PEER_CPU=${cpu:-neoverse-n1} \
        "$HERE/boot.sh" "$DEST/$name" "$mem" "$cpus" >/dev/null
done
