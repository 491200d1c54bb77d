#!/usr/bin/env bash
# Installs Valkey 9.1.2 beside the host's 8.0.1, into $CACHE_DIR/valkey-9.1.2, so that the local
# cluster runs a real 9.x server for a valkey/valkey:9.* image (atomic slot migration,
# shutdown-on-sigterm failover) and a real 8.0.1 for valkey/valkey:8.*.
#
# Debian 12 has no Valkey 9; Debian sid's valkey-tools 9.1.2 is built against glibc 2.38+, which
# bookworm lacks (2.36). The binaries run unchanged through the loader of sid's libc6, so both
# packages are fetched from sid and unpacked (dpkg-deb -x), never installed: apt runs with its own
# sources list, state and cache under $CACHE_DIR/apt-sid, so the system's apt never sees sid and
# never upgrades from it. The other libraries (OpenSSL 3, jemalloc, lzf, libsystemd, libatomic)
# are the host's, brought by valkey-tools 8.0.1 (hack/install-packages.sh runs first).
#
# Result: $CACHE_DIR/valkey-9.1.2/bin/valkey-server and .../bin/valkey-cli, shell wrappers that
# exec through the loader and find everything relative to themselves (the kubelet bind-mounts
# the folder into a pod, where it sits at another path). Prints that folder.
# Idempotent and quick when the wrappers already run 9.1.2.
set -euo pipefail

CACHE_DIR=${CACHE_DIR:-$HOME/.cache/valkey-operator}
# The Debian package version of valkey-tools in sid. sid moves on: when this version is gone from
# the archive, the download fails and names it.
VALKEY9_DEB_VERSION=${VALKEY9_DEB_VERSION:-9.1.2-1}
version=${VALKEY9_DEB_VERSION%-*}
OUT="$CACHE_DIR/valkey-$version"
APT_DIR="$CACHE_DIR/apt-sid"

works() {
  "$OUT/bin/valkey-server" --version 2>/dev/null | grep -q "^Valkey server v=$version " &&
    "$OUT/bin/valkey-cli" --version 2>/dev/null | grep -qx "valkey-cli $version"
}
if works; then echo "$OUT"; exit 0; fi

mkdir -p "$CACHE_DIR"
# Two installs at once (tests of several worktrees) take turns; the second finds the first's.
exec 9>"$CACHE_DIR/valkey-$version.lock"
flock 9
if works; then echo "$OUT"; exit 0; fi

for b in apt-get dpkg-deb; do
  command -v "$b" >/dev/null || { echo "install-valkey9: $b not found (a Debian machine is needed)" >&2; exit 1; }
done

# The Debian mirror this machine's apt already uses for its own release (bookworm), read from
# its sources (--no-release-info: before any apt-get update too).
mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  # shellcheck disable=SC1091 # the machine's own file
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  # shellcheck disable=SC2016 # $(...) here is apt's format syntax, not the shell's
  mirror=$(apt-get indextargets --no-release-info --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
    awk -v c="$codename" '$2==c {print $1; exit}')
fi
if [ -z "$mirror" ]; then
  echo "install-valkey9: no Debian mirror found in apt's sources; set DEBIAN_MIRROR" >&2
  exit 1
fi

mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/archives/partial" "$APT_DIR/sources.list.d" "$APT_DIR/preferences.d"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${mirror%/} sid main" >"$APT_DIR/sources.list"
# Every path apt reads or writes points into $APT_DIR; the system's sources, preferences and
# dpkg status are not consulted, so sid's packages never become candidates for the system.
# The system's apt.conf.d still applies (a proxy set there is kept).
apt_opts=(
  -o "Dir::Etc::SourceList=$APT_DIR/sources.list"
  -o "Dir::Etc::SourceParts=$APT_DIR/sources.list.d"
  -o "Dir::Etc::Preferences=$APT_DIR/preferences"
  -o "Dir::Etc::PreferencesParts=$APT_DIR/preferences.d"
  -o "Dir::State::Lists=$APT_DIR/lists"
  -o "Dir::State::Status=/dev/null"
  -o "Dir::Cache=$APT_DIR"
  -o "Dir::Cache::pkgcache="
  -o "Dir::Cache::srcpkgcache="
  -o "APT::Architecture=amd64"
  -o "APT::Architectures::=amd64"
  -o "Acquire::Languages=none"
  -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false"
  # $CACHE_DIR is often under a home that apt's _apt user cannot enter.
  -o "APT::Sandbox::User=root"
)
echo "fetching valkey-tools $VALKEY9_DEB_VERSION and libc6 from Debian sid into $OUT" >&2
apt-get "${apt_opts[@]}" -qq update

work=$(mktemp -d "$CACHE_DIR/valkey-$version.tmp.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/root/bin"
(cd "$work/debs" && apt-get "${apt_opts[@]}" -qq download "valkey-tools=$VALKEY9_DEB_VERSION" libc6)
for deb in "$work"/debs/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
done
libc_version=$(dpkg-deb -f "$work"/debs/libc6_*.deb Version)

# valkey-server 9.x is the multi-call binary valkey-check-rdb started under that name.
wrapper() { # name binary
  cat >"$work/root/bin/$1" <<SH
#!/bin/sh
# $1 $version from Debian sid (valkey-tools $VALKEY9_DEB_VERSION), run through the loader of
# sid's libc6 $libc_version: bookworm's glibc is too old for it. Written by hack/install-valkey9.sh.
d=\$(dirname "\$(readlink -f "\$0")")/..
l="\$d/usr/lib/x86_64-linux-gnu"
exec "\$l/ld-linux-x86-64.so.2" --library-path "\$l:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" \\
  --argv0 $1 "\$d/usr/bin/$2" "\$@"
SH
  chmod 0755 "$work/root/bin/$1"
}
wrapper valkey-server valkey-check-rdb
wrapper valkey-cli valkey-cli
chmod 0755 "$work/root"

rm -rf "$OUT"
mv "$work/root" "$OUT"
if ! works; then
  echo "install-valkey9: $OUT/bin/valkey-server does not run Valkey $version:" >&2
  "$OUT/bin/valkey-server" --version >&2 || true
  echo "(its libraries other than glibc come from the host: run hack/install-packages.sh first)" >&2
  exit 1
fi
echo "$OUT"
