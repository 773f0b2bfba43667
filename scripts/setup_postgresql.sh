# shellcheck shell=bash
# Sourced by scripts/setup.sh (not run by itself): defines setup_postgresql, which puts Debian's PostgreSQL
# server binaries (initdb, pg_ctl, postgres) into the cache, for the tests of the team backend
# (tests/pg_server.py starts a throwaway server from them). Nothing is installed system-wide: the .deb
# files are fetched with `apt-get download` (no root needed) and unpacked with `dpkg-deb -x` into
# $KDR_HOME/postgresql/$POSTGRESQL_VERSION, with the shared libraries the server needs beyond a base system.
# Uses setup.sh's KDR_HOME, POSTGRESQL_VERSION, say, die, publish and step_time.

# Libraries postgresql-$POSTGRESQL_VERSION links that a minimal Debian may lack (libc, libssl, zlib... are always there).
PG_LIB_PACKAGES="libpq5 libicu72 libllvm14 libxml2 libxslt1.1 liblz4-1 libzstd1"

setup_postgresql() {
  local t0 out pkg version missing
  t0=$(date +%s)
  out="$KDR_HOME/postgresql/$POSTGRESQL_VERSION"
  pkg="postgresql-$POSTGRESQL_VERSION"
  if [ ! -f "$out/.complete" ]; then
    need apt-get "apt-get download fetches Debian's PostgreSQL packages" "run on a Debian/Ubuntu machine"
    need dpkg-deb "dpkg-deb unpacks the PostgreSQL packages" "run on a Debian/Ubuntu machine"
    version=$(apt-cache policy "$pkg" 2>/dev/null | sed -n 's/^ *Candidate: //p')
    [ -n "$version" ] && [ "$version" != "(none)" ] \
      || die "Debian's package index does not list $pkg." "run 'apt-get update' once (as root), then re-run make setup"
    say "fetching Debian's $pkg $version and its libraries into $out"
    rm -rf "$out.partial"; mkdir -p "$out.partial/debs"
    ( cd "$out.partial/debs" && apt-get download -q "$pkg" $PG_LIB_PACKAGES > ../download.log 2>&1 ) \
      || { tail -5 "$out.partial/download.log" >&2
           die "apt-get download of $pkg failed (log: $out.partial/download.log)." "check access to Debian's package mirror (and run 'apt-get update'), then re-run make setup"; }
    local deb
    for deb in "$out.partial"/debs/*.deb; do dpkg-deb -x "$deb" "$out.partial/root"; done
    rm -rf "$out.partial/debs"
    echo "$version" > "$out.partial/debian-version"
    missing=$(LD_LIBRARY_PATH="$out.partial/root/usr/lib/x86_64-linux-gnu" \
              ldd "$out.partial/root/usr/lib/postgresql/$POSTGRESQL_VERSION/bin/postgres" \
                  "$out.partial/root/usr/lib/postgresql/$POSTGRESQL_VERSION/bin/pg_ctl" | grep 'not found' || true)
    [ -z "$missing" ] || die "the PostgreSQL server needs libraries this machine lacks: $missing" \
      "apt-get install the packages providing them (or add them to PG_LIB_PACKAGES), then re-run make setup"
    publish "$out"
  fi
  PGBIN="$out/root/usr/lib/postgresql/$POSTGRESQL_VERSION/bin"
  LD_LIBRARY_PATH="$out/root/usr/lib/x86_64-linux-gnu" "$PGBIN/postgres" --version | grep -q "PostgreSQL) $POSTGRESQL_VERSION" \
    || die "the cached PostgreSQL server in $out does not run." "delete $out and re-run make setup"
  step_time "PostgreSQL $POSTGRESQL_VERSION server ($(cat "$out/debian-version"))" "$t0"
}
