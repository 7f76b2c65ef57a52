"""Runs the sharded training steps in a process of its own, with forced host devices.

JAX fixes its device count when it starts, from XLA_FLAGS
(``--xla_force_host_platform_device_count=8``), so the sharding tests launch
this script with the flag set rather than touching the pytest process:

    python tests/jax_sharding_worker.py single OUT_DIR
    python tests/jax_sharding_worker.py multi OUT_DIR PORT PROCESS_ID

"single": one process, 8 devices: the digits MLP data-parallel on 4 and 8
devices, tensor-parallel on its hidden axis, 4x2 mixed, the char LSTM example
on its batch axis, and the errors of bad mappings. "multi": one of two
processes joined by jax.distributed (8 devices each): data-parallel over all
16 devices, 8x2 mixed, the same with process-local batches, and 8x2 with the
"model" axis spanning the two processes (no process holds a whole weight). Each writes
OUT_DIR/<name>.npz (the stored tensors of each run) and OUT_DIR/<name>.json
(losses, placements, error messages) for the test to compare with the NumPy
reference.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import jax  # noqa: E402
import numpy as np  # noqa: E402

import axgraph as ng  # noqa: E402
from axgraph.errors import AxgraphError  # noqa: E402
from axgraph.transformers import set_transformer_factory  # noqa: E402
from jax_sharding_models import canonical_name, digits_step, train  # noqa: E402


def mesh(shape, across=False):
    """A ("data", "model") mesh of the first devices; `across`: the devices of one process
    lie along "data" (so "model" spans the processes) rather than along "model"."""
    count = int(np.prod(shape))
    devices = np.array(jax.devices()[:count])
    grid = devices.reshape(shape[::-1]).T if across else devices.reshape(shape)
    return jax.sharding.Mesh(grid, ("data", "model"))


def fed_specs(transformer):
    """The PartitionSpec of each placeholder the transformer's computations were fed."""
    specs = {}
    for _, executable in transformer._compiled.values():
        for axes, what in executable.placement.parameters:
            if what.startswith("placeholder"):
                specs[what] = [None if s is None else str(s)
                               for s in transformer.sharding.spec(axes)]
    return specs


def placements(transformer, names):
    """For each stored tensor named: its PartitionSpec and its shards' shapes on this process."""
    found = {}
    stored = list(transformer.state)
    for tensor, value in transformer.state.items():
        name = canonical_name(tensor.name, stored)
        if name in names:
            array = getattr(value, "array", value)  # a GlobalValue holds a jax Array
            found[name] = {
                "spec": [None if s is None else str(s) for s in array.sharding.spec],
                "shards": sorted({tuple(s.data.shape) for s in array.addressable_shards}),
                "devices": len(array.sharding.device_set),
                # distinct parts of the array, on all processes and on this one
                "parts": len({str(i) for i in
                              array.sharding.devices_indices_map(array.shape).values()}),
                "parts_here": len({str(s.index) for s in array.addressable_shards})}
    return found


WEIGHTS = ("Affine_0_W", "Affine_0_b", "Affine_1_W", "Affine_1_b")


def run_mlp(shape, mapped, local=False, across=False):
    """Ten steps of the digits MLP on a mesh of `shape`, axes `mapped` ("N", "H") split."""
    model = digits_step()
    axes = {"N": (model.N, "data"), "H": (model.H, "model")}
    mapping = dict(axes[name] for name in mapped)
    with ng.make_transformer("jax", mesh=mesh(shape, across),
                             axis_mapping=mapping) as transformer:
        local_batch = None
        if local:
            rows = transformer.sharding.process_slice(model.N, model.N.length)
            local_batch = (model.batch["image"][:, rows], model.batch["label"][rows])
        losses, values = train(transformer, model, local_batch=local_batch)
        # a result split along N (over processes too): every process gets it whole
        per_example = transformer.computation(ng.sum(model.image * 2, out_axes=[model.N]),
                                              model.image)
        image = model.batch["image"]
        summed = per_example(image[:, rows], process_local=True) if local else per_example(image)
        report = {"losses": losses, "placements": placements(transformer, WEIGHTS),
                  "per_example_error": float(np.abs(summed - 2 * image.sum(0)).max()),
                  "per_example_shape": list(summed.shape),
                  "fed": sorted(fed_specs(transformer).values(), key=str)}
        if local:
            report["rows"] = [rows.start, rows.stop]
    return report, values


def error_of(call):
    try:
        call()
    except AxgraphError as error:
        return {"type": type(error).__name__, "message": error.message}
    return None


