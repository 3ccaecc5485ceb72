#!/usr/bin/env bash
# Provision the MRC testbed VM (Ubuntu 22.04), as root:
#   1. p4lang's package repository (openSUSE Build Service, home:p4lang, xUbuntu_22.04),
#   2. p4c, BMv2 with PI (simple_switch_grpc), Mininet and the testbed's Ubuntu packages,
#   3. the project's virtual environment (scripts/setup.sh), outside the shared folder,
#   4. a login environment: venv active, mrc-testbed on PATH (also under sudo), cwd = the repo,
#      and simple_switch_CLI run by the system's Python even with the venv active,
#   5. optionally (MRC_VM_BMV2_BUILD=performance) BMv2 built from source without its logging,
#      put before the packaged one on PATH (p4c stays the package),
#   6. a self-check (vagrant/selfcheck.py): conformance cases and a quick failover on BMv2.
# A failed self-check is reported and leaves the VM usable; provisioning itself still succeeds.
# Running it again (vagrant provision) is safe.
#
# MRC_PROVISION_DRY_RUN=1 prints every command that would install, download or change the
# system (and the content of every file it would write) instead of running it, on any Debian or
# Ubuntu machine: tests/project/test_vm_provision.py checks the script's logic that way.
set -euo pipefail

REPO="${MRC_REPO:-/vagrant}"
VM_USER="${MRC_VM_USER:-vagrant}"
DRY_RUN="${MRC_PROVISION_DRY_RUN:-0}"
# Checked first of all: a mistyped dry run must not change the system.
case "$DRY_RUN" in
    0|1) ;;
    *) printf 'provision.sh: error: MRC_PROVISION_DRY_RUN=%s: expected 1 (print what would change) or 0\n' \
              "$DRY_RUN" >&2
       exit 1 ;;
esac
# The venv lives in the VM, not in the shared folder: a host-side .venv stays the host's own.
VENV="${MRC_VENV:-/opt/mrc-testbed/venv}"
SELF_CHECK_DIR="/opt/mrc-testbed/selfcheck"
# package: BMv2 from p4lang's packages; performance: also BMv2 built from source (-O3, no logging).
BMV2_BUILD="${MRC_VM_BMV2_BUILD:-package}"

# The source line uses http: the openSUSE download service redirects to mirrors, and apt refuses
# an https -> http redirect. The key is fetched over https and protects the packages (signed-by).
# MRC_P4LANG_REPO_URL overrides it (another OBS project of p4lang, or a mirror).
P4LANG_URL="${MRC_P4LANG_REPO_URL:-http://download.opensuse.org/repositories/home:/p4lang/xUbuntu_22.04}"
P4LANG_URL="${P4LANG_URL%/}"
P4LANG_KEY_URL="${MRC_P4LANG_KEY_URL:-https://${P4LANG_URL#*://}/Release.key}"
P4LANG_KEYRING="/etc/apt/keyrings/home-p4lang.gpg"
P4LANG_LIST="/etc/apt/sources.list.d/home-p4lang.list"
P4LANG_PIN="/etc/apt/preferences.d/home-p4lang"

# package=minimum version; README.md ("The VM") promises the same list.
P4LANG_PACKAGES=(
    p4lang-pi=0.1.0
    p4lang-bmv2=1.15.0
    p4lang-p4c=1.2.4
)
UBUNTU_PACKAGES=(
    mininet iproute2 iputils-ping ethtool tcpdump tshark procps
    python3 python3-venv python3-pip make git curl gnupg ca-certificates
)
# Programs the testbed runs; simple_switch_CLI sets BMv2's queue rates and depths.
P4_TOOLS=(simple_switch_grpc simple_switch_CLI p4c mnexec)
PROFILE_SNIPPET="/etc/profile.d/mrc-testbed.sh"

# BMv2's CLI is a Python script that imports its thrift modules from the system's Python; this
# wrapper, before /usr/bin on every PATH, runs it with that Python even when the venv is active.
SYSTEM_CLI="/usr/bin/simple_switch_CLI"
CLI_WRAPPER="/usr/local/bin/simple_switch_CLI"

