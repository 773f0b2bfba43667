#!/usr/bin/env bash
# One idempotent setup for the whole toolchain. Both README commands (make demo, make test) call it.
#
# Everything it builds is cached outside the clone under $KDR_HOME (default ~/.cache/kafka-dr),
# keyed by the versions in toolchain/versions.env, and published atomically: each item is built in
# a "*.partial" directory and renamed only when complete, so an interrupted run resumes cleanly and a
# half-written cache is never used. Only the reachable registries are used: PyPI, Maven Central,
# the Go module proxy and Debian's packages (PostgreSQL for the team backend's tests, HAProxy for the
# client endpoint, etcd and Prometheus for the per-site controller).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck disable=SC1091
source toolchain/versions.env
KDR_HOME="${KDR_HOME:-$HOME/.cache/kafka-dr}"
PYTHON="${PYTHON:-python3.11}"
START=$(date +%s)

say()  { printf '[setup] %s\n' "$*"; }
die()  { printf '[setup] ERROR: %s\n[setup] next step: %s\n' "$1" "$2" >&2; exit 3; }
step_time() { say "$1 ready ($(( $(date +%s) - $2 ))s)"; }

need() {  # need CMD "what it is for" "how to install"
  command -v "$1" >/dev/null 2>&1 || die "'$1' is not on PATH ($2)." "$3"
}

check_prereqs() {
  need "$PYTHON" "Python 3.11 runs the product" "install Python 3.11 (e.g. apt-get install python3.11 python3.11-venv) or set PYTHON=/path/to/python3.11"
  need java "Kafka, MirrorMaker 2 and Spark run on the JVM" "install a JDK 17 (apt-get install openjdk-17-jdk-headless)"
  need mvn "Maven resolves the Kafka and Spark jars from Maven Central" "apt-get install maven"
  need go "Go builds the Pulumi CLI from the Go module proxy" "install Go >= 1.25 from your distribution or go.dev"
  local jv
  jv=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1 || true)
  [ "${jv:-0}" -ge 17 ] || die "Java $jv found; Kafka $KAFKA_VERSION and Spark $SPARK_VERSION need Java 17+." "install a JDK 17 and put it first on PATH"
  mkdir -p "$KDR_HOME" || die "cannot create the cache directory $KDR_HOME." "set KDR_HOME to a writable directory"
  # One set-up at a time per cache: two clones set up at once would build the same venv into one directory.
  exec 9>"$KDR_HOME/.setup.lock"
  flock -w 3600 9 || die "another set-up has held $KDR_HOME/.setup.lock for an hour." "wait for it, or stop it, then re-run make setup"
  # Free space: the cold cache is about 2.5 GB (pyspark, jars, Go module cache).
  local avail
  avail=$(df -Pk "$KDR_HOME" | awk 'NR==2 {print $4}')
  [ "${avail:-0}" -gt 3000000 ] || die "less than 3 GB free under $KDR_HOME." "free disk space or point KDR_HOME elsewhere"
}

# publish DIR.partial -> DIR atomically, writing a completion stamp first
publish() {
  local dir="$1"
  date -u +%FT%TZ > "$dir.partial/.complete"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
}

