#!/usr/bin/env bash
# Build uet-htsim's htsim_uec (the Ultra Ethernet reference simulator) from its public repository,
# at a pinned commit, and install the binary: the htsim backend (`mrc-testbed run --backend htsim`,
# `mrc-testbed crosscheck`) runs it from PATH or from $HTSIM_UEC.
#
#   scripts/build-htsim.sh                          # into ~/.local (root: /usr/local)
#   scripts/build-htsim.sh --prefix /opt/htsim      # /opt/htsim/bin/htsim_uec
#   scripts/build-htsim.sh --commit <sha>           # another commit (docs/htsim.md says which was checked)
#   scripts/build-htsim.sh --prefix /opt/htsim-switches --measurement-switches
#                                                   # with scripts/htsim-measurement-switches.patch: the
#                                                   # build docs/htsim.md measured the model differences on
#
# Needs git, cmake (3.16 or newer), make and a C++17 compiler, and the internet (github.com).
# About 3 minutes on 2 cores. Safe to run again: an existing clone is reused.
# Exit status: 0 built, 1 a step failed, 2 bad usage, 3 a tool is missing, 4 the download failed.
set -euo pipefail

REPO_URL="${MRC_HTSIM_REPO_URL:-https://github.com/ultraethernet/uet-htsim.git}"
# Checked with the testbed (docs/htsim.md): "Clean up documentation." of 2025-08-13.
COMMIT="40ccb0526bb6297eeb22ab33f9934fb35278dbaf"
if [ "$(id -u)" = 0 ]; then PREFIX="/usr/local"; else PREFIX="$HOME/.local"; fi
SOURCE=""
SWITCHES=0
PATCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/htsim-measurement-switches.patch"
JOBS="$(nproc 2>/dev/null || echo 2)"

usage() {
    cat <<EOF
usage: scripts/build-htsim.sh [--prefix DIR] [--commit SHA] [--source DIR] [--jobs N]

Builds htsim_uec from $REPO_URL at a pinned commit
and installs it as DIR/bin/htsim_uec.

  --prefix DIR   where to install (default: $PREFIX)
  --commit SHA   the commit to build (default: $COMMIT)
  --source DIR   where to keep the clone and the build (default: DIR/src/uet-htsim)
  --jobs N       parallel compile jobs (default: $JOBS)
  --measurement-switches
                 apply htsim-measurement-switches.patch (next to this script) first:
                 MRC_NO_LASTHOP_ECN=1 and MRC_FULL_SLOW_BUFFERS=1 then switch off
                 last-hop ECN and the slowed links' smaller buffers, MRC_DATA_HEADER_BYTES,
                 MRC_ACK_BYTES and MRC_NACK_BYTES size its packets' headers (crosscheck
                 --netsim-sizes sets them; docs/htsim.md, "The differences that remain");
                 unset, it runs as the release build
  -h, --help     show this help
EOF
}

die() { printf 'build-htsim.sh: error: %s\n' "$1" >&2; exit "${2:-1}"; }
stage() { printf '\n==> build-htsim: %s\n' "$*"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || die "--prefix needs a folder" 2; PREFIX="$2"; shift 2 ;;
        --commit) [ $# -ge 2 ] || die "--commit needs a commit id" 2; COMMIT="$2"; shift 2 ;;
        --source) [ $# -ge 2 ] || die "--source needs a folder" 2; SOURCE="$2"; shift 2 ;;
        --jobs) [ $# -ge 2 ] || die "--jobs needs a number" 2; JOBS="$2"; shift 2 ;;
        --measurement-switches) SWITCHES=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown option: $1" 2 ;;
    esac
done
case "$JOBS" in ''|*[!0-9]*|0) die "--jobs $JOBS: expected a whole number, 1 or more" 2 ;; esac
SOURCE="${SOURCE:-$PREFIX/src/uet-htsim}"

