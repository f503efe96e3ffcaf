#!/usr/bin/env bash
# Build the upstream control-plane binaries used by the e2e suites from Go
# modules: kube-apiserver, kube-controller-manager and kubectl (module
# e2e/tools/kubernetes) and etcd (module e2e/tools/etcd). Output: e2e/bin/
# (gitignored), or $E2E_BIN_DIR. kube-controller-manager is used by the Kruise
# conformance tier (e2e/kruise/run), the others by both tiers.
#
#   e2e/build-tools.sh [--real-node]
#
# --real-node also builds what e2e/real-node.sh and the in-cluster tier need:
# kubelet, kube-proxy and kube-scheduler (same module and ldflags as the others,
# so Go's build cache is shared), a registry (distribution v3) and crane
# (go-containerregistry). A cold kubelet build takes ~20 min on 2 loaded cores;
# with the apiserver already in Go's cache ~3 min (kube-proxy and kube-scheduler
# add a few minutes more when cold).
#
# Idempotent and cheap when up to date: if all binaries exist and a stamp of
# the inputs (go.mod/go.sum, ldflags, go version, this script) is unchanged the
# build is skipped entirely; otherwise `go build` runs and Go's build cache
# (default ~/.cache/go-build) and module cache (~/go/pkg/mod) make it fast.
#
# Env knobs:
#   FORCE=1          ignore the stamp and always run `go build` (still cached)
#   GO_BUILD_P=N     go build parallelism (default 2; the k8s build is RAM hungry)
#   E2E_BIN_DIR=DIR  output directory (default <repo>/e2e/bin)
#
# Exit codes: 0 ok, 3 `go` not found, other = build failure.
# The last line of output is the binary directory.
set -euo pipefail

REAL_NODE=0
for a in "$@"; do
  case "$a" in
    --real-node) REAL_NODE=1 ;;
    *) echo "build-tools.sh: unknown argument $a (usage: $0 [--real-node])" >&2; exit 2 ;;
  esac
done

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN_DIR="${E2E_BIN_DIR:-$E2E_DIR/bin}"
K8S_MOD="$E2E_DIR/tools/kubernetes"
ETCD_MOD="$E2E_DIR/tools/etcd"
P="${GO_BUILD_P:-2}"

if ! command -v go >/dev/null 2>&1; then
  echo "build-tools.sh: the 'go' command was not found on PATH." >&2
  echo "  Go (>= the 'go' line in e2e/tools/*/go.mod, currently 1.26.0) is needed only to build" >&2
  echo "  the upstream kube-apiserver, kubectl and etcd binaries for the e2e tests." >&2
  exit 3
fi

# Never auto-download a different toolchain; build static binaries.
export GOTOOLCHAIN=local
export CGO_ENABLED=0

# Versions come from the tools go.mod files (single source of truth).
K8S_VERSION="$(cd "$K8S_MOD" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
ETCD_VERSION="$(cd "$ETCD_MOD" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
if [[ ! "$K8S_VERSION" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+ ]]; then
  echo "build-tools.sh: cannot parse k8s.io/kubernetes version '$K8S_VERSION'" >&2
  exit 1
fi
K8S_MAJOR="${BASH_REMATCH[1]}"
K8S_MINOR="${BASH_REMATCH[2]}"

# Same stamping as upstream hack/lib/version.sh (gitVersion/Major/Minor/TreeState),
# for both the server-side and the client-go copy of the version package.
K8S_LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  K8S_LDFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$K8S_MAJOR"
  K8S_LDFLAGS+=" -X $pkg.gitMinor=$K8S_MINOR -X $pkg.gitTreeState=clean"
done
ETCD_LDFLAGS="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"

