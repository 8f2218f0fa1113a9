#!/usr/bin/env bash
# Install the Node.js reference implementation (npm `zmq-raft`) into <repo>/.interop/.
#
# Why this script exists: the reference only installs on this kind of machine (Debian 12,
# node 20, no internet beyond the package registries) with a zeromq override, the system
# libzmq (zeromq's source build would download libzmq from GitHub) and node-gyp pointed at the
# local node headers. See shared/interop/README.md. It is idempotent and returns in well under
# a second when everything is already in place, so `make test` can always depend on it.
#
# Environment:
#   RAFTLOG_SHARED   path to the shared/ folder, used when <repo>/../shared does not exist
#   RAFTLOG_INTEROP  install directory (default: <repo>/.interop)
set -euo pipefail

die() {
    echo "install_reference.sh: ERROR: $*" >&2
    exit 1
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(git -C "$here" rev-parse --show-toplevel 2>/dev/null || (cd "$here/../.." && pwd))"

# shared/ sits next to the repository (the CI layout); RAFTLOG_SHARED is the fallback.
shared=""
if [[ -f "$repo/../shared/interop/package.json" ]]; then
    shared="$(cd "$repo/../shared" && pwd)"
elif [[ -n "${RAFTLOG_SHARED:-}" ]]; then
    shared="$RAFTLOG_SHARED"
fi
pkg_json="$shared/interop/package.json"
[[ -n "$shared" && -f "$pkg_json" ]] \
    || die "cannot find interop/package.json in '$repo/../shared' nor in RAFTLOG_SHARED='${RAFTLOG_SHARED:-}'"

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