# ---------------------------------------------------------------------------------------------
# 1. Python: a virtualenv of requirements.lock (every package at one version, each file's sha256: scripts/lock.sh
#    writes it from pyproject.toml), cached by the lock's hash; a thin per-clone .venv that sees it through a
#    .pth file and holds only this clone's editable install.
# ---------------------------------------------------------------------------------------------
setup_python() {
  local t0 deps hash venv
  t0=$(date +%s)
  [ -f requirements.lock ] || die "requirements.lock is missing." "run scripts/lock.sh (it writes it from pyproject.toml), then re-run make setup"
  deps=$(cat requirements.lock)
  hash=$(printf '%s\n%s\n' "$("$PYTHON" -c 'import sys; print(sys.version)')" "$deps" | sha256sum | cut -c1-16)
  venv="$KDR_HOME/venv/$hash"
  if [ ! -f "$venv/.complete" ]; then
    say "building the Python environment $venv (first run downloads pyspark, ~400 MB)"
    rm -rf "$venv.partial"
    mkdir -p "$KDR_HOME/venv"
    # The venv is built at its final path (scripts embed it) and marked complete only at the end.
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv" || die "python -m venv failed." "install the venv module (apt-get install python3.11-venv)"
    # Every file pip takes must match a hash of the lock; pip, setuptools and wheel are locked the same way and
    # installed first, on their own (a pip that replaces itself in the middle of a larger install can fail).
    "$PYTHON" - requirements.lock "$venv" <<'PY'
import re, sys
lock, venv = sys.argv[1:]
first, rest = [], []
for block in re.split(r"\n(?=[A-Za-z0-9])", open(lock).read()):
    m = re.match(r"([A-Za-z0-9._-]+)==", block)
    if m:
        (first if m[1] in ("pip", "setuptools", "wheel") else rest).append(block)
open(f"{venv}/bootstrap.lock", "w").write("\n".join(first) + "\n")
open(f"{venv}/requirements.lock", "w").write("\n".join(rest) + "\n")
PY
    "$venv/bin/pip" install --quiet --require-hashes --no-deps -r "$venv/bootstrap.lock" \
      || die "pip could not install pip, setuptools and wheel from requirements.lock (a hash mismatch means PyPI served another file)." "check access to PyPI, then re-run make setup"
    "$venv/bin/pip" install --quiet --require-hashes --no-deps -r "$venv/requirements.lock" \
      || die "pip could not install requirements.lock (see the pip error above: a hash mismatch means PyPI served another file)." "check access to PyPI, then re-run make setup (it resumes)"
    date -u +%FT%TZ > "$venv/.complete"
  fi
  # Per-clone venv: fast to create, shares the cached site-packages.
  if [ ! -f .venv/.kdr-base ] || [ "$(cat .venv/.kdr-base)" != "$venv" ] || [ ! -x .venv/bin/drctl ]; then
    rm -rf .venv
    "$PYTHON" -m venv --without-pip .venv
    local site
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/kdr-deps.pth"
    "$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation --prefix "$ROOT/.venv" -e . \
      || die "the editable install of this clone failed." "run 'make clean' and re-run make setup"
    # pip wrote the cached interpreter into the script; it must run this clone's .venv
    sed -i "1s|.*|#!$ROOT/.venv/bin/python|" .venv/bin/drctl
    echo "$venv" > .venv/.kdr-base
  fi
  .venv/bin/python -c 'import pyspark, pulumi, pulumi_kafka, confluent_kafka, pydantic, dr' \
    || die "the Python environment is incomplete." "delete $venv and re-run make setup"
  step_time "Python environment" "$t0"
}

