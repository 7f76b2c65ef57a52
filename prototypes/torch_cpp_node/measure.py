import sys, time, statistics, ctypes, re
sys.path.insert(0, ".")
import torch, numpy as np
torch.set_num_threads(2)
from benchmarks.torch_compile import _models, Step, null_backend
from axgraph.frontends.torch import AxgraphBackend
from axgraph.transformers.cpu import kernel_c
name = [k for k in _models() if "small" in k][0]
torch.manual_seed(0)
model, shape = _models()[name]()
be = AxgraphBackend()
ax = Step(model, shape, be)
for _ in range(3): ax()
fw, bw = be.graphs
def raw_entry(nat):
    src = nat.source
    src = src.replace("int axgraph_step(void* const* F, void* args)", "int axgraph_step(void* const* F, void* const* PP)")
    src = re.sub(r"    void\* ([ar])(\d+) = ITEM\(args, (\d+)\);\n    if \(.*\) return 1;\n", lambda m: "", src)
    n = [0]
    def rep(m):
        return f"PP[{m.group(3)}]"
    # map names to their position: a{j} -> j ; r{k} -> nparams + k
    nparams = len(re.findall(r"const \w+\* P\d+ = ", src))
    src = re.sub(r"DATA\(a(\d+)\)", lambda m: f"PP[{m.group(1)}]", src)
    src = re.sub(r"DATA\(r(\d+)\)", lambda m: f"PP[{nparams + int(m.group(1))}]", src)
    lib = kernel_c.build(src, kernel_c.toolchain())
    f = getattr(lib.handle, "axgraph_step")
    return lib, ctypes.cast(f, ctypes.c_void_p).value
nf, nb = fw.executable.last_program.native, bw.executable.last_program.native
lf, pf = raw_entry(nf); lb, pb = raw_entry(nb)
node = ctypes.PyDLL("prototypes/torch_cpp_node/node.so")
node.init.argtypes = [ctypes.c_void_p] * 4
node.init(pf, ctypes.addressof(nf.fixed), pb, ctypes.addressof(nb.fixed))
stepf = node.step; stepf.argtypes = [ctypes.py_object]; stepf.restype = ctypes.py_object
def cpp_backend(gm, example_inputs):
    xi = [i for i, e in enumerate(example_inputs) if not e.requires_grad][0]
    ws = [i for i, e in enumerate(example_inputs) if e.requires_grad]
    order = [xi] + ws
    def run(*args):
        return (stepf(tuple(args[i] for i in order)),)
    return run
torch._dynamo.reset()
cpp = Step(model, shape, cpp_backend)
torch._dynamo.reset()
null = Step(model, shape, null_backend)
eager = Step(model, shape, None)
for s in (cpp, eager):
    s(); s()
print("max weight diff", max(float(np.abs(a - b).max()) for a, b in zip(cpp.weights(), eager.weights())))
null(); null()
steps = {"eager": eager, "cpp node": cpp, "null": null, "axgraph": ax}
res = {k: [] for k in steps}
for r in range(21):
    for k, s in steps.items():
        t0 = time.perf_counter()
        for _ in range(300): s()
        res[k].append((time.perf_counter() - t0) / 300 * 1e6)
for k, v in res.items():
    print(f"{k:14s} median {statistics.median(v):6.1f} us")
