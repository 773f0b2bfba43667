# shellcheck shell=bash
# Sourced by scripts/setup.sh (not run by itself): defines setup_kafka_provider, which builds the Pulumi
# Kafka resource provider plugin (pulumi-resource-kafka) at the version PyPI pulumi_kafka asks for and
# installs it into the project's Pulumi home.
#
# Pulumi's own provider module (github.com/pulumi/pulumi-kafka/provider/v3) is refused by the Go module
# proxy, so toolchain/pulumi-kafka/ builds the same provider from the Terraform provider
# (Mongey/terraform-provider-kafka) and pulumi-terraform-bridge (see its README.md). Build order:
# schema generator (tfgen) -> schema.json -> schema-embed.json (the schema with its version) -> the
# provider binary, which embeds it. The output is cached under $KDR_HOME keyed by the version and a hash
# of the module's files, so an edit of the mapping rebuilds and nothing else does.
# Uses setup.sh's ROOT, KDR_HOME, PULUMI_VERSION, PULUMI_KAFKA_VERSION, say, die, publish and step_time.

setup_kafka_provider() {
  local t0 src hash out log bin cli plugdir want have
  t0=$(date +%s)
  src="toolchain/pulumi-kafka"
  [ -f "$ROOT/$src/go.mod" ] || die "$ROOT/$src/go.mod is missing." "restore toolchain/pulumi-kafka from git (git checkout -- toolchain/pulumi-kafka)"
  # Hash of every file of the module, names included (an added, removed or renamed file counts too).
  hash=$(cd "$ROOT" && find "$src" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
  out="$KDR_HOME/pulumi-kafka/$PULUMI_KAFKA_VERSION-$hash"
  bin="$out/bin/pulumi-resource-kafka"

  if [ ! -f "$out/.complete" ]; then
    say "building the Pulumi Kafka provider v$PULUMI_KAFKA_VERSION from the Go module proxy (first run: ~7 min on 2 cores)"
    rm -rf "$out.partial"
    mkdir -p "$out.partial/bin" || die "cannot create $out.partial." "make $KDR_HOME writable, or set KDR_HOME elsewhere"
    log="$out.partial/build.log"
    # The module goes in a directory named "provider": tfgen looks there for the Go module that holds the
    # upstream provider's docs (it runs `go mod download` in ./provider). The committed go.sum pins every
    # module, so the build neither resolves nor rewrites anything.
    # tfgen's --skip-examples keeps the upstream docs' examples as Terraform code: translating them
    # needs `pulumi convert` with the Terraform converter plugin, or the Java/YAML/C# code generators
    # the proxy refuses (stand-ins under stubs/). tfgen leaves "version" out of the schema; the
    # embedded copy (schema-embed.json) carries it, on the line after "name".
    cp -R "$ROOT/$src" "$out.partial/provider"
    # (An && chain, not set -e: errexit does not apply inside a subshell whose status is tested.)
    ( cd "$out.partial/provider" \
      && echo "# $(date -u +%T) go build pulumi-tfgen-kafka ($(go version))" \
      && go build -trimpath -o ../tfgen/pulumi-tfgen-kafka ./cmd/pulumi-tfgen-kafka \
      && echo "# $(date -u +%T) pulumi-tfgen-kafka schema" \
      && ../tfgen/pulumi-tfgen-kafka schema --skip-examples --out ../tfgen/out \
      && mv ../tfgen/out/schema.json ../schema.json \
      && sed '0,/^    "name": "kafka",$/s//&\n    "version": "'"$PULUMI_KAFKA_VERSION"'",/' ../schema.json > ../schema-embed.json \
      && { [ "$(grep -c '^    "version": "'"$PULUMI_KAFKA_VERSION"'",$' ../schema-embed.json)" = 1 ] \
           || { echo "could not set the version in schema-embed.json"; false; }; } \
      && cp ../schema-embed.json cmd/pulumi-resource-kafka/schema-embed.json \
      && echo "# $(date -u +%T) go build pulumi-resource-kafka" \
      && go build -trimpath -ldflags "-s -w -X kafkadr.local/pulumi-kafka.Version=$PULUMI_KAFKA_VERSION" \
           -o ../bin/pulumi-resource-kafka ./cmd/pulumi-resource-kafka \
      && v=$(../bin/pulumi-resource-kafka -version) \
      && echo "# $(date -u +%T) pulumi-resource-kafka -version: $v" \
      && [ "$v" = "$PULUMI_KAFKA_VERSION" ] \
    ) > "$log" 2>&1 \
      || { tail -20 "$log" >&2
           die "building the Pulumi Kafka provider failed (log: $log)." \
               "check access to the Go module proxy, then re-run 'scripts/setup.sh kafka-provider' (downloaded modules are kept); if a module version fails the checksum lookup, pick a neighbouring version in toolchain/pulumi-kafka/go.mod (see its README.md)"; }
    rm -rf "$out.partial/tfgen"   # the 100 MB schema generator is needed only for the build
    publish "$out"
  fi
  [ -x "$bin" ] || die "the cached Kafka provider is incomplete ($bin is missing)." "delete $out and re-run make setup"

  # Install into the project's Pulumi home, only when the installed binary is missing or different.
  cli="$KDR_HOME/pulumi/$PULUMI_VERSION/bin/pulumi"
  [ -x "$cli" ] \
    || die "the Pulumi CLI v$PULUMI_VERSION is not built yet ($cli); it installs the Kafka provider." \
           "run 'scripts/setup.sh pulumi' first (setup runs the pulumi step before the Kafka provider)"
  plugdir="$KDR_HOME/pulumi-home/plugins/resource-kafka-v$PULUMI_KAFKA_VERSION"
  want=$(sha256sum < "$bin")
  have=$( [ -f "$plugdir/pulumi-resource-kafka" ] && sha256sum < "$plugdir/pulumi-resource-kafka" || true )
  if [ "$want" != "$have" ]; then
    say "installing the Kafka provider v$PULUMI_KAFKA_VERSION into $KDR_HOME/pulumi-home"
    PULUMI_HOME="$KDR_HOME/pulumi-home" PULUMI_SKIP_UPDATE_CHECK=true \
      "$cli" plugin install resource kafka "$PULUMI_KAFKA_VERSION" --file "$bin" --reinstall \
      || die "pulumi plugin install of the Kafka provider failed." "delete $plugdir and re-run 'scripts/setup.sh kafka-provider'"
    have=$( [ -f "$plugdir/pulumi-resource-kafka" ] && sha256sum < "$plugdir/pulumi-resource-kafka" || true )
    [ "$want" = "$have" ] \
      || die "after installing, $plugdir does not hold the binary just built." "delete $plugdir and re-run 'scripts/setup.sh kafka-provider'"
  fi
  step_time "Pulumi Kafka provider v$PULUMI_KAFKA_VERSION ($out)" "$t0"
}
