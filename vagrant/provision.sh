#!/usr/bin/env bash
# Provision the MRC testbed VM (Ubuntu 22.04), as root, from packages only:
#   1. p4lang's package repository (openSUSE Build Service, home:p4lang, xUbuntu_22.04),
#   2. p4c, BMv2 with PI (simple_switch_grpc), Mininet and the testbed's Ubuntu packages,
#   3. the project's virtual environment (scripts/setup.sh), outside the shared folder,
#   4. a login environment: venv active, mrc-testbed on PATH (also under sudo), cwd = the repo.
# Running it again (vagrant provision) is safe.
set -euo pipefail

REPO="${MRC_REPO:-/vagrant}"
VM_USER="${MRC_VM_USER:-vagrant}"
# The venv lives in the VM, not in the shared folder: a host-side .venv stays the host's own.
VENV="${MRC_VENV:-/opt/mrc-testbed/venv}"

# MRC_P4LANG_REPO_URL overrides it (another OBS project of p4lang, or a mirror).
P4LANG_URL="${MRC_P4LANG_REPO_URL:-https://download.opensuse.org/repositories/home:/p4lang/xUbuntu_22.04}"
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
PROFILE_SNIPPET="/etc/profile.d/mrc-testbed.sh"

stage() { printf '\n==> provision: %s\n' "$*"; }
die() { printf 'provision.sh: error: %s\n' "$*" >&2; exit 1; }

check_system() {
    [ "$(id -u)" -eq 0 ] || die "run as root (Vagrant's shell provisioner does)"
    # shellcheck source=/dev/null
    . /etc/os-release
    if [ "${ID:-}" != ubuntu ] || [ "${VERSION_ID:-}" != 22.04 ]; then
        die "this VM must be Ubuntu 22.04 (found ${PRETTY_NAME:-unknown}): p4lang's BMv2 packages exist for 22.04"
    fi
    [ -f "$REPO/scripts/setup.sh" ] || die "no repository at $REPO (is the shared folder mounted?)"
}

package_names() {
    local entry
    for entry in "${P4LANG_PACKAGES[@]}"; do printf '%s\n' "${entry%%=*}"; done
}

add_p4lang_repository() {
    stage "p4lang package repository"
    export DEBIAN_FRONTEND=noninteractive
    if ! command -v gpg >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
        apt-get update -q
        apt-get install -y -q --no-install-recommends curl gnupg ca-certificates
    fi
    install -d -m 0755 /etc/apt/keyrings
    curl -fsSL "$P4LANG_URL/Release.key" | gpg --batch --yes --dearmor -o "$P4LANG_KEYRING"
    chmod 0644 "$P4LANG_KEYRING"
    echo "deb [signed-by=$P4LANG_KEYRING] $P4LANG_URL/ /" > "$P4LANG_LIST"
    # Prefer p4lang's builds over any same-named package of the distribution.
    cat > "$P4LANG_PIN" <<EOF
Package: p4lang-*
Pin: origin download.opensuse.org
Pin-Priority: 900
EOF
}

install_packages() {
    stage "Ubuntu and p4lang packages"
    export DEBIAN_FRONTEND=noninteractive
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    apt-get update -q
    local p4lang
    mapfile -t p4lang < <(package_names)
    apt-get install -y -q --no-install-recommends "${UBUNTU_PACKAGES[@]}" "${p4lang[@]}"
}

check_installed() {
    stage "checking the P4 tools"
    local entry name minimum version tool
    for entry in "${P4LANG_PACKAGES[@]}"; do
        name="${entry%%=*}"
        minimum="${entry#*=}"
        version="$(dpkg-query -W -f='${Version}' "$name")"
        dpkg --compare-versions "$version" ge "$minimum" \
            || die "$name $version is older than $minimum, which the testbed needs"
        printf '    %s %s\n' "$name" "$version"
    done
    for tool in simple_switch_grpc p4c mnexec; do
        command -v "$tool" >/dev/null 2>&1 || die "$tool is missing after installing the packages"
    done
}

set_up_project() {
    stage "project virtual environment ($VENV)"
    install -d -m 0755 "$(dirname "$VENV")"
    MRC_VENV="$VENV" PYTHON=/usr/bin/python3 bash "$REPO/scripts/setup.sh"
    chown -R "$VM_USER:" "$VENV"
}

set_up_login() {
    stage "login environment"
    cat > "$PROFILE_SNIPPET" <<EOF
# MRC testbed: the project's venv on PATH, and interactive logins start in the repository.
if [ -f "$VENV/bin/activate" ]; then
    . "$VENV/bin/activate"
fi
case "\$-" in
    *i*) [ "\$PWD" = "\$HOME" ] && [ -d "$REPO" ] && cd "$REPO" ;;
esac
EOF
    # sudo resets PATH; /usr/local/bin is on its secure_path.
    ln -sfn "$VENV/bin/mrc-testbed" /usr/local/bin/mrc-testbed
}

main() {
    check_system
    add_p4lang_repository
    install_packages
    check_installed
    set_up_project
    set_up_login
    stage "done: 'vagrant ssh', then 'sudo mrc-testbed run experiments/failover.yaml'"
}

main "$@"