# The performance build of BMv2 (MRC_VM_BMV2_BUILD=performance): PI, then BMv2, from source.
PERF_PREFIX="/opt/bmv2-performance"
PERF_SOURCES="/usr/local/src/mrc-bmv2-performance"
PERF_LINK="/usr/local/bin/simple_switch_grpc"
PI_GIT="https://github.com/p4lang/PI.git"
BMV2_GIT="https://github.com/p4lang/behavioral-model.git"
PI_REF="${MRC_VM_PI_REF:-main}"
BMV2_REF="${MRC_VM_BMV2_REF:-main}"
BUILD_PACKAGES=(
    autoconf automake libtool libtool-bin pkg-config g++ make git flex bison
    libgmp-dev libpcap-dev libboost-dev libboost-test-dev libboost-program-options-dev
    libboost-system-dev libboost-filesystem-dev libboost-thread-dev libevent-dev libssl-dev
    libthrift-dev thrift-compiler libnanomsg-dev libreadline-dev
    libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libgrpc-dev libgrpc++-dev
)
PI_CONFIGURE_FLAGS=(--with-proto --without-internal-rpc --without-cli --without-bmv2)
BMV2_CONFIGURE_FLAGS=(--with-pi --with-thrift --disable-logging-macros --disable-elogger)

stage() { printf '\n==> provision: %s\n' "$*"; }
die() { printf 'provision.sh: error: %s\n' "$*" >&2; exit 1; }
warn() { printf 'provision.sh: warning: %s\n' "$*" >&2; }

dry_run() { [ "$DRY_RUN" = 1 ]; }

# run COMMAND...: a command that changes the system; a dry run prints it instead.
run() {
    if dry_run; then
        local quoted
        printf -v quoted '%q ' "$@"
        printf '+ %s\n' "${quoted% }"
    else
        "$@"
    fi
}

# run_in DIR COMMAND...: run a command that changes the system in DIR; a dry run prints it.
run_in() {
    local dir="$1"
    shift
    if dry_run; then
        printf '+ (in %s) ' "$dir"
        run "$@" | sed 's/^+ //'
    else
        (cd "$dir" && "$@")
    fi
}

# write_file PATH MODE < CONTENT: (re)write a file; a dry run prints the content instead.
write_file() {
    local path="$1" mode="$2"
    if dry_run; then
        printf '+ write %s (mode %s):\n' "$path" "$mode"
        sed 's/^/| /'
    else
        install -d -m 0755 "$(dirname "$path")"
        cat > "$path"
        chmod "$mode" "$path"
    fi
}

# stop_or_report MESSAGE: stop provisioning; a dry run says it would, and goes on.
stop_or_report() {
    if dry_run; then
        printf 'dry run: provisioning would stop here: %s\n' "$*"
    else
        die "$*"
    fi
}

# check_or_report DESCRIPTION COMMAND...: run a read-only check of the installed system, its
# output but not its errors hidden (a dry run prints it); its exit status.
check_or_report() {
    local description="$1"
    shift
    if dry_run; then
        printf '+ check %s\n' "$description"
        return 0
    fi
    "$@" >/dev/null
}

# url_host URL: the host of an http(s) URL, without user or port: what apt's 'Pin: origin' matches.
url_host() {
    local rest="${1#*://}"
    rest="${rest%%/*}"
    rest="${rest##*@}"
    printf '%s\n' "${rest%%:*}"
}

check_settings() {
    case "$P4LANG_URL" in
        http://?*|https://?*) ;;
        *) die "MRC_P4LANG_REPO_URL=$P4LANG_URL: expected an http:// or https:// URL" ;;
    esac
    case "$BMV2_BUILD" in
        package|performance) ;;
        *) die "MRC_VM_BMV2_BUILD=$BMV2_BUILD: expected 'package' or 'performance'" ;;
    esac
}

check_system() {
    if dry_run; then
        printf 'dry run: commands that change the system are printed, not run\n'
    else
        [ "$(id -u)" -eq 0 ] || die "run as root (Vagrant's shell provisioner does)"
    fi
    # shellcheck source=/dev/null
    . /etc/os-release
    if [ "${ID:-}" != ubuntu ] || [ "${VERSION_ID:-}" != 22.04 ]; then
        stop_or_report "this VM must be Ubuntu 22.04 (found ${PRETTY_NAME:-unknown}): p4lang's BMv2 packages exist for 22.04"
    fi
    [ -f "$REPO/scripts/setup.sh" ] || die "no repository at $REPO (is the shared folder mounted?)"
}

