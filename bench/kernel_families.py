"""Run a topic's bench once per family of PyTorch CPU kernels (DEFAULT, AVX2, and this CPU's own),
each in a fresh process, since the family is chosen when PyTorch loads.

Why: a conclusion a notebook prints must hold on every CPU students have, and
ATEN_CPU_CAPABILITY reproduces another CPU's kernels on this one. A topic's bench calls
`results_on_each_family(__file__, seeds)`; its script must print, with `--json --seeds N`, one
JSON line (last) holding at least {"capability": ...}.
"""
import json
import os
import subprocess
import sys


def results_on_each_family(script, seeds):
    """{capability: the script's JSON result} for each family that ran; a failure is printed."""
    results = {}
    for capability in ("default", "avx2", None):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        env.pop("ATEN_CPU_CAPABILITY", None)
        if capability:
            env["ATEN_CPU_CAPABILITY"] = capability
        done = subprocess.run([sys.executable, script, "--json", "--seeds", str(seeds)], env=env,
                              capture_output=True, text=True)
        if done.returncode:
            print(f"  {capability or 'native'}: failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        results[result["capability"]] = result
    return results
