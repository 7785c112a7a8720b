#!/usr/bin/env bash
# The aarch64 test leg.
#
# On an x86_64 Debian 12 host this cross-builds the whole workspace for
# aarch64-unknown-linux-gnu with Debian's Rust toolchain (rustc-web/cargo-web,
# which ships the aarch64 std as libstd-rust-web-dev:arm64) and runs
# `cargo test --workspace` under qemu-user. On a native arm64 host it just runs
# `cargo test --workspace`.
#
# Usage: scripts/test-aarch64.sh [extra `cargo test` args...]
#   e.g. scripts/test-aarch64.sh -p mmlab-buddy -- --test-threads=1
#
# Environment:
#   MMLAB_TEST_SCALE          divisor for long test workloads (default 8 under qemu)
#   CARGO_PROFILE_DEV_OPT_LEVEL, CARGO_PROFILE_DEV_DEBUG
#                             the test build's (default 1 and line-tables-only)
#   MMLAB_AARCH64_CARGO_HOME  CARGO_HOME for Debian's cargo
#                             (default: ~/.cache/mmlab/aarch64-cargo-home, outside
#                             the tree, so that the crates it unpacks are not
#                             mistaken for the project's sources)
#
# Why Debian's cargo/rustc and not rustup's: rustup cannot download the aarch64
# std here (only the Debian and crates.io registries are reachable), while
# Debian packages it. Both toolchains stay separate: own target dir, own
# CARGO_HOME, RUSTC/RUSTDOC pinned to /usr/bin, rustup's dirs removed from PATH.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

TARGET=aarch64-unknown-linux-gnu
# Keep in sync with .ci/run.
APT_PACKAGES=(rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu
	libc6-dev-arm64-cross qemu-user-static)

say() { printf '[test-aarch64] %s\n' "$*"; }
die() {
	printf '[test-aarch64] error: %s\n' "$*" >&2
	exit 1
}

# --workspace unless the caller picked packages (-p/--package before `--`).
scope=(--workspace)
for a in "$@"; do
	case "$a" in
	--) break ;;
	-p | -p?* | --package | --package=*) scope=() ;;
	esac
done

# --- native arm64: nothing to emulate ---------------------------------------
if [[ "$(uname -m)" == aarch64 ]]; then
	say "native aarch64 host: cargo test ${scope[*]} $*"
	exec cargo test "${scope[@]}" "$@"
fi

[[ "$(uname -m)" == x86_64 ]] || die "unsupported host $(uname -m) (expected x86_64 or aarch64)"

