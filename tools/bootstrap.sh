#!/usr/bin/env bash
# Prepare this machine for mlfabric, idempotently: Debian packages, a virtual environment
# that sees Debian's Mininet, and the Python dependencies. A ready machine returns at once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${MLFABRIC_VENV:-$ROOT/.venv}"
# gcc and libc6-dev: the Python target's native engine compiles each program to C;
# python3-dev: the switch's WriteRequest decoder is compiled as a Python extension (pybmv2/runtime/wire_native.py);
# openmpi-bin and libopenmpi-dev: `mlfabric launch --mpi` (mpirun, and the library mpi4py loads);
# nftables: the TopoOpt experiment's servers count the bytes they relay
# chromium and chromium-driver: the dashboard's and the results pages' tests drive a real, headless browser
# openssh-server, openssh-client and sudo: fabrics across machines (mlfabric cluster) reach every machine over SSH,
#   as Mininet's cluster edition does; the tests stand machines in with network namespaces running sshd
APT_PACKAGES=(mininet iproute2 iputils-ping procps iperf3 tcpdump ethtool python3-venv python3-pip gcc libc6-dev python3-dev
              openmpi-bin libopenmpi-dev nftables chromium chromium-driver openssh-server openssh-client sudo)
STAMP="$VENV/.mlfabric-installed"

log() { printf '[bootstrap] %s\n' "$*" >&2; }

missing_apt_packages() {
    local pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
            printf '%s ' "$pkg"
        fi
    done
}

install_apt_packages() {
    local missing
    missing="$(missing_apt_packages)"
    [[ -z "$missing" ]] && return 0
    if [[ $EUID -ne 0 ]]; then
        log "missing Debian packages: $missing; run as root or install them with apt-get"
        exit 1
    fi
    log "installing Debian packages: $missing"
    export DEBIAN_FRONTEND=noninteractive
    local apt_log=/tmp/mlfabric-apt.log
    # shellcheck disable=SC2086
    if ! { apt-get -o DPkg::Lock::Timeout=600 update -qq &&
           apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $missing; } \
            >"$apt_log" 2>&1; then
        cat "$apt_log" >&2
        log "apt-get failed (log: $apt_log)"
        exit 1
    fi
}

requirements_digest() {
    cat "$ROOT/pyproject.toml" "$ROOT/setup.py" | sha256sum | cut -d' ' -f1
}

link_debian_mininet() {
    # Debian installs Mininet into the system Python's dist-packages. Expose exactly that
    # package (not the whole dist-packages directory) inside the virtual environment.
    local site
    site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    if [[ -d /usr/lib/python3/dist-packages/mininet && ! -e "$site/mininet" ]]; then
        ln -s /usr/lib/python3/dist-packages/mininet "$site/mininet"
    fi
}

install_python_packages() {
    if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$(requirements_digest)" ]]; then
        return 0
    fi
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "creating virtual environment $VENV"
        /usr/bin/python3 -m venv "$VENV"
    fi
    log "installing Python dependencies into $VENV"
    if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT[test,dev]" \
            >"$VENV/pip-install.log" 2>&1; then
        cat "$VENV/pip-install.log" >&2
        log "pip install failed (log: $VENV/pip-install.log)"
        exit 1
    fi
    requirements_digest >"$STAMP"
}

install_apt_packages
install_python_packages
link_debian_mininet
