#!/usr/bin/env python3
"""Writes an OCI image archive from a root filesystem, reproducibly: the same files
give the same digest (sorted entries, fixed times and owners, no timestamps in JSON).

    oci.py --rootfs DIR --ref docker.io/library/NAME:TAG --out ARCHIVE.tar
           [--entrypoint JSON] [--cmd JSON] [--user UID] [--env K=V ...] [--workdir DIR]
"""
import argparse
import hashlib
import io
import json
import os
import tarfile


def layer(rootfs: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                path = os.path.join(dirpath, name)
                arc = os.path.relpath(path, rootfs)
                info = tar.gettarinfo(path, arcname=arc)
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                if info.isreg():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def blob(out: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    out.addfile(info, io.BytesIO(data))
    return digest


def canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rootfs", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--entrypoint")
    p.add_argument("--cmd")
    p.add_argument("--user")
    p.add_argument("--workdir")
    p.add_argument("--env", action="append", default=[])
    a = p.parse_args()

    diff = layer(a.rootfs)
    config = {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"] + a.env}
    if a.entrypoint:
        config["Entrypoint"] = json.loads(a.entrypoint)
    if a.cmd:
        config["Cmd"] = json.loads(a.cmd)
    if a.user:
        config["User"] = a.user
    if a.workdir:
        config["WorkingDir"] = a.workdir
    with tarfile.open(a.out, mode="w", format=tarfile.USTAR_FORMAT) as out:
        layer_digest = blob(out, diff)
        image_config = canonical({
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        })
        config_digest = blob(out, image_config)
        manifest = canonical({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": f"sha256:{config_digest}", "size": len(image_config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": f"sha256:{layer_digest}", "size": len(diff)}],
        })
        manifest_digest = blob(out, manifest)
        index = canonical({
            "schemaVersion": 2,
            "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "digest": f"sha256:{manifest_digest}", "size": len(manifest),
                           "annotations": {"org.opencontainers.image.ref.name": a.ref}}],
        })
        for name, data in (("oci-layout", canonical({"imageLayoutVersion": "1.0.0"})), ("index.json", index)):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            out.addfile(info, io.BytesIO(data))
    print(f"{a.ref} sha256:{manifest_digest}")


if __name__ == "__main__":
    main()