# --- (a) Debian packages ----------------------------------------------------
missing_packages() {
	local p
	for p in "${APT_PACKAGES[@]}"; do
		[[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] ||
			printf '%s\n' "$p"
	done
}

command -v dpkg-query >/dev/null || die "needs a Debian/Ubuntu host with apt (packages: ${APT_PACKAGES[*]})"
mapfile -t MISSING < <(missing_packages)
if ((${#MISSING[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		cat >&2 <<EOF
[test-aarch64] missing Debian packages: ${MISSING[*]}
Install them as root, then re-run:
    dpkg --add-architecture arm64
    apt-get update
    apt-get install -y ${APT_PACKAGES[*]}
EOF
		exit 1
	fi
	say "installing: ${MISSING[*]}"
	dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${APT_PACKAGES[@]}"
	mapfile -t MISSING < <(missing_packages)
	((${#MISSING[@]} == 0)) || die "still missing after apt-get install: ${MISSING[*]}"
fi

# --- (b) environment: Debian's toolchain, nothing from rustup ---------------
# /usr/bin/cargo runs whatever `rustc` is first on PATH unless RUSTC is set;
# with ~/.cargo/bin on PATH that is rustup's rustc, which has no aarch64 std.
CARGO_BIN=/usr/bin/cargo
export RUSTC=/usr/bin/rustc
# cargo >= 1.89 runs doctests for cross targets too, so rustdoc must match.
export RUSTDOC=/usr/bin/rustdoc

clean_path=/usr/bin:/bin:/usr/sbin:/sbin
IFS=: read -r -a path_entries <<<"${PATH:-}"
for d in "${path_entries[@]}"; do
	case "$d" in
	"" | */.cargo/bin | */.cargo/bin/ | *rustup* | "${CARGO_HOME:-/nonexistent}"/bin) ;;
	/usr/bin | /bin | /usr/sbin | /sbin) ;;
	*) clean_path+=":$d" ;;
	esac
done
export PATH=$clean_path

unset RUSTUP_TOOLCHAIN RUSTUP_HOME RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER \
	CARGO_BUILD_RUSTC CARGO_BUILD_RUSTDOC CARGO_BUILD_RUSTC_WRAPPER \
	CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER CARGO_BUILD_TARGET CARGO CARGO_MANIFEST_DIR

export CARGO_TARGET_DIR="$ROOT/target-aarch64"
# A CARGO_HOME of its own: Debian's cargo (newer than rustup's) must not share
# rustup's registry cache/lock and its global-cache database.
USER_CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
export CARGO_HOME=${MMLAB_AARCH64_CARGO_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/mmlab/aarch64-cargo-home}
mkdir -p "$CARGO_HOME"
# Keep the user's registry/network settings (mirrors, proxies), if any.
for f in config.toml config; do
	if [[ -f "$USER_CARGO_HOME/$f" && ! -e "$CARGO_HOME/$f" ]]; then
		cp "$USER_CARGO_HOME/$f" "$CARGO_HOME/$f"
	fi
done

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
# -L makes qemu load the guest's ld.so from the cross sysroot (libc6-arm64-cross).
# That ld.so would still pick up /lib/aarch64-linux-gnu/libc.so.6 from the
# multiarch libc6:arm64 (pulled in by libstd-rust-web-dev:arm64) when the two
# glibc builds differ, e.g. 2.36-8cross1 vs 2.36-9+deb12u14, and the mix hangs
# in pthread_create. Point the guest's LD_LIBRARY_PATH at the cross sysroot so
# ld.so and libc always come from the same package.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib"
export MMLAB_TEST_SCALE=${MMLAB_TEST_SCALE:-8}
# Optimised test code with the debug build's checks: under qemu-user an
# unoptimised test run took 1,263 s and an opt-level=1 one 127 s (same
# tests, MMLAB_TEST_SCALE=16), for a build about 1.7x longer.
# debug-assertions and overflow-checks stay on (the dev profile's);
# line tables keep panics' backtraces readable.
export CARGO_PROFILE_DEV_OPT_LEVEL=${CARGO_PROFILE_DEV_OPT_LEVEL:-1}
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}

# --- preflight ---------------------------------------------------------------
[[ -x $CARGO_BIN && -x $RUSTC && -x $RUSTDOC ]] || die "Debian's cargo/rustc/rustdoc not found in /usr/bin (install rustc-web cargo-web)"
say "cargo:  $($CARGO_BIN --version)"
say "rustc:  $($RUSTC --version)  ($RUSTC)"
say "qemu:   $(qemu-aarch64-static --version | head -n1)"
say "target dir: $CARGO_TARGET_DIR   CARGO_HOME: $CARGO_HOME   MMLAB_TEST_SCALE=$MMLAB_TEST_SCALE"

libdir=$($RUSTC --print target-libdir --target "$TARGET")
compgen -G "$libdir/libstd-*.rlib" >/dev/null ||
	die "no std for $TARGET in $libdir (install libstd-rust-web-dev:arm64, same version as rustc-web)"

# Smoke test: link, spawn a thread, run the barriers under qemu. Catches a
# std/rustc version skew, a broken linker setup or the glibc mix-up above
# with a clear message instead of a hung test run.
smoke=$CARGO_TARGET_DIR/smoke
mkdir -p "$smoke"
cat >"$smoke/smoke.rs" <<'EOF'
fn main() {
    let t = std::thread::spawn(|| {
        // SAFETY: barrier instructions have no memory-safety preconditions.
        unsafe { core::arch::asm!("dsb ishst", "isb", "dmb ish", options(nostack, preserves_flags)) };
        std::env::consts::ARCH
    });
    println!("smoke ok: {}", t.join().unwrap());
}
EOF
$RUSTC --edition 2024 --target "$TARGET" -C linker="$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER" \
	-o "$smoke/smoke" "$smoke/smoke.rs" || die "cannot build a trivial $TARGET program"
# shellcheck disable=SC2086 # the runner is a command line
out=$(timeout 120 $CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER "$smoke/smoke") ||
	die "trivial $TARGET program failed or hung under qemu (rc=$?)"
[[ $out == "smoke ok: aarch64" ]] || die "unexpected smoke output: $out"
say "$out"

# Cargo.lock is written by rustup's cargo; Debian's cargo must use it as is.
if ! $CARGO_BIN metadata --locked --format-version 1 >/dev/null; then
	die "Cargo.lock is missing or out of date. Update it with the host toolchain \
(rustup's cargo, e.g. \`cargo test --workspace\` or \`cargo update --workspace\`), then re-run; \
this script never rewrites it with Debian's cargo."
fi

# --- (c) build and test under qemu -----------------------------------------
# `cargo test` builds no bench targets; doctests are cross-built and run too.
say "$CARGO_BIN test ${scope[*]} --target $TARGET --locked $*"
start=$SECONDS
$CARGO_BIN test "${scope[@]}" --target "$TARGET" --locked "$@"
say "done in $((SECONDS - start))s"
