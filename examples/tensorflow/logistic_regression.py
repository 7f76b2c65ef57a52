"""Logistic regression written in TF, trained by axgraph, then by TF for comparison.

Run: ``python -m examples.tensorflow.logistic_regression``
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import tensorflow.compat.v1 as tf

import axgraph as ng
import axgraph.transformers as ngt
from axgraph.frontends.tensorflow import SGDOptimizer

tf.disable_v2_behavior()

# four examples of three features, binary labels
XS = np.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15],
               [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]], np.float32)
YS = np.array([[1], [1], [0], [1]], np.float32)


def main(max_iter: int = 10, lrate: float = 0.1) -> Tuple[List[float], List[float]]:
    """Train both ways from the same start; returns (axgraph's costs, TF's costs)."""
    with tf.Graph().as_default() as graph:
        x = tf.placeholder(tf.float32, shape=(4, 3))
        t = tf.placeholder(tf.float32, shape=(4, 1))
        w = tf.Variable(tf.zeros([3, 1]))
        y = tf.nn.sigmoid(tf.matmul(x, w))
        log_likelihoods = tf.log(y) * t + tf.log(1 - y) * (1 - t)
        cost = -tf.reduce_sum(log_likelihoods)
        init_op = tf.global_variables_initializer()

    importer = ng.make_tf_importer()
    importer.import_graph_def(graph.as_graph_def())
    x_ng, t_ng, cost_ng, init_op_ng = importer.get_op_handle([x, t, cost, init_op])

    ng_costs = []
    with ngt.make_transformer() as transformer:
        updates = SGDOptimizer(lrate).minimize(cost_ng)
        train_comp = transformer.computation([cost_ng, updates], x_ng, t_ng)
        init_comp = transformer.computation(init_op_ng)
        init_comp()
        for idx in range(max_iter):
            loss_val, _ = train_comp(XS, YS)
            ng_costs.append(float(loss_val))
            print(f"[axgraph iter {idx}] cost = {float(loss_val):.6f}")

    tf_costs = []
    with graph.as_default(), tf.Session() as sess:
        train_step = tf.train.GradientDescentOptimizer(lrate).minimize(cost)
        sess.run(init_op)
        for idx in range(max_iter):
            cost_val, _ = sess.run([cost, train_step], feed_dict={x: XS, t: YS})
            tf_costs.append(float(cost_val))
            print(f"[TF iter {idx}] cost = {float(cost_val):.6f}")
    return ng_costs, tf_costs


if __name__ == "__main__":
    main()