BINS=(kube-apiserver kube-controller-manager kubectl etcd)
STAMP="$BIN_DIR/.build-stamp"
stamp_value() {
  {
    go version
    echo "$K8S_LDFLAGS|$ETCD_LDFLAGS|$BIN_DIR"
    cat "$K8S_MOD/go.mod" "$K8S_MOD/go.sum" "$ETCD_MOD/go.mod" "$ETCD_MOD/go.sum" "${BASH_SOURCE[0]}"
  } | sha256sum | cut -d' ' -f1
}
WANT="$(stamp_value)"

up_to_date() {
  [[ "${FORCE:-0}" != 1 ]] || return 1
  [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] || return 1
  local b
  for b in "${BINS[@]}"; do [[ -x "$BIN_DIR/$b" ]] || return 1; done
}

if up_to_date; then
  echo "build-tools.sh: up to date (kubernetes $K8S_VERSION, etcd $ETCD_VERSION)"
else
  mkdir -p "$BIN_DIR"
  rm -f "$STAMP"
  echo "build-tools.sh: building kube-apiserver + kube-controller-manager + kubectl $K8S_VERSION (go build -p $P; a cold build takes many minutes)"
  (cd "$K8S_MOD" && go build -p "$P" -trimpath -ldflags "$K8S_LDFLAGS" -o "$BIN_DIR/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl)
  echo "build-tools.sh: building etcd $ETCD_VERSION"
  (cd "$ETCD_MOD" && go build -p "$P" -trimpath -ldflags "$ETCD_LDFLAGS" -o "$BIN_DIR/etcd" \
    go.etcd.io/etcd/server/v3)
  "$BIN_DIR/kube-apiserver" --version
  # Not `| head -1`: under pipefail, etcd can die of SIGPIPE (exit 141) writing its later lines.
  "$BIN_DIR/etcd" --version | sed -n 1p
  echo "$WANT" >"$STAMP"
fi

# --- the real node's tools (e2e/real-node.sh) ---------------------------------------------------------------------
REGISTRY_PKG="github.com/distribution/distribution/v3/cmd/registry@v3.1.2"
CRANE_PKG="github.com/google/go-containerregistry/cmd/crane@v0.22.1"
REAL_BINS=(kubelet kube-proxy kube-scheduler registry crane)
REAL_STAMP="$BIN_DIR/.build-stamp-real-node"
real_stamp_value() {
  { echo "$WANT|$REGISTRY_PKG|$CRANE_PKG"; } | sha256sum | cut -d' ' -f1
}
real_up_to_date() {
  [[ "${FORCE:-0}" != 1 ]] || return 1
  [[ -f "$REAL_STAMP" && "$(cat "$REAL_STAMP")" == "$(real_stamp_value)" ]] || return 1
  local b
  for b in "${REAL_BINS[@]}"; do [[ -x "$BIN_DIR/$b" ]] || return 1; done
}
if ((REAL_NODE)); then
  if real_up_to_date; then
    echo "build-tools.sh: real-node tools up to date (kubelet $K8S_VERSION, registry, crane)"
  else
    rm -f "$REAL_STAMP"
    echo "build-tools.sh: building kubelet, kube-proxy, kube-scheduler $K8S_VERSION (a cold build takes ~20 min; shares Go's cache with the apiserver)"
    (cd "$K8S_MOD" && go build -p "$P" -trimpath -ldflags "$K8S_LDFLAGS" -o "$BIN_DIR/" k8s.io/kubernetes/cmd/kubelet \
      k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler)
    # `go install pkg@version`: each tool in its own module's build list, pinned by the version above.
    echo "build-tools.sh: building $REGISTRY_PKG and $CRANE_PKG"
    # One `go install` per module (a pkg@version list must name one module).
    for pkg in "$REGISTRY_PKG" "$CRANE_PKG"; do
      (cd "$BIN_DIR" && GOBIN="$BIN_DIR" go install -p "$P" -trimpath -ldflags "-s -w" "$pkg")
    done
    "$BIN_DIR/kubelet" --version
    real_stamp_value >"$REAL_STAMP"
  fi
fi

echo "$BIN_DIR"
