# shellcheck shell=bash
# Sourced by scripts/setup.sh: Keycloak's server distribution, the identity provider the OAUTHBEARER refusal test
# (tests/integration/test_keycloak_refusal.py) starts. Test-only: the product never runs it.
#
# The zip (org.keycloak:keycloak-quarkus-dist, ~170 MB) comes from Maven Central through Maven (toolchain/keycloak/
# pom.xml) and is unpacked once into $KDR_HOME/keycloak/<version>. Keycloak 26 runs on Java 21+: the step picks one
# (KDR_KEYCLOAK_JAVA_HOME, else the newest JDK 21+ under /usr/lib/jvm) for Keycloak's process only, never as the
# default Java, and records it in .java-home. Then it starts the server once in development mode with the options
# the test uses (in-memory H2), so Keycloak's build step (Quarkus re-augmentation, ~35 s) is done here, in the
# cache, and every test start only runs it (~15 s); that first start also proves the server runs.

keycloak_java() {  # prints the JAVA_HOME Keycloak runs on, or nothing
  local candidates=() h v
  [ -n "${KDR_KEYCLOAK_JAVA_HOME:-}" ] && candidates+=("$KDR_KEYCLOAK_JAVA_HOME")
  for h in $(ls -d /usr/lib/jvm/*/ 2>/dev/null | sort -rV); do candidates+=("${h%/}"); done
  for h in "${candidates[@]}"; do
    [ -x "$h/bin/java" ] || continue
    v=$("$h/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
    if [ "${v:-0}" -ge 21 ]; then echo "$h"; return 0; fi
  done
}

unpack_zip() {  # ZIP DIR: Python's zipfile, keeping the files' modes (bin/kc.sh stays executable); no unzip needed
  "$PYTHON" - "$1" "$2" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        path = z.extract(info, sys.argv[2])
        mode = (info.external_attr >> 16) & 0o777
        if mode and not info.is_dir():
            os.chmod(path, mode)
PY
}

setup_keycloak() {
  local t0 out java_home port pid
  t0=$(date +%s)
  out="$KDR_HOME/keycloak/$KEYCLOAK_VERSION"
  # the cache holds the dev.env it was built with (the test starts Keycloak with that copy): another one rebuilds
  if [ -f "$out/.complete" ] && ! cmp -s toolchain/keycloak/dev.env "$out/.dev.env"; then
    say "toolchain/keycloak/dev.env changed: Keycloak $KEYCLOAK_VERSION is built again"
    rm -f "$out/.complete"
  fi
  if [ ! -f "$out/.complete" ]; then
    java_home=$(keycloak_java)
    [ -n "$java_home" ] || die "Keycloak $KEYCLOAK_VERSION (the OAUTHBEARER refusal test's identity provider) needs Java 21+; none found under /usr/lib/jvm." \
      "install a JDK 21+ (e.g. apt-get install openjdk-21-jdk-headless) or set KDR_KEYCLOAK_JAVA_HOME to one; the default java stays as it is"
    say "fetching Keycloak $KEYCLOAK_VERSION (keycloak-quarkus-dist, ~170 MB) from Maven Central"
    rm -rf "$out.partial"; mkdir -p "$out.partial/zip"
    mvn -q -B -s toolchain/maven-settings.xml -f toolchain/keycloak/pom.xml \
        -Dmaven.repo.local="$KDR_HOME/m2" dependency:copy-dependencies \
        -DoutputDirectory="$out.partial/zip" -Dkeycloak.version="$KEYCLOAK_VERSION" > "$out.partial.log" 2>&1 \
      || { tail -20 "$out.partial.log" >&2
           die "Maven could not fetch Keycloak $KEYCLOAK_VERSION (log: $out.partial.log)." "check access to Maven Central, then re-run make setup (it resumes)"; }
    unpack_zip "$out.partial/zip/keycloak-quarkus-dist-$KEYCLOAK_VERSION.zip" "$out.partial/zip" \
      || die "the Keycloak zip did not unpack." "delete $out.partial and re-run make setup"
    mv "$out.partial/zip/keycloak-$KEYCLOAK_VERSION"/* "$out.partial/"
    rm -rf "$out.partial/zip"
    echo "$java_home" > "$out.partial/.java-home"
    cp toolchain/keycloak/dev.env "$out.partial/.dev.env"
    say "building Keycloak for development mode once (its first start, ~60 s)"
    port=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # the environment of every start (toolchain/keycloak/dev.env), as tests/keycloak_server.py sets it
    ( while IFS= read -r kv; do case "$kv" in ''|'#'*) ;; *) export "${kv?}" ;; esac; done < toolchain/keycloak/dev.env
      export JAVA_HOME="$java_home" KC_HTTP_PORT="$port"
      cd "$out.partial" && exec setsid bin/kc.sh start-dev ) > "$out.partial.log" 2>&1 &
    pid=$!
    local deadline=$(( $(date +%s) + 600 ))
    until grep -q "Listening on: http" "$out.partial.log"; do
      if ! kill -0 "$pid" 2>/dev/null || [ "$(date +%s)" -gt "$deadline" ]; then
        kill -KILL -- "-$pid" 2>/dev/null || true
        tail -20 "$out.partial.log" >&2
        die "Keycloak $KEYCLOAK_VERSION did not start on $java_home (log: $out.partial.log)." \
          "read the log's first error; another Java 21+ can be named with KDR_KEYCLOAK_JAVA_HOME, then re-run make setup"
      fi
      sleep 1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$out.partial/data"
    publish "$out"
  fi
  [ -x "$out/bin/kc.sh" ] && [ -x "$(cat "$out/.java-home")/bin/java" ] \
    || die "the cached Keycloak $KEYCLOAK_VERSION or its Java ($(cat "$out/.java-home" 2>/dev/null)) is missing." "delete $out and re-run make setup"
  step_time "Keycloak $KEYCLOAK_VERSION" "$t0"
}
