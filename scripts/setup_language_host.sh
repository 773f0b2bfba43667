# shellcheck shell=bash
# Sourced by scripts/setup.sh (not run by itself): defines setup_language_host, which builds the Pulumi
# Python language host (pulumi-language-python) from the Go module proxy and puts it beside the CLI.
#
# The host's own module (github.com/pulumi/pulumi/sdk/python/cmd/...) is refused by the proxy, but
# sdk/v3 up to v3.79.0 still contains it as a main package (v3.68.0 is used); toolchain/pulumi-language-python/
# is the wrapper module that builds it (see its README.md). It drives the v$PULUMI_VERSION engine and PyPI
# pulumi at $PULUMI_VERSION; the program's -exec shim comes from sdk/v3 v$PULUMI_VERSION.
# Uses setup.sh's ROOT, KDR_HOME, PULUMI_VERSION, say, die, publish and step_time.

HOST_SDK_VERSION="${HOST_SDK_VERSION:-3.68.0}"

setup_language_host() {
  local t0 out cli_bin src sdk f
  t0=$(date +%s)
  out="$KDR_HOME/pulumi-language-python/$HOST_SDK_VERSION-for-$PULUMI_VERSION"
  cli_bin="$KDR_HOME/pulumi/$PULUMI_VERSION/bin"
  src="$ROOT/toolchain/pulumi-language-python"
  [ -x "$cli_bin/pulumi" ] \
    || die "the Pulumi CLI v$PULUMI_VERSION is not built yet ($cli_bin/pulumi); the language host goes beside it." \
           "run 'scripts/setup.sh pulumi' first (setup runs the pulumi step before the language host)"

  if [ ! -f "$out/.complete" ]; then
    say "building the Pulumi Python language host from sdk/v3 v$HOST_SDK_VERSION (first run: ~1.5 min on 2 cores)"
    rm -rf "$out.partial"; mkdir -p "$out.partial/src" "$out.partial/bin"
    sed "s/@HOST_SDK_VERSION@/v$HOST_SDK_VERSION/g" "$src/go.mod.in" > "$out.partial/src/go.mod"
    cp "$src/tools.go" "$out.partial/src/tools.go"
    # The committed go.sum pins the module hashes of the default version; tidy checks them, adds any missing.
    cp "$src/go.sum" "$out.partial/src/go.sum"
    ( cd "$out.partial/src" \
      && go mod tidy > ../build.log 2>&1 \
      && go list -m github.com/pulumi/pulumi/sdk/v3 | tee -a ../build.log | grep -x "github.com/pulumi/pulumi/sdk/v3 v$HOST_SDK_VERSION" > /dev/null \
      && go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$HOST_SDK_VERSION" \
           -o ../bin/pulumi-language-python github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python >> ../build.log 2>&1 \
      && ../bin/pulumi-language-python -h >> ../build.log 2>&1 \
      && { echo "# go mod download -json github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION"
           go mod download -json "github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION"; } > ../sdk-exec.json 2>> ../build.log ) \
      || { cat "$out.partial/sdk-exec.json" >> "$out.partial/build.log" 2>/dev/null || true
           tail -20 "$out.partial/build.log" >&2
           die "building the Pulumi Python language host failed (log: $out.partial/build.log)." \
               "check access to the Go module proxy, then re-run make setup (downloaded modules are kept); if one version fails the checksum lookup, set HOST_SDK_VERSION to a neighbouring sdk/v3 version that still contains python/cmd/pulumi-language-python"; }
    # The program is run by the -exec shim, which the host looks for beside itself. Take it from the
    # sdk module at the CLI's version (it matches PyPI pulumi $PULUMI_VERSION and accepts the old host's arguments).
    sdk=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' "$out.partial/sdk-exec.json" | head -1)
    [ -n "$sdk" ] && [ -f "$sdk/python/cmd/pulumi-language-python-exec" ] \
      || die "the sdk/v3 v$PULUMI_VERSION module has no python/cmd/pulumi-language-python-exec (see $out.partial/sdk-exec.json)." \
             "check access to the Go module proxy, then re-run make setup"
    install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$out.partial/bin/"
    rm -f "$out.partial/sdk-exec.json"
    publish "$out"
  fi
  for f in pulumi-language-python pulumi-language-python-exec; do
    [ -s "$out/bin/$f" ] || die "the cached language host is incomplete ($out/bin/$f is missing)." "delete $out and re-run make setup"
  done

  # Wire it beside the CLI: the engine finds a language host there without the "from \$PATH" warning.
  # Copy under a temporary name in the same directory, then rename, and only when missing or different.
  local dst tmp
  for f in pulumi-language-python pulumi-language-python-exec; do
    dst="$cli_bin/$f"
    if [ ! -f "$dst" ] || [ "$(sha256sum < "$dst")" != "$(sha256sum < "$out/bin/$f")" ]; then
      tmp=$(mktemp "$cli_bin/.$f.XXXXXX") || die "cannot write to $cli_bin." "make $cli_bin writable, or delete $KDR_HOME/pulumi/$PULUMI_VERSION and re-run make setup"
      cp "$out/bin/$f" "$tmp" && chmod 0755 "$tmp" && mv -f "$tmp" "$dst" \
        || { rm -f "$tmp"; die "cannot install $f beside the Pulumi CLI in $cli_bin." "make $cli_bin writable, then re-run make setup"; }
    elif [ ! -x "$dst" ] || [ "$(stat -c %a "$dst")" != 755 ]; then
      chmod 0755 "$dst"
    fi
  done
  step_time "Pulumi Python language host (sdk/v3 v$HOST_SDK_VERSION, beside the CLI)" "$t0"
}
