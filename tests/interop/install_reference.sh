#!/usr/bin/env bash
# Install the Node.js reference implementation (npm `zmq-raft`) into <repo>/.interop/.
#
# The recipe is tests/interop/reference_pkg/package.json, in this repository; nothing outside
# the clone is read. Why the install needs this script rather than a plain `npm install`
# (details in tests/interop/README.md):
#
# * zmq-raft 0.5.0 asks for zeromq ~5.2.8, which neither compiles on node 20 (its `nan` is too
#   old) nor ships prebuilt binaries for it; package.json overrides zeromq to 5.3.1, the
#   version later zmq-raft releases use.
# * zeromq 5.x builds libzmq from a source archive it downloads from GitHub, which package-
#   registry-only machines cannot reach: we install Debian's libzmq3-dev and tell the build
#   to link it (npm_config_zmq_external=true).
# * node-gyp would download the node headers too: npm_config_nodedir points it at the local
#   node prefix (the one holding include/node/node.h; libnode-dev provides it if missing).
# * zmq-raft requires `debug` and `colors` without declaring them: package.json adds both.
#
# Idempotent: when the installed package.json matches the recipe and the module loads, it
# returns in well under a second, so `make test` can always depend on it.
#
# Environment:
#   RAFTLOG_INTEROP  install directory (default: <repo>/.interop)
set -euo pipefail

die() {
    echo "install_reference.sh: ERROR: $*" >&2
    exit 1
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(git -C "$here" rev-parse --show-toplevel 2>/dev/null || (cd "$here/../.." && pwd))"
pkg_json="$here/reference_pkg/package.json"
[[ -f "$pkg_json" ]] || die "the install recipe $pkg_json is missing from the checkout"

dest="${RAFTLOG_INTEROP:-$repo/.interop}"
stamp="$dest/.installed"

check_reference() {
    (cd "$dest" && node -e 'require("zmq-raft"); require("zmq-raft/package.json")' >/dev/null 2>&1)
}

# Fast path: same package.json as last time and the module loads.
if [[ -f "$stamp" ]] && cmp -s "$pkg_json" "$dest/package.json" && check_reference; then
    exit 0
fi

# Serialize concurrent installs (several pytest sessions may start at once); re-check the
# fast path once we hold the lock, another process may have just finished the install.
mkdir -p "$dest"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$dest/.install.lock"
    flock -w 600 9 || die "timed out waiting for another install (lock $dest/.install.lock)"
    if [[ -f "$stamp" ]] && cmp -s "$pkg_json" "$dest/package.json" && check_reference; then
        exit 0
    fi
fi

# --- system packages -------------------------------------------------------------------------
as_root() {
    if [[ "$(id -u)" -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -n "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

nodedir_for() {
    # The node prefix whose include/node/node.h exists, so node-gyp needs no download.
    local prefix
    for prefix in /usr "$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")"; do
        if [[ -f "$prefix/include/node/node.h" ]]; then
            echo "$prefix"
            return 0
        fi
    done
    return 1
}

wanted=(libzmq3-dev build-essential pkg-config)
command -v node >/dev/null 2>&1 || wanted+=(nodejs)
command -v npm >/dev/null 2>&1 || wanted+=(npm)
nodedir=""
if command -v node >/dev/null 2>&1; then
    nodedir="$(nodedir_for || true)"
fi
[[ -n "$nodedir" ]] || wanted+=(libnode-dev)

missing=()
for p in "${wanted[@]}"; do
    dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "install_reference.sh: installing apt packages: ${missing[*]}" >&2
    apt_log="$(mktemp)"
    apt_install() {
        as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$apt_log" 2>&1
    }
    # Try with the current package lists first; refresh them (once) only if that fails.
    if ! apt_install; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$apt_log" 2>&1 \
            || { tail -n 20 "$apt_log" >&2; die "apt-get update failed"; }
        apt_install || { tail -n 20 "$apt_log" >&2; die "apt-get install ${missing[*]} failed"; }
    fi
    rm -f "$apt_log"
fi
command -v node >/dev/null 2>&1 || die "node is not installed (apt package nodejs)"
command -v npm >/dev/null 2>&1 || die "npm is not installed (apt package npm)"
[[ -n "$nodedir" ]] || nodedir="$(nodedir_for)" || die "node headers (include/node/node.h) not found"

# --- npm install -----------------------------------------------------------------------------
cp "$pkg_json" "$dest/package.json"
rm -f "$stamp"
log="$dest/npm-install.log"
echo "install_reference.sh: npm install zmq-raft into $dest (log: $log)" >&2
if ! (cd "$dest" \
      && npm_config_zmq_external=true npm_config_nodedir="$nodedir" \
         npm install --no-audit --no-fund --loglevel=error >"$log" 2>&1); then
    tail -n 40 "$log" >&2 || true
    die "npm install of the reference failed (full log: $log)"
fi

if ! check_reference; then
    (cd "$dest" && node -e 'require("zmq-raft")') >&2 || true
    die "node cannot require(\"zmq-raft\") after install"
fi
touch "$stamp"
version="$(cd "$dest" && node -p 'require("zmq-raft/package.json").version')"
echo "install_reference.sh: reference zmq-raft $version installed in $dest" >&2
