import sys, time, statistics, ctypes
sys.path.insert(0, ".")
import torch, numpy as np
torch.set_num_threads(2)
from benchmarks.torch_compile import _models, Step, null_backend
from axgraph.frontends.torch import AxgraphBackend
name = [k for k in _models() if "small" in k][0]
torch.manual_seed(0)
model, shape = _models()[name]()
be = AxgraphBackend()
ax = Step(model, shape, be)
for _ in range(3): ax()
fw, bw = be.graphs
nf, nb = fw.executable.last_program.native, bw.executable.last_program.native
pf = ctypes.cast(nf.pointers_entry, ctypes.c_void_p).value  # NativeStep.pointers_entry
pb = ctypes.cast(nb.pointers_entry, ctypes.c_void_p).value
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
