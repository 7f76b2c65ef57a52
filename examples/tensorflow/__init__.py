"""Nervana Graph v0.4's TensorFlow importer examples, on TensorFlow 2's ``tf.compat.v1``."""
