"""An MLP written in TF (v0.4's "MNIST MLP"), trained by axgraph and by TF.

scikit-learn's 8x8 digits stand in for MNIST (nothing is downloaded): 64 pixels
per image, a hidden layer of rectified units, 10 classes. The weights start from
seeded random draws, which the importer takes from TF, so both runs start from the
same weights; they see the same batches, and their cost curves agree.

Run: ``python -m examples.tensorflow.mnist_mlp``
"""
from __future__ import annotations

import argparse
from typing import Iterator, List, Tuple

import numpy as np
import tensorflow.compat.v1 as tf

import axgraph.transformers as ngt
from axgraph.frontends.tensorflow import SGDOptimizer, TFImporter
from examples.digits_data import load_digits_split

tf.disable_v2_behavior()


def batches(batch_size: int, seed: int = 0) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
    """Endless batches of (flat images, one-hot labels) from the digits' training split."""
    (images, labels), _ = load_digits_split(seed)
    flat = images.reshape(len(images), -1)
    one_hot = np.eye(10, dtype=np.float32)[labels]
    order = np.random.default_rng(seed).permutation(len(flat))
    while True:
        for start in range(0, len(order) - batch_size + 1, batch_size):
            take = order[start:start + batch_size]
            yield flat[take], one_hot[take]


def mnist_mlp(max_iter: int = 10, lrate: float = 0.1, batch_size: int = 128, hidden: int = 32
              ) -> Tuple[List[float], List[float]]:
    """Train with axgraph, then with TF; returns (axgraph's costs, TF's costs)."""
    with tf.Graph().as_default() as graph:
        tf.set_random_seed(0)
        x = tf.placeholder(tf.float32, [batch_size, 64])
        t = tf.placeholder(tf.float32, [batch_size, 10])
        w1 = tf.Variable(tf.truncated_normal([64, hidden], stddev=0.1))
        b1 = tf.Variable(tf.zeros([hidden]))
        w2 = tf.Variable(tf.truncated_normal([hidden, 10], stddev=0.1))
        b2 = tf.Variable(tf.zeros([10]))
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        y = tf.matmul(h, w2) + b2
        cost = tf.reduce_mean(-tf.reduce_sum(t * tf.log(tf.nn.softmax(y)),
                                             reduction_indices=[1]))
        init = tf.global_variables_initializer()

    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    x_ng, t_ng, cost_ng, init_op_ng = importer.get_op_handle([x, t, cost, init])

    ng_cost_vals = []
    with ngt.make_transformer() as transformer:
        updates = SGDOptimizer(lrate).minimize(cost_ng, cost_ng.variables())
        train_comp = transformer.computation([cost_ng, updates], x_ng, t_ng)
        init_comp = transformer.computation(init_op_ng)
        init_comp()
        data = batches(batch_size)
        for idx in range(max_iter):
            batch_xs, batch_ys = next(data)
            cost_val, _ = train_comp(batch_xs, batch_ys)
            ng_cost_vals.append(float(cost_val))
            print(f"[axgraph iter {idx}] cost = {float(cost_val):.6f}")

    tf_cost_vals = []
    with graph.as_default(), tf.Session() as sess:
        train_step = tf.train.GradientDescentOptimizer(lrate).minimize(cost)
        sess.run(init)
        data = batches(batch_size)
        for idx in range(max_iter):
            batch_xs, batch_ys = next(data)
            cost_val, _ = sess.run([cost, train_step], feed_dict={x: batch_xs, t: batch_ys})
            tf_cost_vals.append(float(cost_val))
            print(f"[TF iter {idx}] cost = {float(cost_val):.6f}")
    return ng_cost_vals, tf_cost_vals


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-i", "--max_iter", type=int, default=10)
    parser.add_argument("-l", "--lrate", type=float, default=0.1, help="learning rate")
    parser.add_argument("-b", "--batch_size", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=32, help="hidden units")
    args = parser.parse_args()
    mnist_mlp(args.max_iter, args.lrate, args.batch_size, args.hidden)
