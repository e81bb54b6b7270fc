"""What a Delta table's log records, read from its commit files (stdlib
only: both the delta-rs and the Spark checks import it)."""
import json
import os


def txns(root, version):
    """The offsets (txn versions by appId cdclake.offset.<source>.<partition>)
    the table at root records as of a version, from its log's commits, which
    the checked lakes keep (sink.delta.log_retention deletes none in a test)."""
    out = {}
    for v in range(version + 1):
        with open(os.path.join(root, "_delta_log", f"{v:020d}.json")) as f:
            for line in f:
                a = json.loads(line)
                if "txn" in a and a["txn"]["appId"].startswith("cdclake.offset."):
                    out[a["txn"]["appId"]] = a["txn"]["version"]
    return out


def actions(root, version):
    """The actions of one version's commit."""
    with open(os.path.join(root, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def operation(root, version):
    """The operation a version's commitInfo names (WRITE, OPTIMIZE)."""
    for a in actions(root, version):
        if "commitInfo" in a:
            return a["commitInfo"].get("operation")
    return None


def expired(root, files, version, newest):
    """Whether a version is one whose compacted files cdclake expired: it
    is not the newest, and every file of it that is gone was a compacted
    one (<table>/_compacted/), which expiry deletes once no version to
    keep names it; the lake's own files are never deleted."""
    gone = [f for f in files if not os.path.exists(f)]
    return bool(gone) and version < newest and all(
        os.path.relpath(f, root).startswith("_compacted" + os.sep) for f in gone)


def hidden(root, path):
    """Whether a file under a table's folder is in a hidden (_ or .)
    folder: the log, compacted files, which hold no rows of their own."""
    return any(seg.startswith(("_", ".")) for seg in os.path.relpath(path, root).split(os.sep)[:-1])


def files(root, version):
    """The data files (paths) of the table at root as of a version, from
    its log's commits."""
    from urllib.parse import unquote
    live = set()
    for v in range(version + 1):
        for a in actions(root, v):
            if "add" in a:
                live.add(unquote(a["add"]["path"]))
            elif "remove" in a:
                live.discard(unquote(a["remove"]["path"]))
    return sorted(os.path.join(root, p) for p in live)
