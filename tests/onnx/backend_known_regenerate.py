"""Writes tests/onnx/_backend_known.py from a JUnit XML of test_onnx_backend.py
run with an empty KNOWN: every failing case with its reason (a data type
refused at load on purpose, or the error it gives today), to review before
committing.

    python tests/onnx/backend_known_regenerate.py RESULTS.xml tests/onnx/_backend_known.py
"""
from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

HEADER = '''"""Claimed-operator cases of ONNX's backend suite that are not run, each with
its reason (tests/onnx/test_onnx_backend.py): data types yscv.onnx.load
refuses on purpose, cases whose expected output cannot be reproduced, and
cases that fail today (defects to fix; a fixed case must leave this list).

Regenerate after a change of the importer: empty KNOWN, run
``pytest tests/onnx/test_onnx_backend.py --junitxml=r.xml``, then
``python tests/onnx/backend_known_regenerate.py r.xml tests/onnx/_backend_known.py``
and review the difference."""
'''

#: Bernoulli cases: the expected output holds NumPy's own draws (ONNX's test says so)
BERNOULLI = {f"test_bernoulli{s}{e}" for s in ("", "_double", "_seed") for e in ("", "_expanded")}


def reason(name: str, failure) -> str:
    lines = (failure.get("message") or "").strip().splitlines()
    msg = re.sub(r"^yscv\.(onnx\.load|errors)\.", "", lines[0] if lines else "")
    if name in BERNOULLI:
        return ("not comparable: the expected output holds NumPy's own random Bernoulli "
                "draws (yscv draws from its generator, or from the seed attribute)")
    if re.search(r"graph input .* has type|is not a tensor \(sequences", msg):
        return "refused at load on purpose: " + msg.split("onnx.load: ", 1)[-1]
    if msg.startswith("AssertionError") or not msg:
        m = re.search(r"(Mismatched elements.*|Not equal to tolerance.*)", failure.text or "")
        return "fails today: wrong values or dtype" + (": " + m.group(1)[:120] if m else "")
    return "fails today: " + msg[:200]


def main(xml_path: str, out_path: str) -> int:
    known = {}
    for case in ET.parse(xml_path).iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        name = case.get("name")
        if failure is None or not name.endswith("_cpu"):
            continue
        known[name[:-len("_cpu")]] = reason(name[:-len("_cpu")], failure)
    body = "".join(f"    {k!r}:\n        {known[k]!r},\n" for k in sorted(known))
    with open(out_path, "w") as f:
        f.write(HEADER + "\nKNOWN = {\n" + body + "}\n")
    return len(known)


if __name__ == "__main__":
    print(main(sys.argv[1], sys.argv[2]), "cases listed")
