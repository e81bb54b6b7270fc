#!/usr/bin/env bash
# Builds cdclake's OCI image without a container engine (make image):
#
#   1. the binary, static: CGO_ENABLED=0 go build -trimpath, version and
#      commit linked in;
#   2. one reproducible layer (tar sorted by name, every time 0, owner 0):
#      /cdclake, /cdclake-lakehouse (the committer of lakehouse tables),
#      /etc/passwd and /etc/group with the user nonroot (65532),
#      /tmp (1777) and the CA certificates of this machine;
#   3. crane (go-containerregistry, from the Go module proxy) appends the
#      layer to an empty OCI base in a registry it serves on loopback for
#      the build alone, sets the platform, entrypoint, user and labels, and
#      pulls the image back as an OCI layout, which is validated and
#      written as a tarball whose index names the image, so that
#      `ctr images import` creates it under that name.
#
# Building twice gives the same digest (infra/image/test.sh checks it).
#
# usage: infra/image/build.sh OUT.tar [IMAGE_NAME]
#   IMAGE_NAME defaults to docker.io/cdclake/cdclake:$VERSION
#   VERSION and COMMIT default to git describe and git rev-parse.
#   BINARY=path builds the image around another static binary, with
#   ENTRYPOINT (default /cdclake) naming it in the image (the cluster's
#   pause image, infra/k8s).
# Prints the image's digest on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?usage: infra/image/build.sh OUT.tar [IMAGE_NAME]}
cache=${CDCLAKE_CACHE:-$HOME/.cache/cdclake}
CRANE_VERSION=v0.22.1
crane=$cache/tools/crane-$CRANE_VERSION
if [[ ! -x $crane ]]; then
  mkdir -p "$cache/tools/gobin"
  GOBIN=$cache/tools/gobin GOFLAGS=-mod=mod go install "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION" >&2
  mv "$cache/tools/gobin/crane" "$crane"
fi
VERSION=${VERSION:-$(git -C "$repo" describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)}
name=${2:-docker.io/cdclake/cdclake:$VERSION}
entrypoint=${ENTRYPOINT:-/cdclake}
certs=/etc/ssl/certs/ca-certificates.crt
[[ -f $certs ]] || { echo "image: $certs is missing (apt-get install ca-certificates)" >&2; exit 1; }

work=$(mktemp -d)
registry_pid=
cleanup() {
  [[ -n $registry_pid ]] && kill "$registry_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

root=$work/root
mkdir -p "$root/etc/ssl/certs" "$root/tmp"
if [[ -n ${BINARY:-} ]]; then
  cp "$BINARY" "$root/${entrypoint#/}"
else
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT" \
    -o "$root/cdclake" ./cmd/cdclake)
  # The committer of lakehouse tables, which cdclake starts beside itself
  # for a run with table_format: iceberg.
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$root/cdclake-lakehouse" ./cmd/cdclake-lakehouse)
  chmod_extra=/cdclake-lakehouse
fi
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
cp "$certs" "$root/etc/ssl/certs/ca-certificates.crt"
# Modes set here, not left to the umask: the layer's bytes are the same
# on every machine with the same binary and certificates.
find "$root" -type d -exec chmod 0755 {} +
find "$root" -type f -exec chmod 0644 {} +
chmod 0755 "$root/${entrypoint#/}"
[[ -z ${chmod_extra:-} ]] || chmod 0755 "$root$chmod_extra"
chmod 1777 "$root/tmp"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$root" -cf "$work/layer.tar" .

# A registry on loopback for the build alone, on a free port.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$crane" registry serve --address "127.0.0.1:$port" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 1 50); do
  curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break
  sleep 0.1
done
ref=127.0.0.1:$port/cdclake
# crane's progress goes to a log, shown if a step fails.
trap 'rc=$?; ((rc == 0)) || cat "$work/crane.log" >&2 2>/dev/null; cleanup; exit $rc' EXIT
"$crane" append --insecure --oci-empty-base -f "$work/layer.tar" -t "$ref:base" >/dev/null 2>>"$work/crane.log"
"$crane" mutate --insecure "$ref:base" -t "$ref:image" --set-platform linux/amd64 --entrypoint "$entrypoint" \
  --user 65532:65532 \
  -l "org.opencontainers.image.title=cdclake" \
  -l "org.opencontainers.image.description=Lands change-data-capture streams in a data lake as Parquet" \
  -l "org.opencontainers.image.version=$VERSION" \
  -l "org.opencontainers.image.revision=$COMMIT" \
  -l "org.opencontainers.image.licenses=Apache-2.0" >/dev/null 2>>"$work/crane.log"
"$crane" validate --insecure --remote "$ref:image" >>"$work/crane.log" 2>&1
digest=$("$crane" digest --insecure "$ref:image" 2>>"$work/crane.log")
"$crane" pull --insecure --format=oci "$ref:image" "$work/oci" 2>>"$work/crane.log"
# crane writes no name into the layout's index: without one, `ctr images
# import` imports the image unnamed.
python3 - "$work/oci/index.json" "$name" <<'PY'
import json, sys
path, name = sys.argv[1], sys.argv[2]
index = json.load(open(path))
for m in index["manifests"]:
    m.setdefault("annotations", {})["org.opencontainers.image.ref.name"] = name
json.dump(index, open(path, "w"), separators=(",", ":"), sort_keys=True)
PY
mkdir -p "$(dirname "$out")"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$work/oci" -cf "$out.tmp" .
mv "$out.tmp" "$out"
echo "image: $name $digest ($(du -h "$out" | cut -f1)) in $out" >&2
echo "$digest"
