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