package_names() {
    local entry
    for entry in "${P4LANG_PACKAGES[@]}"; do printf '%s\n' "${entry%%=*}"; done
}

add_p4lang_repository() {
    stage "p4lang package repository ($P4LANG_URL)"
    export DEBIAN_FRONTEND=noninteractive
    if ! command -v gpg >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
        run apt-get update -q
        run apt-get install -y -q --no-install-recommends curl gnupg ca-certificates
    fi
    run install -d -m 0755 "$(dirname "$P4LANG_KEYRING")"
    run curl -fsSL -o "$P4LANG_KEYRING.download" "$P4LANG_KEY_URL"
    run gpg --batch --yes --dearmor -o "$P4LANG_KEYRING" "$P4LANG_KEYRING.download"
    run rm -f "$P4LANG_KEYRING.download"
    run chmod 0644 "$P4LANG_KEYRING"
    write_file "$P4LANG_LIST" 0644 <<EOF
deb [signed-by=$P4LANG_KEYRING] $P4LANG_URL/ /
EOF
    # Prefer p4lang's builds over any same-named package of the distribution, from wherever
    # the repository is served.
    write_file "$P4LANG_PIN" 0644 <<EOF
Package: p4lang-*
Pin: origin $(url_host "$P4LANG_URL")
Pin-Priority: 900
EOF
}

install_packages() {
    stage "Ubuntu and p4lang packages"
    export DEBIAN_FRONTEND=noninteractive
    if dry_run; then
        printf '+ debconf-set-selections: wireshark-common/install-setuid false\n'
    else
        echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    fi
    run apt-get update -q
    local p4lang
    mapfile -t p4lang < <(package_names)
    run apt-get install -y -q --no-install-recommends "${UBUNTU_PACKAGES[@]}" "${p4lang[@]}"
}

installed_version() {
    dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true
}

check_installed() {
    stage "checking the P4 tools"
    local problems=() entry name minimum version tool
    for entry in "${P4LANG_PACKAGES[@]}"; do
        name="${entry%%=*}"
        minimum="${entry#*=}"
        if dry_run; then
            printf '+ check %s >= %s\n' "$name" "$minimum"
            continue
        fi
        version="$(installed_version "$name")"
        if [ -z "$version" ]; then
            problems+=("$name is not installed")
        elif ! dpkg --compare-versions "$version" ge "$minimum"; then
            problems+=("$name $version is older than $minimum, which the testbed needs")
        else
            printf '    installed %s %s\n' "$name" "$version"
        fi
    done
    for tool in "${P4_TOOLS[@]}"; do
        check_or_report "$tool on PATH" command -v "$tool" \
            || problems+=("$tool is missing")
    done
    if [ "${#problems[@]}" -gt 0 ]; then
        local IFS=';'
        die "after installing the packages: ${problems[*]}"
    fi
}

set_up_project() {
    stage "project virtual environment ($VENV)"
    run install -d -m 0755 "$(dirname "$VENV")"
    run env MRC_VENV="$VENV" PYTHON=/usr/bin/python3 bash "$REPO/scripts/setup.sh"
    run chown -R "$VM_USER:" "$VENV"
}

set_up_login() {
    stage "login environment"
    write_file "$PROFILE_SNIPPET" 0644 <<EOF
# MRC testbed: the project's venv on PATH, and interactive logins start in the repository.
if [ -f "$VENV/bin/activate" ]; then
    . "$VENV/bin/activate"
fi
case "\$-" in
    *i*) [ "\$PWD" = "\$HOME" ] && [ -d "$REPO" ] && cd "$REPO" ;;
esac
EOF
    # sudo resets PATH; /usr/local/bin is on its secure_path.
    run ln -sfn "$VENV/bin/mrc-testbed" /usr/local/bin/mrc-testbed
    write_file "$CLI_WRAPPER" 0755 <<EOF
