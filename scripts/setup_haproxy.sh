# shellcheck shell=bash
# Sourced by scripts/setup.sh (not run by itself): defines setup_haproxy, which puts Debian's haproxy
# package (the client endpoint's proxy, issue 31) in the cache without installing anything system-wide.
#
# `apt-get download` fetches the .deb of haproxy and of the shared libraries this machine lacks
# (liblua5.3-0, libopentracing-c-wrapper0, libopentracing1); `dpkg-deb -x` unpacks them into
# $KDR_HOME/haproxy/$HAPROXY_VERSION, and dr/runtime/endpoint.py runs usr/sbin/haproxy with
# LD_LIBRARY_PATH on the unpacked usr/lib/x86_64-linux-gnu. The other libraries it links (libssl3,
# libpcre2, libsystemd0, libcrypt1) are part of every Debian bookworm base system.
# Uses setup.sh's KDR_HOME, HAPROXY_VERSION, say, die, publish and step_time.

HAPROXY_LIBS=(liblua5.3-0 libopentracing-c-wrapper0 libopentracing1)

setup_haproxy() {
  local t0 out missing said
  t0=$(date +%s)
  out="$KDR_HOME/haproxy/$HAPROXY_VERSION"
  if [ ! -f "$out/.complete" ]; then
    command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 \
      || die "apt-get and dpkg-deb are needed to fetch Debian's haproxy package." "run setup on Debian bookworm (or set HAPROXY_VERSION to a version your apt sources serve)"
    say "fetching Debian's haproxy $HAPROXY_VERSION and its libraries (apt-get download, nothing installed)"
    rm -rf "$out.partial"; mkdir -p "$out.partial/debs"
    # apt-get download writes into the current directory; it needs the package lists (apt-get update once).
    if ! ( cd "$out.partial/debs" && apt-get download -q "haproxy=$HAPROXY_VERSION" "${HAPROXY_LIBS[@]}" ) > "$out.partial.log" 2>&1; then
      say "apt-get download failed; refreshing the package lists (apt-get update) and retrying"
      apt-get update -q >> "$out.partial.log" 2>&1 || true
      ( cd "$out.partial/debs" && apt-get download -q "haproxy=$HAPROXY_VERSION" "${HAPROXY_LIBS[@]}" ) >> "$out.partial.log" 2>&1 \
        || { # Debian's security archive keeps only its newest bookworm build: take it when it is the same
             # upstream release (the version check below holds it to ${HAPROXY_VERSION%%-*})
             say "haproxy=$HAPROXY_VERSION is no longer served; trying the bookworm build Debian serves now"
             ( cd "$out.partial/debs" && rm -f ./*.deb && apt-get download -q haproxy "${HAPROXY_LIBS[@]}" ) >> "$out.partial.log" 2>&1; } \
        || { tail -5 "$out.partial.log" >&2
             die "apt-get could not download haproxy=$HAPROXY_VERSION (log: $out.partial.log)." \
                 "check 'apt-cache policy haproxy'; if Debian now serves a newer bookworm version, set HAPROXY_VERSION in dr/versions.env to it"; }
    fi
    local deb
    for deb in "$out.partial"/debs/*.deb; do dpkg-deb -x "$deb" "$out.partial" || die "dpkg-deb could not unpack $deb." "delete $out.partial and re-run make setup"; done
    rm -rf "$out.partial/debs"
    missing=$(LD_LIBRARY_PATH="$out.partial/usr/lib/x86_64-linux-gnu" ldd "$out.partial/usr/sbin/haproxy" | grep 'not found' || true)
    [ -z "$missing" ] || die "haproxy still lacks shared libraries: $missing" "install them with apt-get, or add their package to HAPROXY_LIBS in scripts/setup_haproxy.sh"
    publish "$out"
  fi
  # Captured first: `grep -q` stopping early would kill haproxy with SIGPIPE, failing the pipeline.
  said=$(LD_LIBRARY_PATH="$out/usr/lib/x86_64-linux-gnu" "$out/usr/sbin/haproxy" -v 2>&1 || true)
  [[ "$said" == *"version ${HAPROXY_VERSION%%-*}"* ]] \
    || die "the cached haproxy does not run or report ${HAPROXY_VERSION%%-*}." "delete $out and re-run make setup"
  step_time "HAProxy $HAPROXY_VERSION" "$t0"
}
