#!/usr/bin/env bash
# Build helm from its Go module (helm.sh/helm/v3 cmd/helm, pinned below) into e2e/bin (or $E2E_BIN_DIR), for
# e2e/run's chart checks (render charts/insitu, compare with deploy/, apply it with a server-side dry run).
# Cheap when up to date: skipped when the binary reports the pinned version; otherwise `go install`, which
# Go's module and build caches make fast after the first time (a cold build took ~15 min on 2 cores under load 16; ~10 s with the caches warm).
#
#   e2e/build-helm.sh        prints the helm binary's path on its last line
#
# Exit codes: 0 ok, 3 `go` not found, other = build failure.
set -euo pipefail

HELM_VERSION=v3.22.0
E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN_DIR="${E2E_BIN_DIR:-$E2E_DIR/bin}"
HELM="$BIN_DIR/helm"

if [[ -x "$HELM" && "$("$HELM" version --template '{{.Version}}' 2>/dev/null || true)" == "$HELM_VERSION" && "${FORCE:-0}" != 1 ]]; then
  echo "build-helm.sh: helm $HELM_VERSION up to date" >&2
  echo "$HELM"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "build-helm.sh: the 'go' command was not found on PATH (needed to build helm $HELM_VERSION)" >&2
  exit 3
fi
export GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$BIN_DIR"
echo "build-helm.sh: building helm $HELM_VERSION (go install; a cold build takes minutes)" >&2
# The version stamp helm prints (`helm version`), as its Makefile sets it.
(cd "$BIN_DIR" && GOBIN="$BIN_DIR" go install -p "${GO_BUILD_P:-2}" -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
"$HELM" version --short >&2
echo "$HELM"
