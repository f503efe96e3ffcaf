# insitu's controller image: `docker build -t insitu:0.1.0 .` (or `podman build`, `buildah bud`). The same image
# as scripts/build-image (which needs no container engine): FROM scratch, the static /insitu with the controller
# only (no simulated cluster), /etc/passwd and /etc/group naming user 65532, an empty /tmp.
#   docker build --build-arg INSITU_GIT_COMMIT="$(git rev-parse HEAD)" -t insitu:0.1.0 .
# Without the argument build.rs asks git in the build context (`unknown` without .git).

# Debian 12, as the machines scripts/build-image runs on: the same glibc is linked in.
FROM docker.io/library/rust:1.95-bookworm AS build
ARG INSITU_GIT_COMMIT=""
ENV INSITU_GIT_COMMIT=${INSITU_GIT_COMMIT}
WORKDIR /insitu
# The node agent's CRI bindings (crate k8s-cri) generate their code with protoc in a build script.
RUN apt-get update && apt-get install -y --no-install-recommends protobuf-compiler && rm -rf /var/lib/apt/lists/*
COPY . .
# The flags of scripts/build-image (checkout /insitu, target dir remapped to /target, cargo home to /cargo):
# crt-static links glibc in, so the runtime stage needs no loader or shared library; `--target` keeps build
# scripts and proc-macros dynamic.
ENV CARGO_TARGET_DIR=/insitu/target/image CARGO_PROFILE_RELEASE_STRIP=symbols
RUN set -eu; \
    host="$(rustc -vV | sed -n 's/^host: //p')"; \
    export RUSTFLAGS="-C target-feature=+crt-static --remap-path-prefix=/insitu=/insitu --remap-path-prefix=$CARGO_HOME=/cargo --remap-path-prefix=$CARGO_TARGET_DIR=/target"; \
    export "CFLAGS_$(echo "$host" | tr - _)=-ffile-prefix-map=/insitu=/insitu -ffile-prefix-map=$CARGO_HOME=/cargo -ffile-prefix-map=$CARGO_TARGET_DIR=/target"; \
    cargo build --release --locked -p insitu --no-default-features --features agent --target "$host"; \
    mkdir -p /rootfs/etc /rootfs/tmp; \
    cp "$CARGO_TARGET_DIR/$host/release/insitu" /rootfs/insitu; \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/rootfs/etc/passwd; \
    printf 'root:x:0:\nnonroot:x:65532:\n' >/rootfs/etc/group; \
    chmod 1777 /rootfs/tmp; \
    /rootfs/insitu --version

FROM scratch
ARG INSITU_GIT_COMMIT=""
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="insitu" \
      org.opencontainers.image.description="In-place-update CloneSet controller (OpenKruise drop-in)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${INSITU_GIT_COMMIT}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /rootfs/ /
USER 65532:65532
ENTRYPOINT ["/insitu"]
CMD ["run"]
