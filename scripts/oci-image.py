#!/usr/bin/env python3
"""Assemble insitu's container image as an OCI image layout, reproducibly (used by scripts/build-image).

    oci-image.py --binary PATH --out DIR --tag TAG --version V --revision SHA --epoch SECONDS [--source URL]

One layer, FROM scratch: /insitu (the static binary), /etc/passwd and /etc/group naming the user 65532 (nonroot,
as distroless images do, so tools show a name), and an empty /tmp. Files have mtime SOURCE_DATE_EPOCH, owner
0:0, sorted names; gzip has no timestamp and a fixed level; JSON is written with sorted keys and no spaces.
The same binary and arguments give the same digests. Writes DIR (oci-layout, index.json, blobs/sha256/) and
DIR.tar (the same layout as one file: `podman load -i`, `skopeo copy oci-archive:`), then prints one line:
`<manifest digest> <compressed bytes>` (config + layer, what a pull downloads).
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import time

USER = "65532"
PASSWD = b"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
GROUP = b"root:x:0:\nnonroot:x:65532:\n"


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tar_bytes(entries, mtime):
    """entries: (path, kind, data, mode) → tar bytes with fixed owner, mtime and order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path, kind, data, mode in sorted(entries):
            info = tarfile.TarInfo(path)
            info.mtime = mtime
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = mode
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def gz(data):
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=9) as f:
        f.write(data)
    return out.getvalue()


def write_blob(layout, data, media_type):
    digest = sha(data)
    with open(os.path.join(layout, "blobs", "sha256", digest.split(":", 1)[1]), "wb") as f:
        f.write(data)
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def layer(binary, mtime):
    with open(binary, "rb") as f:
        exe = f.read()
    return tar_bytes(
        [
            ("insitu", "file", exe, 0o755),
            ("etc", "dir", None, 0o755),
            ("etc/passwd", "file", PASSWD, 0o644),
            ("etc/group", "file", GROUP, 0o644),
            ("tmp", "dir", None, 0o1777),
        ],
        mtime,
    )


def archive(layout, mtime):
    """The layout directory as one tar (an OCI archive), entries in a fixed order."""
    entries = []
    for root, dirs, files in os.walk(layout):
        dirs.sort()
        rel = os.path.relpath(root, layout)
        if rel != ".":
            entries.append((rel, "dir", None, 0o755))
        for name in sorted(files):
            with open(os.path.join(root, name), "rb") as f:
                entries.append((os.path.normpath(os.path.join(rel, name)), "file", f.read(), 0o644))
    with open(layout + ".tar", "wb") as f:
        f.write(tar_bytes(entries, mtime))


def build(args):
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(args.epoch))
    labels = {
        "org.opencontainers.image.title": "insitu",
        "org.opencontainers.image.description": "In-place-update CloneSet controller (OpenKruise drop-in)",
        "org.opencontainers.image.version": args.version,
        "org.opencontainers.image.revision": args.revision,
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.licenses": "Apache-2.0",
    }
    if args.source:
        labels["org.opencontainers.image.source"] = args.source
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(os.path.join(args.out, "blobs", "sha256"))
    tar = layer(args.binary, args.epoch)
    layer_desc = write_blob(args.out, gz(tar), "application/vnd.oci.image.layer.v1.tar+gzip")
    config = {
        # containerd refuses a manifest whose config lacks os/architecture.
        "architecture": args.arch,
        "os": "linux",
        "created": created,
        "config": {
            "User": f"{USER}:{USER}",
            "Entrypoint": ["/insitu"],
            "Cmd": ["run"],
            "WorkingDir": "/",
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [sha(tar)]},
        "history": [{"created": created, "created_by": "scripts/build-image: /insitu, /etc/passwd, /etc/group, /tmp"}],
    }
    config_desc = write_blob(args.out, canonical(config), "application/vnd.oci.image.config.v1+json")
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": [layer_desc],
        "annotations": labels,
    }
    manifest_desc = write_blob(args.out, canonical(manifest), "application/vnd.oci.image.manifest.v1+json")
    manifest_desc["annotations"] = {"org.opencontainers.image.ref.name": args.tag}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [manifest_desc]}
    with open(os.path.join(args.out, "index.json"), "wb") as f:
        f.write(canonical(index))
    with open(os.path.join(args.out, "oci-layout"), "wb") as f:
        f.write(canonical({"imageLayoutVersion": "1.0.0"}))
    archive(args.out, args.epoch)
    print(manifest_desc["digest"], config_desc["size"] + layer_desc["size"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tag", required=True, help="the reference name in index.json, e.g. 0.1.0")
    p.add_argument("--version", required=True)
    p.add_argument("--revision", required=True)
    p.add_argument("--epoch", type=int, required=True, help="SOURCE_DATE_EPOCH: file mtimes and `created`")
    p.add_argument("--source", default="", help="org.opencontainers.image.source (left out when empty)")
    p.add_argument("--arch", default="amd64", help="the OCI architecture of the binary")
    build(p.parse_args())


if __name__ == "__main__":
    main()
