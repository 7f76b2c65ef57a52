"""Nervana Graph v0.4's module paths of the TensorFlow importer, so its programs run with
``ngraph`` renamed ``axgraph``: ``tf_importer.importer.TFImporter`` and
``tf_importer.utils.SGDOptimizer`` are `axgraph.frontends.tensorflow`'s."""
