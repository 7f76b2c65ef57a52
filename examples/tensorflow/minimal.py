"""The smallest import: a TF sum of two constants, computed by axgraph.

Run: ``python -m examples.tensorflow.minimal``
"""
from __future__ import annotations

import tensorflow.compat.v1 as tf

import axgraph as ng
import axgraph.transformers as ngt

tf.disable_v2_behavior()


def main() -> float:
    """Build ``1 + 2`` in TF, import it, compute it with axgraph; returns the result."""
    with tf.Graph().as_default() as graph:
        x = tf.constant(1.)
        y = tf.constant(2.)
        f = x + y

    importer = ng.make_tf_importer()
    importer.import_graph_def(graph.as_graph_def())
    f_ng = importer.get_op_handle(f)

    with ngt.make_transformer() as transformer:
        result = transformer.computation(f_ng)()
    print(result)
    return float(result)


if __name__ == "__main__":
    main()
