"""One-off: draws real files and labels them by the stated rule (docs/evaluation.md), before any threshold is tuned."""

import hashlib
import json
import os
import random
import sys
import sysconfig
from collections import Counter
from importlib import metadata

r = random.Random(51)
STD = sysconfig.get_paths()["stdlib"]
SITE = sysconfig.get_paths()["purelib"]
dists = {}
for d in metadata.distributions():
    for f in d.files or []:
        top = str(f).split("/")[0]
        dists.setdefault(top, (d.metadata["Name"], d.version))


def files(root, pred):
    out = []
    for dp, dn, fn in os.walk(root):
        dn.sort()
        for n in sorted(fn):
            p = os.path.join(dp, n)
            rel = os.path.relpath(p, root)
            if pred(rel) and os.path.isfile(p) and not os.path.islink(p):
                out.append(rel)
    return out


rows = []


def add(root, rel, label, why):
    full = os.path.join(STD if root == "stdlib" else SITE, rel)
    data = open(full, "rb").read()
    if root == "stdlib":
        pkg, ver = "python", sys.version.split()[0]
    else:
        pkg, ver = dists.get(rel.split("/")[0], ("?", "?"))
    rows.append(
        {
            "root": root,
            "path": rel,
            "package": pkg,
            "version": ver,
            "sha256": hashlib.sha256(data).hexdigest(),
            "label": label,
            "why": why,
        }
    )


def sample(lst, n):
    return r.sample(lst, min(n, len(lst)))


std_py = files(
    STD,
    lambda p: (
        p.endswith(".py")
        and "site-packages" not in p
        and not p.startswith(("test/", "encodings/", "idlelib/idle_test", "lib2to3/tests"))
        and "/test" not in p
    ),
)
for p in sample(std_py, 80):
    add("stdlib", p, "keep", "hand-written standard library module")
codecs = files(
    STD,
    lambda p: (
        p.startswith("encodings/")
        and os.path.basename(p).startswith(("cp", "mac_", "iso8859_", "koi8_", "hp_", "kz1048", "ptcp"))
    ),
)
for p in sample(codecs, 40):
    add("stdlib", p, "drop", "generated codec table (gencodec.py output)")


def site(pred):
    return files(SITE, lambda p: ".dist-info/" not in p and pred(p))


for p in sample(site(lambda p: p.endswith(("_pb2.py", "_pb2_grpc.py"))), 40):
    add("site", p, "drop", "generated protobuf module")
vendored = site(lambda p: "/_vendor/" in p and p.endswith(".py"))
for p in sample(vendored, 30):
    add("site", p, "drop", "vendored copy of another project")
headers = site(lambda p: p.endswith(".h") and "/_vendor/" not in p)
for p in sample(headers, 50):
    add("site", p, "keep", "hand-written C/C++ header")
for p in sample(site(lambda p: p.endswith(".pyi") and "/_vendor/" not in p), 40):
    add("site", p, "keep", "hand-written type stub")
js_css = site(lambda p: p.endswith((".js", ".css")))
for p in js_css:
    if "/_vendor/" in p:
        add("site", p, "drop", "vendored copy of another project")
    elif p.endswith("projector_binary.js"):
        add("site", p, "drop", "minified bundle (read by hand)")
    else:
        add("site", p, "keep", "hand-written JS/CSS (read by hand)")
sizes = [
    (p, os.path.getsize(os.path.join(SITE, p))) for p in site(lambda p: p.endswith(".json") and "/_vendor/" not in p)
]
for p, s in sample([x for x in sizes if x[1] > 20000], 25):
    add("site", p, "drop", "JSON over 20 kB: data")
for p, s in sample([x for x in sizes if 60 < x[1] < 2000], 25):
    add("site", p, "keep", "JSON under 2 kB: configuration or schema")
for p in sample(site(lambda p: p.endswith(".csv")), 20):
    add("site", p, "drop", "CSV: data")
others = site(
    lambda p: (
        p.endswith(".py") and "/_vendor/" not in p and "_pb2" not in p and "/tests/" not in p and "/test/" not in p
    )
)
for p in sample(others, 60):
    add("site", p, "keep", "hand-written package module")
with open("tests/data/code_labels.jsonl", "w") as f:
    f.write(
        json.dumps(
            {
                "_comment": "Labels of real files from the Python standard library (root stdlib) and the venv's "
                "site-packages (root site); labelled by the rule in docs/evaluation.md before thresholds "
                "were tuned. Fields: root, path, package, version, sha256, label (keep/drop), why."
            }
        )
        + "\n"
    )
    for row in rows:
        f.write(json.dumps(row) + "\n")
print(len(rows), Counter(r_["label"] for r_ in rows), Counter(r_["why"] for r_ in rows))