stage "tools"
missing=()
for tool in git cmake make; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ! command -v c++ >/dev/null 2>&1 && ! command -v g++ >/dev/null 2>&1 && ! command -v clang++ >/dev/null 2>&1; then
    missing+=("a C++ compiler (g++ or clang++)")
fi
if [ ${#missing[@]} -gt 0 ]; then
    die "missing: ${missing[*]} (Debian/Ubuntu: sudo apt-get install git cmake make g++)" 3
fi
echo "git, cmake $(cmake --version | head -n1 | awk '{print $3}'), make and a C++ compiler found"

stage "source: $SOURCE at $COMMIT"
if [ ! -d "$SOURCE/.git" ]; then
    mkdir -p "$(dirname "$SOURCE")"
    if ! git clone --quiet "$REPO_URL" "$SOURCE"; then
        rm -rf "$SOURCE"
        die "could not download $REPO_URL (no internet here?); the testbed works without htsim, only the htsim backend needs it" 4
    fi
fi
if ! git -C "$SOURCE" cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
    git -C "$SOURCE" fetch --quiet origin || die "could not fetch from $REPO_URL (no internet here?)" 4
    git -C "$SOURCE" cat-file -e "$COMMIT^{commit}" 2>/dev/null || die "commit $COMMIT is not in $REPO_URL"
fi
[ -f "$PATCH" ] || die "$PATCH is missing (it ships next to this script)"
# a reused clone may hold the switches from an earlier build: out before the checkout (git keeps
# a checkout from overwriting them), back in afterwards only when asked for
if git -C "$SOURCE" apply --reverse --check "$PATCH" 2>/dev/null; then
    git -C "$SOURCE" apply --reverse "$PATCH" || die "could not take $PATCH out of $SOURCE"
    [ "$SWITCHES" = 1 ] || echo "the measurement switches of an earlier build taken out"
fi
git -C "$SOURCE" -c advice.detachedHead=false checkout --quiet "$COMMIT" \
    || die "git could not check out $COMMIT in $SOURCE (local changes there? git status says which)"
if [ "$SWITCHES" = 1 ]; then
    git -C "$SOURCE" apply "$PATCH" \
        || die "$PATCH does not apply to $COMMIT (it was made for $(sed -n 's/^uet-htsim \([0-9a-f]*\) .*/\1/p' "$PATCH" | head -n1))"
    echo "measurement switches applied: MRC_NO_LASTHOP_ECN, MRC_FULL_SLOW_BUFFERS, MRC_DATA_HEADER_BYTES, MRC_ACK_BYTES, MRC_NACK_BYTES"
fi

stage "build (cmake, Release, target htsim_uec, $JOBS jobs)"
BUILD="$SOURCE/htsim/sim/build"
cmake -S "$SOURCE/htsim/sim" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null \
    || die "cmake could not configure $SOURCE/htsim/sim (see above)"
cmake --build "$BUILD" --target htsim_uec -- -j "$JOBS" || die "the build of htsim_uec failed (see above)"

stage "install"
install -d "$PREFIX/bin"
install -m 0755 "$BUILD/datacenter/htsim_uec" "$PREFIX/bin/htsim_uec"
if [ "$SWITCHES" = 1 ]; then
    # the commit crosscheck's conditions name (its first word), marked as the measurement build
    printf '%s\n' "$COMMIT+measurement-switches" > "$PREFIX/bin/htsim_uec.commit"
    echo "htsim_uec (uet-htsim $COMMIT, with the measurement switches) installed at $PREFIX/bin/htsim_uec"
else
    printf '%s\n' "$COMMIT" > "$PREFIX/bin/htsim_uec.commit"     # the commit crosscheck's conditions name
    echo "htsim_uec (uet-htsim $COMMIT) installed at $PREFIX/bin/htsim_uec"
fi
case ":$PATH:" in
    *":$PREFIX/bin:"*) echo "it is on PATH: mrc-testbed crosscheck experiments/datacenter.yaml" ;;
    *) echo "not on PATH: export HTSIM_UEC=$PREFIX/bin/htsim_uec (or add $PREFIX/bin to PATH)" ;;
esac
