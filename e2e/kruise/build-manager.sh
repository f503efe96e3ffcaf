#!/usr/bin/env bash
# kruise-manager built from Kruise's source archive, once per archive hash: prints two lines, the binary and
# Kruise's config/ directory (CRDs via `kubectl kustomize config/crd`, webhook configurations in config/webhook).
#
#   e2e/kruise/build-manager.sh
#
# Source: $KRUISE_ARCHIVE, else ../shared/third_party/openkruise/kruise-07169cf.tar.gz next to this checkout or
# any ancestor directory (a worktree or clone under the workplace), else the copy in the cache. Extracted where
# e2e/kruise/run extracts it (e2e/.work/src-<hash>/kruise). The binary goes to $KRUISE_E2E_CACHE (default
# ~/.cache/insitu, outside the checkout: clean checkouts reuse it) as kruise-manager-<hash>, with a stamp of the
# Go version: warm, this takes well under a second; cold, several minutes of Go (GO_BUILD_P=2 packages at once).
# Exit 3 when Go or the archive is missing.
set -euo pipefail

KRUISE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
E2E_DIR="$(cd "$KRUISE_DIR/.." && pwd)"
ROOT="$(cd "$E2E_DIR/.." && pwd)"
NAME=kruise-07169cf.tar.gz
CACHE="${KRUISE_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/insitu}"
say() { echo "build-manager: $*" >&2; }
export GOTOOLCHAIN=local CGO_ENABLED=0

command -v go >/dev/null 2>&1 || { say "Go not found"; exit 3; }
archive="${KRUISE_ARCHIVE:-}"
if [[ -z "$archive" ]]; then
  d="$ROOT"
  while [[ "$d" != / ]]; do
    d="$(dirname "$d")"
    if [[ -f "$d/shared/third_party/openkruise/$NAME" ]]; then archive="$d/shared/third_party/openkruise/$NAME"; break; fi
  done
  [[ -n "$archive" ]] || archive="$CACHE/$NAME"
fi
[[ -f "$archive" ]] || { say "Kruise's source archive shared/third_party/openkruise/$NAME not found (or set KRUISE_ARCHIVE)"; exit 3; }
key="$(sha256sum "$archive" | cut -c1-12)"
src="$E2E_DIR/.work/src-$key/kruise"
if [[ ! -f "$src/.extracted" ]]; then
  say "extracting $archive"
  rm -rf "$E2E_DIR/.work/src-$key"
  mkdir -p "$E2E_DIR/.work/src-$key"
  tar -xzf "$archive" -C "$E2E_DIR/.work/src-$key"
  [[ -f "$src/main.go" && -d "$src/config/crd" ]] || { say "$archive holds no kruise/main.go"; exit 1; }
  touch "$src/.extracted"
fi
mkdir -p "$CACHE"
bin="$CACHE/kruise-manager-$key"
stamp="$(go version) -trimpath $key"
if [[ ! -x "$bin" || "$(cat "$bin.stamp" 2>/dev/null)" != "$stamp" ]]; then
  t=$SECONDS
  say "building kruise-manager (go build in $src; cold: several minutes)"
  (cd "$src" && go build -trimpath -p "${GO_BUILD_P:-2}" -o "$bin.tmp.$$" .) >&2
  mv "$bin.tmp.$$" "$bin"
  echo "$stamp" >"$bin.stamp"
  say "kruise-manager built in $((SECONDS - t))s"
fi
echo "$bin"
echo "$src/config"
