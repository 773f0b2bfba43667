# shellcheck shell=bash
# Sourced by scripts/setup.sh (not run by itself): defines setup_etcd and setup_prometheus, which put
# Debian's etcd (the per-site controller's witness, issue 43: etcd-server and etcd-client for etcdctl)
# and Prometheus (prometheus and promtool: the controller's scrape and alert-rule tests) in the cache
# without installing anything system-wide.
#
# Like scripts/setup_haproxy.sh: `apt-get download` fetches the pinned .deb files (after `apt-get update`
# when the first try fails), `dpkg-deb -x` unpacks them into $KDR_HOME/<name>/<version>. Both are static
# Go binaries (no library beyond libc). Required parts: a machine that cannot fetch them fails set-up.
# Uses setup.sh's KDR_HOME, ETCD_VERSION, PROMETHEUS_VERSION, say, die, publish and step_time.

# debian_tool NAME VERSION PACKAGE... : the packages at VERSION unpacked into $KDR_HOME/NAME/VERSION
debian_tool() {
  local name="$1" version="$2"; shift 2
  local out="$KDR_HOME/$name/$version" pkgs=() p deb
  for p in "$@"; do pkgs+=("$p=$version"); done
  [ ! -f "$out/.complete" ] || return 0
  command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 \
    || die "apt-get and dpkg-deb are needed to fetch Debian's $name package." "run setup on Debian bookworm"
  say "fetching Debian's $* $version (apt-get download, nothing installed)"
  rm -rf "$out.partial"; mkdir -p "$out.partial/debs"
  # apt-get download writes into the current directory; it needs the package lists (apt-get update once).
  if ! ( cd "$out.partial/debs" && apt-get download -q "${pkgs[@]}" ) > "$out.partial.log" 2>&1; then
    say "apt-get download failed; refreshing the package lists (apt-get update) and retrying"
    apt-get update -q >> "$out.partial.log" 2>&1 || true
    ( cd "$out.partial/debs" && apt-get download -q "${pkgs[@]}" ) >> "$out.partial.log" 2>&1 \
      || { tail -5 "$out.partial.log" >&2
           die "apt-get could not download ${pkgs[*]} (log: $out.partial.log)." \
               "check 'apt-cache policy $1'; if Debian now serves another bookworm version, set it in dr/versions.env"; }
  fi
  for deb in "$out.partial"/debs/*.deb; do dpkg-deb -x "$deb" "$out.partial" || die "dpkg-deb could not unpack $deb." "delete $out.partial and re-run make setup"; done
  rm -rf "$out.partial/debs" "$out.partial.log"
  publish "$out"
}

# tool_reports BINARY TEXT WHAT : die unless `BINARY --version` (or `version`) prints TEXT
tool_reports() {
  local said
  said=$("$1" --version 2>&1 || "$1" version 2>&1 || true)  # captured first: see setup_haproxy
  [[ "$said" == *"$2"* ]] || die "the cached $3 does not run or report $2." "delete $(dirname "$(dirname "$(dirname "$1")")") and re-run make setup"
}

setup_etcd() {
  local t0 out; t0=$(date +%s)
  out="$KDR_HOME/etcd/$ETCD_VERSION"
  debian_tool etcd "$ETCD_VERSION" etcd-server etcd-client
  tool_reports "$out/usr/bin/etcd" "etcd Version: ${ETCD_VERSION%%-*}" etcd
  tool_reports "$out/usr/bin/etcdctl" "etcdctl version: ${ETCD_VERSION%%-*}" etcdctl
  step_time "etcd $ETCD_VERSION" "$t0"
}

setup_prometheus() {
  local t0 out; t0=$(date +%s)
  out="$KDR_HOME/prometheus/$PROMETHEUS_VERSION"
  debian_tool prometheus "$PROMETHEUS_VERSION" prometheus
  tool_reports "$out/usr/bin/prometheus" "version ${PROMETHEUS_VERSION%%+*}" prometheus
  tool_reports "$out/usr/bin/promtool" "version ${PROMETHEUS_VERSION%%+*}" promtool
  step_time "Prometheus $PROMETHEUS_VERSION" "$t0"
}
