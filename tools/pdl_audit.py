#!/usr/bin/env python3
"""Checks launch.cuh's PDL contract on the compiled kernels (sm_90 SASS), not on the source.

Under programmatic dependent launch a kernel starts while the one before it still runs, so every
global memory access before its griddepcontrol.wait (SASS ACQBULK) must touch data no kernel of
the window writes (weights, constant tables). The source can keep that rule and the binary still
break it: ptxas treats a read-only load (ld.global.nc: a `const T* __restrict__` operand, __ldg)
as free to move above the wait, since such data may not change while the kernel runs. That is how
swiglu_entries_kernel came to read the group count before its wait.

For every kernel of the given CUDA objects or static libraries:
  * each global load, store or atomic before the first ACQBULK must come from a source line that
    carries the tag `pdl-pre-wait` (on the line itself or on a caller it is inlined into); L2
    prefetches (CCTL) are allowed anywhere, as they change no value;
  * a kernel without ACQBULK must be one of NO_PDL_KERNELS (launched with <<<>>>, never with the
    PDL attribute): one that the attribute reaches without waiting would let the next kernel pass
    it and the one before it.
Needs cuobjdump and nvdisasm (the CUDA toolkit's, or the ones triton ships in .venv) and objects
built with -lineinfo. Exit status 0 when every kernel keeps the contract, 1 with a report otherwise,
2 when the tools or the sm_90 code are missing.
"""
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

TAG = "pdl-pre-wait"
# Kernels launched only with <<<>>> (no PDL attribute): the device probe's and the parity MMA check's.
NO_PDL_KERNELS = ("read_sum_kernel", "fill_random_words_kernel", "mma_tile_kernel")
MEMORY_OP = re.compile(r"^(?:@!?U?P\w+\s+)?(LDG|LDGSTS|STG|ATOMG|ATOM|RED|REDG|LD|ST)(?:\.|\s)")
LOCATION = re.compile(r'(?:File|inlined at) "([^"]+)", line (\d+)')


def find_tool(name):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates = [shutil.which(name), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", name)]
    candidates += sorted(glob.glob(os.path.join(repo, ".venv/lib/python3*/site-packages/triton/backends/nvidia/bin", name)))
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    return None


class Sources:
    def __init__(self):
        self.lines = {}

    def tagged(self, path, line):
        if path not in self.lines:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    self.lines[path] = f.read().splitlines()
            except OSError:
                self.lines[path] = []
        text = self.lines[path]
        return 0 < line <= len(text) and TAG in text[line - 1]


def kernels(listing):
    """(mangled name, [(instruction, [(file, line) of its inline chain])]) per kernel."""
    name, body, chain, fresh = None, [], [], True
    for raw in listing.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", raw)
        if m:
            if name:
                yield name, body
            name, body, chain, fresh = m.group(1), [], [], True
            continue
        if "//##" in raw:  # an instruction's location lines: the inlined one, then where it is inlined
            chain = ([] if fresh else chain) + [(f, int(n)) for f, n in LOCATION.findall(raw)]
            fresh = False
            continue
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s*(.*?)\s*;", raw)
        if m and name:
            body.append((m.group(1), chain))
            fresh = True
    if name:
        yield name, body


def demangle(name):
    try:
        return subprocess.run(["c++filt"], input=name, capture_output=True, text=True).stdout.strip() or name
    except OSError:
        return name


def audit_cubin(nvdisasm, cubin, sources):
    """(kernels seen, problems) of one cubin."""
    problems = []
    listing = subprocess.run([nvdisasm, "-gi", "-c", cubin], capture_output=True, text=True)
    if listing.returncode != 0:
        return 0, [f"{cubin}: nvdisasm failed: {listing.stderr.strip()}"]
    count = 0
    for name, body in kernels(listing.stdout):
        count += 1
        wait = next((i for i, (ins, _) in enumerate(body) if ins.startswith("ACQBULK")), None)
        if wait is None:
            if not any(k in name for k in NO_PDL_KERNELS):
                problems.append(f"{demangle(name)}: no griddepcontrol.wait (launched with PDL it would not order the kernels around it)")
            continue
        for ins, chain in body[:wait]:
            if not MEMORY_OP.match(ins):
                continue
            if not chain:
                problems.append(f"{demangle(name)}: `{ins}` before the wait has no line info (build with -lineinfo)")
            elif not any(sources.tagged(f, n) for f, n in chain):
                where = " <- ".join(f"{os.path.basename(f)}:{n}" for f, n in chain)
                problems.append(f"{demangle(name)}: `{ins}` before the wait, from {where} (not tagged {TAG})")
    return count, problems


def main(argv):
    if len(argv) < 2:
        print("usage: pdl_audit.py OBJECT_OR_LIBRARY...", file=sys.stderr)
        return 2
    cuobjdump, nvdisasm = find_tool("cuobjdump"), find_tool("nvdisasm")
    if not cuobjdump or not nvdisasm:
        print("pdl_audit: cuobjdump and nvdisasm not found (CUDA toolkit or .venv's triton)", file=sys.stderr)
        return 2
    sources, problems, n_kernels, cubins = Sources(), [], 0, []
    with tempfile.TemporaryDirectory() as tmp:
        objects = []
        for i, path in enumerate(argv[1:]):
            path = os.path.abspath(path)
            if path.endswith(".a"):
                d = os.path.join(tmp, f"lib{i}")
                os.makedirs(d)
                subprocess.run(["ar", "x", path], cwd=d, check=True)
                objects += sorted(os.path.join(d, o) for o in os.listdir(d))
            else:
                objects.append(path)
        for j, obj in enumerate(objects):
            d = os.path.join(tmp, f"obj{j}")
            os.makedirs(d)
            subprocess.run([cuobjdump, "-xelf", "all", obj], cwd=d, capture_output=True)
            cubins += sorted(glob.glob(os.path.join(d, "*.sm_90*.cubin")))
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            for count, found in pool.map(lambda c: audit_cubin(nvdisasm, c, sources), cubins):
                n_kernels += count
                problems += found
    n_cubins = len(cubins)
    if n_cubins == 0:
        print("pdl_audit: no sm_90 code in the given objects (build with CMAKE_CUDA_ARCHITECTURES including 90)", file=sys.stderr)
        return 2
    for p in sorted(problems):
        print("pdl_audit:", p)
    print(f"pdl_audit: {n_kernels} kernels in {n_cubins} sm_90 objects, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