# ---------------------------------------------------------------------------------------------
# 2. Jars from Maven Central: Kafka broker + tools, MirrorMaker 2, Spark's Kafka source, the tests' OIDC server.
# ---------------------------------------------------------------------------------------------
maven_copy() {  # maven_copy NAME POM OUTDIR [extra mvn args...]
  local name="$1" pom="$2" out="$3"; shift 3
  if [ -f "$out/.complete" ]; then return 0; fi
  say "resolving $name jars from Maven Central"
  rm -rf "$out.partial"; mkdir -p "$out.partial"
  mvn -q -B -s toolchain/maven-settings.xml -f "$pom" \
      -Dmaven.repo.local="$KDR_HOME/m2" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$out.partial" "$@" > "$out.partial.log" 2>&1 \
    || { tail -20 "$out.partial.log" >&2
         die "Maven could not resolve the $name jars (log: $out.partial.log)." "check access to Maven Central, then re-run make setup (it resumes)"; }
  ls "$out.partial"/*.jar >/dev/null 2>&1 || die "Maven produced no $name jars." "delete $out.partial and re-run make setup"
  publish "$out"
}

# The source hash of a Java component built here (its pom and src/): the cache key beside the Kafka version,
# so an edited source rebuilds. dr/base/toolchain.py (source_hash) computes the same value.
source_hash() {  # source_hash DIR
  find "$1/pom.xml" "$1/src" -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12
}

maven_build() {  # maven_build NAME DIR OUTDIR [extra mvn args...]: `mvn package` (its unit tests included) of DIR's copy
  local name="$1" dir="$2" out="$3"; shift 3
  if [ -f "$out/.complete" ]; then return 0; fi
  say "building $name with Maven (dependencies from Maven Central)"
  rm -rf "$out.partial"; mkdir -p "$out.partial/build"
  cp -r "$dir/pom.xml" "$dir/src" "$out.partial/build/"
  mvn -q -B -s toolchain/maven-settings.xml -f "$out.partial/build/pom.xml" \
      -Dmaven.repo.local="$KDR_HOME/m2" package "$@" > "$out.partial.log" 2>&1 \
    || { tail -30 "$out.partial.log" >&2
         die "Maven could not build $name (log: $out.partial.log)." "check access to Maven Central and the log's first error, then re-run make setup"; }
  cp "$out.partial"/build/target/*.jar "$out.partial/" || die "Maven produced no $name jar." "delete $out.partial and re-run make setup"
  rm -rf "$out.partial/build"
  publish "$out"
}

setup_jars() {
  local t0; t0=$(date +%s)
  maven_copy "Kafka $KAFKA_VERSION" toolchain/kafka/pom.xml "$KDR_HOME/kafka/$KAFKA_VERSION" \
    -Dkafka.version="$KAFKA_VERSION" -Dslf4j.version="$SLF4J_VERSION"
  maven_copy "MirrorMaker 2 $KAFKA_VERSION" toolchain/mm2/pom.xml "$KDR_HOME/mm2/$KAFKA_VERSION" \
    -Dkafka.version="$KAFKA_VERSION" -Dslf4j.version="$SLF4J_VERSION"
  # Connect's basic-auth REST extension; the Connect runtime it needs is the MirrorMaker 2 directory.
  maven_copy "Connect basic-auth extension $KAFKA_VERSION" toolchain/connect-auth/pom.xml \
    "$KDR_HOME/connect-auth/$KAFKA_VERSION" -Dkafka.version="$KAFKA_VERSION" \
    -DincludeArtifactIds=connect-basic-auth-extension
  # Only the connector and what pyspark does not already ship (Spark, Scala, Hadoop are "provided").
  maven_copy "spark-sql-kafka $SPARK_VERSION" toolchain/spark-kafka/pom.xml "$KDR_HOME/spark-kafka/$SPARK_VERSION" \
    -Dspark.version="$SPARK_VERSION" \
    -DincludeArtifactIds="spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2"
  # The broker-side lease fence (an Authorizer over Kafka's StandardAuthorizer), built from this clone's source.
  maven_build "the lease-fence authorizer" toolchain/lease-authorizer \
    "$KDR_HOME/lease-authorizer/$KAFKA_VERSION-$(source_hash toolchain/lease-authorizer)" \
    -Dkafka.version="$KAFKA_VERSION" -Dslf4j.version="$SLF4J_VERSION"
  # The OpenID Connect server the OAUTHBEARER tests put in front of their brokers (test-only).
  maven_copy "OIDC server $OIDC_SERVER_VERSION" toolchain/oidc-server/pom.xml "$KDR_HOME/oidc-server/$OIDC_SERVER_VERSION" \
    -Doidc.version="$OIDC_SERVER_VERSION"
  step_time "Kafka, MirrorMaker 2, Connect auth, lease authorizer, OIDC server and Spark jars" "$t0"
}

# ---------------------------------------------------------------------------------------------
# 3. Pulumi CLI built from the Go module proxy at the PyPI SDK's version.
# ---------------------------------------------------------------------------------------------
setup_pulumi() {
  local t0 out
  t0=$(date +%s)
  out="$KDR_HOME/pulumi/$PULUMI_VERSION"
  if [ ! -f "$out/.complete" ]; then
    say "building the Pulumi CLI v$PULUMI_VERSION from the Go module proxy (first run: ~4 min on 2 cores)"
    rm -rf "$out.partial"; mkdir -p "$out.partial/src" "$out.partial/bin"
    sed "s/@PULUMI_VERSION@/v$PULUMI_VERSION/g" toolchain/pulumi-cli/go.mod.in > "$out.partial/src/go.mod"
    cp toolchain/pulumi-cli/tools.go "$out.partial/src/tools.go"
    # The committed go.sum pins every module's hash (go verifies each download against it; a changed module
    # fails the build). After a version change, tidy adds what is missing: commit the new go.sum from the build.
    cp toolchain/pulumi-cli/go.sum "$out.partial/src/go.sum"
    ( cd "$out.partial/src" \
      && GOFLAGS=-mod=mod go mod tidy > ../build.log 2>&1 \
      && go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
           -o ../bin/pulumi github.com/pulumi/pulumi/pkg/v3/cmd/pulumi >> ../build.log 2>&1 ) \
      || { tail -20 "$out.partial/build.log" >&2
           die "building the Pulumi CLI failed (log: $out.partial/build.log)." "check access to the Go module proxy, then re-run make setup (downloaded modules are kept)"; }
    # Scripts the Python SDK's plugins need, shipped inside the sdk module (not built by Go).
    local sdk
    sdk=$(cd "$out.partial/src" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
    install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$out.partial/bin/"
    install -m 0755 "$sdk/python/dist/pulumi-resource-pulumi-python" "$out.partial/bin/"
    publish "$out"
  fi
  "$out/bin/pulumi" version | grep -q "v$PULUMI_VERSION" || die "the cached Pulumi CLI does not report v$PULUMI_VERSION." "delete $out and re-run make setup"
  step_time "Pulumi CLI v$PULUMI_VERSION" "$t0"
}

# The Python language host and the Kafka resource provider are built from the Go module proxy too,
# each by its own file (sourced): scripts/setup_language_host.sh, scripts/setup_kafka_provider.sh.
# shellcheck source=scripts/setup_language_host.sh
source "$ROOT/scripts/setup_language_host.sh"
# shellcheck source=scripts/setup_kafka_provider.sh
source "$ROOT/scripts/setup_kafka_provider.sh"
# shellcheck source=scripts/setup_postgresql.sh
source "$ROOT/scripts/setup_postgresql.sh"
# shellcheck source=scripts/setup_haproxy.sh
source "$ROOT/scripts/setup_haproxy.sh"
# shellcheck source=scripts/setup_witness.sh
source "$ROOT/scripts/setup_witness.sh"
# shellcheck source=scripts/setup_keycloak.sh
source "$ROOT/scripts/setup_keycloak.sh"

# ---------------------------------------------------------------------------------------------
# 4. The environment file: `source .env` puts pulumi and drctl on PATH with safe Pulumi defaults.
# ---------------------------------------------------------------------------------------------
write_env() {
  mkdir -p .state/pulumi
  chmod 700 .state
  if [ ! -s .state/passphrase ]; then
    ( umask 077; .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(32))' > .state/passphrase )
  fi
  cat > .env <<EOF
# Generated by scripts/setup.sh - source it: \`source .env\`
export KDR_HOME="$KDR_HOME"
export KDR_ROOT="$ROOT"
export PATH="$KDR_HOME/pulumi/$PULUMI_VERSION/bin:$ROOT/.venv/bin:\$PATH"
export PULUMI_HOME="$KDR_HOME/pulumi-home"
export PULUMI_BACKEND_URL="file://$ROOT/.state/pulumi"
export PULUMI_CONFIG_PASSPHRASE_FILE="$ROOT/.state/passphrase"
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DIY_BACKEND_NO_LEGACY_WARNING=true
# The language host runs the program with this clone's virtualenv (see toolchain/pulumi-language-python).
export PULUMI_PYTHON_CMD="$ROOT/.venv/bin/python"
# Refresh runs the program (pulumi up --refresh / refresh / destroy): resources are read in dependency
# order with current provider settings, so after a restart a stopped cluster comes back before its topics are read.
export PULUMI_RUN_PROGRAM=true
EOF
}

# ---------------------------------------------------------------------------------------------
# 4. The Spark driver's class-data-sharing archive (verification/class_archive.py): built once per
#    Java + pyspark + connector jars, it takes about 2 s off every Spark start. Optional: without
#    it Spark starts the ordinary way, so a failure is reported and setup goes on.
# ---------------------------------------------------------------------------------------------
setup_spark_cds() {
  local t0
  t0=$(date +%s)
  .venv/bin/python -m verification.class_archive \
    || say "the Spark class-data archive could not be built (see above); Spark will start without it"
  step_time "Spark driver class-data archive" "$t0"
}

# ---------------------------------------------------------------------------------------------
# 5. The Kafka JVMs' class-data-sharing archive (dr/runtime/class_archive.py): built once per Java +
#    Kafka jars by a throwaway one-broker cluster; every broker, controller and storage format maps
#    it. Optional like the Spark one: without it Kafka starts the ordinary way.
# ---------------------------------------------------------------------------------------------
setup_kafka_cds() {
  local t0
  t0=$(date +%s)
  .venv/bin/python -m dr.runtime.class_archive_build \
    || say "the Kafka class-data archive could not be built (see above); Kafka will start without it"
  step_time "Kafka class-data archive" "$t0"
}

main() {
  # `scripts/setup.sh [python] [jars] [pulumi] [language-host] [kafka-provider] [postgresql] [haproxy] [etcd] [prometheus] [keycloak] [spark-cds] [kafka-cds]`
  # runs only the named steps (default: all, in that order).
  local steps=("$@")
  [ ${#steps[@]} -gt 0 ] || steps=(python jars pulumi language-host kafka-provider postgresql haproxy etcd prometheus keycloak spark-cds kafka-cds)
  check_prereqs
  for s in "${steps[@]}"; do
    case "$s" in
      python) setup_python ;;
      jars) setup_jars ;;
      pulumi) setup_pulumi ;;
      language-host) setup_language_host ;;
      kafka-provider) setup_kafka_provider ;;
      postgresql) setup_postgresql ;;
      haproxy) setup_haproxy ;;
      etcd) setup_etcd ;;
      prometheus) setup_prometheus ;;
      keycloak) setup_keycloak ;;
      spark-cds) setup_spark_cds ;;
      kafka-cds) setup_kafka_cds ;;
      *) die "unknown setup step '$s'." "use python, jars, pulumi, language-host, kafka-provider, postgresql, haproxy, etcd, prometheus, keycloak, spark-cds or kafka-cds (or nothing for all)" ;;
    esac
  done
  write_env
  local total=$(( $(date +%s) - START ))
  say "done in ${total}s. Cache: $KDR_HOME. Run 'source .env' for pulumi and drctl on PATH."
  mkdir -p "$KDR_HOME/timings"
  echo "$(date -u +%FT%TZ) setup ${total}s" >> "$KDR_HOME/timings/setup.log"
}

main "$@"
