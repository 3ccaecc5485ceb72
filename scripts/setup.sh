#!/usr/bin/env bash
# Set up the MRC testbed on Debian 12 or Ubuntu 22.04:
#   1. the Debian packages the testbed runs (as root; skipped when all are present),
#   2. a Python virtual environment (<repo>/.venv, or $MRC_VENV) made with the python3 on PATH,
#   3. the project installed in it, editable, with its test extras,
#   4. the compiled build of the simulator's hot path (python -m speedups build; pure Python if it fails,
#      as with --user-only on a machine without gcc or Python's headers).
# Safe to run again: every stage checks what is there and only adds what is missing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${MRC_VENV:-$REPO/.venv}"
PYTHON="${PYTHON:-python3}"
MIN_PYTHON="3.10"

# Debian packages the testbed needs at run time (README.md, "Set-up" lists the same).
APT_PACKAGES=(mininet iproute2 iputils-ping ethtool tcpdump tshark procps)
# What compiles the simulator's hot path (speedups): a C compiler; Python's headers are added when missing.
BUILD_PACKAGES=(gcc)
# With --dev: tools of the static checks in tests/ (shell scripts, Vagrantfile), and the sshd that the
# namespace servers of the cluster tests run (testbed/local_servers.py), and the sudo that Mininet's cluster
# edition calls even as root; CI uses them.
DEV_PACKAGES=(shellcheck ruby openssh-server sudo)

usage() {
    cat <<EOF
usage: scripts/setup.sh [--user-only] [--dev]

Installs the Debian packages the testbed needs (as root), creates the Python virtual
environment $VENV and installs the project in it with its test extras.

  --user-only   no root, no Debian packages: the virtual environment (and the compiled build
                where gcc and Python's headers are already there)
  --pure        skip the compiled build of the simulator (pure Python, about half the speed)
  --dev         also install ${DEV_PACKAGES[*]} (static checks and namespace servers of the tests)
  -h, --help    show this help

Environment: PYTHON (interpreter for the venv, default python3), MRC_VENV (venv folder).
EOF
}

stage() { printf '\n==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() { printf 'setup.sh: error: %s\n' "$*" >&2; exit 1; }

parse_args() {
    USER_ONLY=0
    DEV=0
    PURE=0
    while [ $# -gt 0 ]; do
        case "$1" in
            --user-only) USER_ONLY=1 ;;
            --dev) DEV=1 ;;
            --pure) PURE=1 ;;
            -h|--help) usage; exit 0 ;;
            *) usage >&2; die "unknown option: $1" ;;
        esac
        shift
    done
}

check_privileges() {
    if [ "$USER_ONLY" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
        die "installing Debian packages needs root: run 'sudo scripts/setup.sh', or 'scripts/setup.sh --user-only' to build only the virtual environment"
    fi
}

check_python() {
    command -v "$PYTHON" >/dev/null 2>&1 || die "no '$PYTHON' on PATH (set PYTHON=/path/to/python3)"
    "$PYTHON" -c "import sys; sys.exit(sys.version_info < tuple(map(int, '$MIN_PYTHON'.split('.'))))" \
        || die "$("$PYTHON" -V 2>&1) is too old: the testbed needs Python >= $MIN_PYTHON"
}

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

install_debian_packages() {
    stage "1/4 Debian packages"
    if [ "$USER_ONLY" -eq 1 ]; then
        info "skipped (--user-only)"
        command -v mnexec >/dev/null 2>&1 || info "note: no mnexec on PATH: Mininet tests will be skipped"
        return
    fi
    command -v dpkg-query >/dev/null 2>&1 || die "this is not a Debian/Ubuntu system (no dpkg-query)"
    local wanted=("${APT_PACKAGES[@]}") missing=() pkg
    if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        wanted+=(python3-venv)
    fi
    if [ "$PURE" -eq 0 ]; then
        wanted+=("${BUILD_PACKAGES[@]}")
        if ! "$PYTHON" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
            # the headers of this interpreter's version (python3-dev has only the default one's)
            wanted+=("python$("$PYTHON" -V 2>&1 | sed -E 's/^Python ([0-9]+\.[0-9]+).*/\1/')-dev")
        fi
    fi
    if [ "$DEV" -eq 1 ]; then
        wanted+=("${DEV_PACKAGES[@]}")
    fi
    for pkg in "${wanted[@]}"; do
        is_installed "$pkg" || missing+=("$pkg")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        info "already installed: ${wanted[*]}"
        return
    fi
    info "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture; answer "no" instead of prompting.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
}

create_venv() {
    stage "2/4 Python virtual environment: $VENV"
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
        info "reusing it ($("$VENV/bin/python" -V 2>&1))"
        return
    fi
    info "creating it with $(command -v "$PYTHON") ($("$PYTHON" -V 2>&1))"
    "$PYTHON" -m venv "$VENV" || die "could not create $VENV (on Debian/Ubuntu: apt-get install python3-venv)"
}

install_project() {
    stage "3/4 mrc-testbed and its dependencies (editable, with test extras)"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off -q \
        -e "${REPO}[test,speedups]"
    "$VENV/bin/mrc-testbed" --help >/dev/null || die "mrc-testbed was installed but does not start"
    info "installed: $VENV/bin/mrc-testbed"
    give_venv_to_repo_owner
}

build_speedups() {
    stage "4/4 the simulator's hot path, compiled (mypyc)"
    local py="$VENV/bin/python"
    if [ "$PURE" -eq 1 ]; then
        "$py" -m speedups clean >/dev/null
        info "skipped (--pure): netsim and the transport run as pure Python"
    elif "$py" -c 'import speedups, sys; sys.exit(not speedups.inspect_build().compiled)'; then
        info "up to date: $("$py" -m speedups status)"
    elif ! "$py" -m speedups build; then
        info "warning: the compiled build failed (above); netsim and the transport run as pure Python:"
        info "the same results, at about half the speed"
    fi
    give_venv_to_repo_owner
}

give_venv_to_repo_owner() {
    # After 'sudo scripts/setup.sh', let the owner of the clone use and extend the venv.
    local owner
    owner="$(stat -c %u "$REPO")"
    if [ "$(id -u)" -eq 0 ] && [ "$owner" != 0 ]; then
        chown -R "$owner" "$VENV" "$REPO"/*.egg-info 2>/dev/null || true
        find "$REPO" -path "$VENV" -prune -o \( -name '*.so' -o -path "$REPO/speedups/build.*.json" \) \
            -user 0 -exec chown "$owner" {} + 2>/dev/null || true
    fi
}

main() {
    parse_args "$@"
    check_privileges
    check_python
    echo "Setting up the MRC testbed in $REPO"
    install_debian_packages
    create_venv
    install_project
    build_speedups
    stage "Done. Next:"
    info "sudo $VENV/bin/mrc-testbed run experiments/failover.yaml"
    info "$VENV/bin/python -m pytest -q tests"
}

main "$@"
