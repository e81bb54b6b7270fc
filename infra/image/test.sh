#!/usr/bin/env bash
# Checks make image: two builds give the same digest and the same bytes,
# the tarball is an OCI layout that names the image, and the image runs
# /cdclake as 65532:65532 on linux/amd64 from one layer holding the binary
# and cdclake-lakehouse beside it, passwd and group with nonroot, /tmp 1777 and CA certificates.
#
# usage: infra/image/test.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
a=$("$here/build.sh" "$work/a.tar" docker.io/cdclake/cdclake:test 2>"$work/a.log") || { cat "$work/a.log" >&2; exit 1; }
b=$("$here/build.sh" "$work/b.tar" docker.io/cdclake/cdclake:test 2>"$work/b.log") || { cat "$work/b.log" >&2; exit 1; }
[[ $a == "$b" ]] || { echo "image: two builds, two digests: $a $b" >&2; exit 1; }
cmp -s "$work/a.tar" "$work/b.tar" || { echo "image: two builds, two tarballs" >&2; exit 1; }
mkdir "$work/oci" && tar -xf "$work/a.tar" -C "$work/oci"
python3 - "$work/oci" "$a" <<'PY'
import gzip, io, json, os, sys, tarfile
root, digest = sys.argv[1], sys.argv[2]
blob = lambda d: os.path.join(root, "blobs", *d.split(":"))
assert json.load(open(os.path.join(root, "oci-layout")))["imageLayoutVersion"] == "1.0.0"
index = json.load(open(os.path.join(root, "index.json")))
[m] = index["manifests"]
assert m["digest"] == digest, (m["digest"], digest)
assert m["annotations"]["org.opencontainers.image.ref.name"] == "docker.io/cdclake/cdclake:test", m
manifest = json.load(open(blob(m["digest"])))
config = json.load(open(blob(manifest["config"]["digest"])))
assert (config["os"], config["architecture"]) == ("linux", "amd64"), config
c = config["config"]
assert c["Entrypoint"] == ["/cdclake"] and c["User"] == "65532:65532", c
assert c["Labels"]["org.opencontainers.image.title"] == "cdclake", c
[layer] = manifest["layers"]
with tarfile.open(fileobj=io.BytesIO(gzip.decompress(open(blob(layer["digest"]), "rb").read()))) as t:
    files = {m.name.lstrip("./"): m for m in t.getmembers()}
    passwd = t.extractfile(files["etc/passwd"]).read().decode()
assert files["cdclake"].mode == 0o755 and files["tmp"].mode == 0o1777, (files["cdclake"].mode, files["tmp"].mode)
assert files["cdclake-lakehouse"].mode == 0o755, files["cdclake-lakehouse"].mode
assert "nonroot:x:65532:65532:" in passwd, passwd
assert files["etc/ssl/certs/ca-certificates.crt"].size > 10000
assert all(f.mtime == 0 and f.uid == 0 and f.gid == 0 for f in files.values())
print(f"image: {digest}, twice; {len(files)} entries; /cdclake as 65532:65532, linux/amd64")
PY
