import os; os.environ["TF_CPP_MIN_LOG_LEVEL"]="3"
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
from axgraph.frontends.tensorflow import static_values as sv
with tf.Graph().as_default() as graph:
    x = tf.placeholder(tf.float32, (3, 4))
    v = tf.placeholder(tf.float32, (4,))
    y = tf.reduce_sum(tf.square(x - v), reduction_indices=[1], keep_dims=True)
    z = tf.reduce_mean(tf.sqrt(y + 1.0) * tf.exp(-tf.reshape(tf.transpose(x), [2, 6])[0, 0]))
    g= tf.gradients(z, [x, v])
for op in graph.get_operations():
    print(op.name, op.type, [t.name for t in op.inputs], [c.name for c in op.control_inputs], [str(t.shape) for t in op.outputs])
known=set()
for op in graph.get_operations():
    if not op.outputs or not all(sv._plain_dtype(t.dtype) for t in op.outputs): continue
    if op.type in sv.SHAPE_OPS and all(t.shape.is_fully_defined() for t in op.inputs):
        print("FEED", op.name, [t.name for t in op.inputs])
        known.add(op.name)
    elif op.type == "Const" or (op.inputs and op.type not in sv.FED_OPS and not op.op_def.is_stateful and all(t.op.name in known for t in op.inputs) and all(c.name in known for c in op.control_inputs)):
        if op.type!="Const": print("FETCH", op.name, op.type, [t.name for t in op.inputs])
        known.add(op.name)