def bad_mappings():
    """The error of each mapping that cannot work, by name."""
    model = digits_step()
    errors = {
        "indivisible": error_of(lambda: ng.make_transformer(
            "jax", mesh=mesh((3, 1)), axis_mapping={model.N: "data"})),
        "unknown_mesh_axis": error_of(lambda: ng.make_transformer(
            "jax", mesh=mesh((4, 2)), axis_mapping={model.N: "batch"})),
        "not_an_axis": error_of(lambda: ng.make_transformer(
            "jax", mesh=mesh((4, 2)), axis_mapping={"N": "data"})),
    }
    # an axis whose length only the fed data gives: checked when a call binds it
    B = ng.make_axis(name="B")
    x = ng.placeholder([B])
    with ng.make_transformer("jax", mesh=mesh((4, 1)), axis_mapping={B: "data"}) as t:
        double = t.computation(x * 2, x)
        fine = double(np.arange(8, dtype=np.float32))
        errors["fed_indivisible"] = error_of(lambda: double(np.ones(6, np.float32)))
    errors["fed_fine"] = fine.tolist()
    # prints in a program split over 4 devices: each value whole, once, in program order
    with ng.make_transformer("jax", mesh=mesh((4, 1)), axis_mapping={B: "data"}) as t:
        printing = t.computation(ng.PrintOp(ng.PrintOp(x * 2, "doubled") + 1, "plus one"), x)
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            printed = printing(np.arange(8, dtype=np.float32))
        errors["print"] = {"stdout": shown.getvalue(), "result": printed.tolist()}
    return errors


def run_lstm():
    """examples/char_lstm.py, a few steps, its batch axis split over 4 devices."""
    from examples import char_lstm

    N = ng.make_axis(name="N")
    made = []

    def factory():
        transformer = ng.make_transformer("jax", mesh=mesh((4, 1)), axis_mapping={N: "data"})
        made.append(transformer)
        close = transformer.close

        def close_after_looking():
            made.append({"placements": placements(transformer, {"LSTM_0_W_i", "LSTM_0_U_i",
                                                                "LookupTable_0_W"}),
                         "fed": sorted(fed_specs(transformer).values(), key=str)})
            close()

        transformer.close = close_after_looking  # type: ignore[method-assign]
        return transformer

    set_transformer_factory(factory)
    result = char_lstm.train(epochs=2, steps=2, seq_len=8, batch=8, hidden=16, embed=8,
                             backend=None, sample_length=0, verbose=False, batch_axis=N)
    return {"losses": result["losses"], **made[-1]}


def run_fed_from_another_device():
    """A one-device transformer fed device arrays that live on another device: each call
    (the general route, then the planned one, then an array from a third device) moves them;
    returns (sums the step stored, the arrays' devices, the transformer's device)."""
    devices = jax.devices()
    N = ng.make_axis(6, name="N")
    x = ng.placeholder([N])
    total = ng.variable([N], initial_value=0.0)
    step = ng.sequential([ng.assign(total, total + 2 * x), total])
    rows = np.arange(18, dtype=np.float32).reshape(3, 6)
    with ng.make_transformer("jax", keep_on_device=True) as transformer:
        run = transformer.computation(step, x)
        stored = [np.asarray(run(jax.device_put(row, devices[device])))
                  for row, device in zip(rows, (3, 3, 5))]
        placed = sorted(d.id for d in transformer.state[total].devices())
    return {"stored": [s.tolist() for s in stored], "placed": placed,
            "rows": rows.tolist()}


def main(argv) -> int:
    mode, out = argv[0], Path(argv[1])
    runs = {}
    if mode == "single":
        runs["data4"] = run_mlp((4, 1), ["N"])
        runs["data8"] = run_mlp((8, 1), ["N"])
        runs["model8"] = run_mlp((1, 8), ["H"])
        runs["mixed4x2"] = run_mlp((4, 2), ["N", "H"])
        extra = {"errors": bad_mappings(), "lstm": run_lstm(),
                 "other_device": run_fed_from_another_device()}
        name = "single"
    else:
        port, process_id = argv[2], int(argv[3])
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=process_id)
        runs["data16"] = run_mlp((16, 1), ["N"])
        runs["mixed8x2"] = run_mlp((8, 2), ["N", "H"])
        runs["local8x2"] = run_mlp((8, 2), ["N", "H"], local=True)
        runs["across8x2"] = run_mlp((8, 2), ["N", "H"], across=True)
        extra = {"process": jax.process_index(), "devices": jax.device_count()}
        name = f"multi{process_id}"
    np.savez(out / f"{name}.npz", **{f"{run}/{tensor}": value for run, (_, values) in runs.items()
                                     for tensor, value in values.items()})
    report = {run: info for run, (info, _) in runs.items()}
    report.update(extra)
    (out / f"{name}.json").write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    assert "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "")
    sys.exit(main(sys.argv[1:]))
