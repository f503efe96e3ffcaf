#!/usr/bin/env python3
"""Build the e2e test images as OCI layouts, reproducibly, from Debian's busybox-static.

    real-node-images.py <outdir> <busybox>   # prints: <reference> <layout dir>, one per image

Every image has two layers: busybox as /bin/busybox with a symlink per applet (shared by all images), and a
small one naming the image (/etc/image-ref, /www/index.html = the reference), so two tags differ by one file
and get different digests. Files have mtime 0 and owner 0:0, gzip has no timestamp: the same busybox binary
always gives the same digests. The behaviour of each image family (the command it runs) is in IMAGES below.
"""

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def server(script, name):
    """A server under sh as PID 1 that exits 0 on SIGTERM (PID 1 gets no default signal action, so a bare
    httpd would sit out the whole grace period). Arguments a pod appends are ignored ("$@" of sh -c)."""
    return ["/bin/sh", "-c", f"trap 'exit 0' TERM; {script} & wait", name]


WEB = server("httpd -f -p 80 -h /www", "web")
BEHAVIOURS = {
    # An HTTP server on :80 answering with the image reference (nginx, httpd).
    "web": {"Entrypoint": WEB},
    # Exits 1 half a second after each start: CrashLoopBackOff, never Ready (the sim's --crash-image).
    "crash": {"Entrypoint": ["/bin/sh", "-c", "echo crashing >&2; usleep 500000; exit 1", "crash"]},
    # busybox: the default command is a shell, which exits at once without a terminal.
    "exits": {"Cmd": ["sh"]},
    # A TCP server on :6379 (tcpSocket probes) that is not redis.
    "redis": {"Entrypoint": server("httpd -f -p 6379 -h /www", "redis")},
    # agnhost: HTTP on :80 and :8080 whatever the subcommand.
    "agnhost": {"Entrypoint": server("httpd -p 8080 -h /www; httpd -f -p 80 -h /www", "agnhost")},
    # The sandbox (pause) image.
    "pause": {"Entrypoint": ["/bin/sleep", "2147483647"]},
}

# (reference, behaviour): the images the e2e scenarios (crates/insitu/tests/e2e) and Kruise's e2e specs
# (k8s.io/kubernetes/test/utils/image of the Kubernetes version Kruise's test module pins) name.
IMAGES = [
    ("docker.io/library/nginx:1.19.0", "web"),
    ("docker.io/library/nginx:1.20.0", "web"),
    ("docker.io/library/nginx:1.21.0", "web"),
    ("docker.io/library/nginx:1.21.0-crash", "crash"),
    ("docker.io/library/nginx:alpine", "web"),
    ("docker.io/library/nginx:latest", "web"),
    ("docker.io/library/busybox:1.36", "exits"),
    ("docker.io/library/busybox:1.37", "exits"),
    ("docker.io/library/busybox:latest", "exits"),
    ("docker.io/library/redis:alpine", "redis"),
    ("docker.io/library/redis:latest", "redis"),
    ("registry.k8s.io/e2e-test-images/httpd:2.4.38-4", "web"),
    ("registry.k8s.io/e2e-test-images/httpd:2.4.39-4", "web"),
    ("registry.k8s.io/e2e-test-images/nginx:1.14-4", "web"),
    ("registry.k8s.io/e2e-test-images/nginx:1.15-4", "web"),
    ("registry.k8s.io/e2e-test-images/busybox:1.36.1-1", "exits"),
    ("registry.k8s.io/e2e-test-images/redis:5.0.5-3", "redis"),
    ("registry.k8s.io/e2e-test-images/agnhost:2.53", "agnhost"),
    ("registry.k8s.io/pause:3.10", "pause"),
]
# The what-if scenario's rollouts (crates/insitu/tests/e2e/whatif.rs): two tags per case.
IMAGES += [
    (f"docker.io/library/nginx:whatif-{case}-{n}", "web")
    for case in ("image", "image-resources", "env", "canary", "no-fit")
    for n in (1, 2)
]


def tar_bytes(entries):
    """entries: list of (path, kind, data_or_target, mode) → deterministic tar bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path, kind, data, mode in sorted(entries):
            info = tarfile.TarInfo(path)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = mode
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "link":
                info.type = tarfile.SYMTYPE
                info.linkname = data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def gz(data):
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as f:
        f.write(data)
    return out.getvalue()


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def base_layer(busybox):
    with open(busybox, "rb") as f:
        binary = f.read()
    applets = subprocess.run([busybox, "--list"], check=True, capture_output=True, text=True).stdout.split()
    entries = [("bin", "dir", None, 0o755), ("bin/busybox", "file", binary, 0o755)]
    entries += [(f"bin/{a}", "link", "busybox", 0o777) for a in applets if a != "busybox"]
    entries += [("sbin", "link", "bin", 0o777), ("usr", "dir", None, 0o755)]
    entries += [("usr/bin", "link", "../bin", 0o777), ("usr/sbin", "link", "../bin", 0o777)]
    for d in ("etc", "proc", "sys", "dev", "root", "var", "www"):
        entries.append((d, "dir", None, 0o755))
    entries.append(("tmp", "dir", None, 0o1777))
    entries.append(("etc/passwd", "file", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n", 0o644))
    entries.append(("etc/group", "file", b"root:x:0:\nnogroup:x:65534:\n", 0o644))
    return tar_bytes(entries)


def ref_layer(ref):
    body = (ref + "\n").encode()
    return tar_bytes([
        ("etc", "dir", None, 0o755),
        ("etc/image-ref", "file", body, 0o644),
        ("www", "dir", None, 0o755),
        ("www/index.html", "file", body, 0o644),
    ])


def write_blob(layout, data):
    digest = sha(data)
    path = os.path.join(layout, "blobs", "sha256", digest.split(":", 1)[1])
    with open(path, "wb") as f:
        f.write(data)
    return {"digest": digest, "size": len(data)}


def build(outdir, busybox):
    base_tar = base_layer(busybox)
    base_gz = gz(base_tar)
    for ref, behaviour in IMAGES:
        layout = os.path.join(outdir, ref.replace("/", "_").replace(":", "_"))
        os.makedirs(os.path.join(layout, "blobs", "sha256"), exist_ok=True)
        top_tar = ref_layer(ref)
        top_gz = gz(top_tar)
        layers = [write_blob(layout, base_gz), write_blob(layout, top_gz)]
        config = {
            # containerd refuses a manifest whose config lacks os/architecture.
            "architecture": "amd64",
            "os": "linux",
            "config": dict({"Env": [PATH_ENV], "WorkingDir": "/"}, **BEHAVIOURS[behaviour]),
            "rootfs": {"type": "layers", "diff_ids": [sha(base_tar), sha(top_tar)]},
            "history": [{"created_by": "busybox-static"}, {"created_by": f"image reference {ref}"}],
        }
        cfg = write_blob(layout, json.dumps(config, sort_keys=True, separators=(",", ":")).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": dict(cfg, mediaType="application/vnd.oci.image.config.v1+json"),
            "layers": [dict(layer, mediaType="application/vnd.oci.image.layer.v1.tar+gzip") for layer in layers],
        }
        man = write_blob(layout, json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [dict(man, mediaType="application/vnd.oci.image.manifest.v1+json")],
        }
        with open(os.path.join(layout, "index.json"), "w") as f:
            json.dump(index, f, sort_keys=True)
        with open(os.path.join(layout, "oci-layout"), "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)
        print(ref, layout, man["digest"])


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build(sys.argv[1], sys.argv[2])