#!/bin/sh
# Written by vagrant/provision.sh: BMv2's CLI imports its thrift modules from the system's
# Python, so it runs with that Python even when the testbed's venv puts its python3 first.
exec /usr/bin/python3 $SYSTEM_CLI "\$@"
EOF
}

build_pi_and_bmv2() {
    stage "BMv2 performance build: PI ($PI_REF) and BMv2 ($BMV2_REF) from source into $PERF_PREFIX"
    local jobs flags
    jobs="$(nproc)"
    run apt-get install -y -q --no-install-recommends "${BUILD_PACKAGES[@]}"
    run rm -rf "$PERF_SOURCES"
    run install -d -m 0755 "$PERF_SOURCES"
    run git clone --recursive --branch "$PI_REF" "$PI_GIT" "$PERF_SOURCES/PI"
    run git clone --branch "$BMV2_REF" "$BMV2_GIT" "$PERF_SOURCES/behavioral-model"
    # PI first: BMv2's --with-pi builds simple_switch_grpc against it.
    run_in "$PERF_SOURCES/PI" ./autogen.sh
    run_in "$PERF_SOURCES/PI" ./configure --prefix="$PERF_PREFIX" "${PI_CONFIGURE_FLAGS[@]}"
    run make -C "$PERF_SOURCES/PI" -j"$jobs"
    run make -C "$PERF_SOURCES/PI" install
    flags=(CXXFLAGS=-O3 "CPPFLAGS=-I$PERF_PREFIX/include"
           "LDFLAGS=-L$PERF_PREFIX/lib -Wl,-rpath,$PERF_PREFIX/lib"
           "PKG_CONFIG_PATH=$PERF_PREFIX/lib/pkgconfig")
    run_in "$PERF_SOURCES/behavioral-model" ./autogen.sh
    run_in "$PERF_SOURCES/behavioral-model" ./configure --prefix="$PERF_PREFIX" \
        "${BMV2_CONFIGURE_FLAGS[@]}" "${flags[@]}"
    run make -C "$PERF_SOURCES/behavioral-model" -j"$jobs"
    run make -C "$PERF_SOURCES/behavioral-model" install-strip
}

select_bmv2_build() {
    if [ "$BMV2_BUILD" = package ]; then
        # Back from a performance build: the packaged simple_switch_grpc is the one on PATH again.
        if [ -L "$PERF_LINK" ] && [[ "$(readlink "$PERF_LINK")" == "$PERF_PREFIX"/* ]]; then
            run rm -f "$PERF_LINK"
        fi
        return
    fi
    if [ -x "$PERF_PREFIX/bin/simple_switch_grpc" ]; then
        stage "BMv2 performance build: already in $PERF_PREFIX (remove it to build again)"
    else
        build_pi_and_bmv2
    fi
    run ln -sfn "$PERF_PREFIX/bin/simple_switch_grpc" "$PERF_LINK"
}

check_cli_for_user() {
    stage "simple_switch_CLI for $VM_USER, venv active"
    # A login shell reads /etc/profile.d/, so the venv's python3 is first on its PATH.
    check_or_report "simple_switch_CLI --help as $VM_USER in a login shell" \
        runuser -l "$VM_USER" -c 'simple_switch_CLI --help' \
        || die "simple_switch_CLI --help fails for $VM_USER with the venv active (see above): the testbed cannot set BMv2's queues"
}

self_check() {
    stage "self-check: conformance and a quick failover on BMv2"
    local check=("$REPO/vagrant/selfcheck.py" --mrc-testbed "$VENV/bin/mrc-testbed"
                 --repo "$REPO" --out "$SELF_CHECK_DIR")
    if dry_run; then
        run "$VENV/bin/python" "${check[@]}"
        python3 "${check[@]}" --dry-run
        return
    fi
    if ! "$VENV/bin/python" "${check[@]}"; then
        warn "the self-check above failed; the VM is usable. Again: sudo $VENV/bin/python ${check[0]}"
    fi
}

main() {
    check_settings
    check_system
    add_p4lang_repository
    install_packages
    check_installed
    set_up_project
    set_up_login
    select_bmv2_build
    check_cli_for_user
    self_check
    stage "done: 'vagrant ssh', then 'sudo mrc-testbed run experiments/failover.yaml'"
}

main "$@"
