# shellcheck shell=bash
# Sourced by scripts/setup.sh (not run by itself): defines setup_postgresql, which puts Debian's PostgreSQL
# server binaries (initdb, pg_ctl, postgres) into the cache, for the tests of the team backend
# (tests/pg_server.py starts a throwaway server from them); a required part: set-up fails without it. Nothing is installed system-wide: the .deb
# files are fetched with `apt-get download` (no root needed) and unpacked with `dpkg-deb -x` into
# $KDR_HOME/postgresql/$POSTGRESQL_VERSION, with the shared libraries the server needs beyond a base system.
# Uses setup.sh's KDR_HOME, POSTGRESQL_VERSION, say, die, publish and step_time.

# Libraries postgresql-$POSTGRESQL_VERSION links that a minimal Debian may lack (libc, libssl, zlib... are always there).
PG_LIB_PACKAGES="libpq5 libicu72 libllvm14 libxml2 libxslt1.1 liblz4-1 libzstd1"

# Required: the team backend is a documented feature and its tests never skip, so a machine that cannot
# fetch the server fails set-up here, loudly, with the next step (a required part never skips).
pg_fail() { die "PostgreSQL $POSTGRESQL_VERSION could not be set up: $1" "$2"; }

# The package index of a fresh container may be empty (apt lists cleaned): refresh it once, then ask again.
pg_candidate() {
  local version
  version=$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p')
  if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    say "Debian's package index does not list $1 yet; refreshing the package lists (apt-get update)" >&2
    apt-get update -q >/dev/null 2>&1 || true
    version=$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p')
  fi
  [ "$version" != "(none)" ] || version=""
  printf '%s' "$version"
}

setup_postgresql() {
  local t0 out pkg version missing
  t0=$(date +%s)
  out="$KDR_HOME/postgresql/$POSTGRESQL_VERSION"
  pkg="postgresql-$POSTGRESQL_VERSION"
  if [ ! -f "$out/.complete" ]; then
    if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
      pg_fail "apt-get/dpkg-deb are missing (not a Debian-like machine)." "install PostgreSQL $POSTGRESQL_VERSION's server binaries into $out/root the same way"
    fi
    version=$(pg_candidate "$pkg")
    [ -n "$version" ] || pg_fail "Debian's package index does not list $pkg, even after apt-get update." "check the machine's apt sources (Debian bookworm serves $pkg), then re-run make setup"
    say "fetching Debian's $pkg $version and its libraries into $out"
    rm -rf "$out.partial"; mkdir -p "$out.partial/debs"
    if ! ( cd "$out.partial/debs" && apt-get download -q "$pkg" $PG_LIB_PACKAGES > ../download.log 2>&1 ); then
      say "apt-get download failed; refreshing the package lists (apt-get update) and retrying"
      apt-get update -q >> "$out.partial/download.log" 2>&1 || true
      ( cd "$out.partial/debs" && apt-get download -q "$pkg" $PG_LIB_PACKAGES >> ../download.log 2>&1 ) \
        || { tail -5 "$out.partial/download.log" >&2
             pg_fail "apt-get download of $pkg failed (log: $out.partial/download.log)." "check access to Debian's package mirror, then re-run make setup"; }
    fi
    local deb
    for deb in "$out.partial"/debs/*.deb; do dpkg-deb -x "$deb" "$out.partial/root"; done
    rm -rf "$out.partial/debs"
    echo "$version" > "$out.partial/debian-version"
    missing=$(LD_LIBRARY_PATH="$out.partial/root/usr/lib/x86_64-linux-gnu" \
              ldd "$out.partial/root/usr/lib/postgresql/$POSTGRESQL_VERSION/bin/postgres" \
                  "$out.partial/root/usr/lib/postgresql/$POSTGRESQL_VERSION/bin/pg_ctl" | grep 'not found' || true)
    if [ -n "$missing" ]; then
      pg_fail "the PostgreSQL server needs libraries this machine lacks: $missing." "add their packages to PG_LIB_PACKAGES in scripts/setup_postgresql.sh, then re-run make setup"
    fi
    publish "$out"
  fi
  PGBIN="$out/root/usr/lib/postgresql/$POSTGRESQL_VERSION/bin"
  LD_LIBRARY_PATH="$out/root/usr/lib/x86_64-linux-gnu" "$PGBIN/postgres" --version | grep -q "PostgreSQL) $POSTGRESQL_VERSION" \
    || die "the cached PostgreSQL server in $out does not run." "delete $out and re-run make setup"
  step_time "PostgreSQL $POSTGRESQL_VERSION server ($(cat "$out/debian-version"))" "$t0"
}
