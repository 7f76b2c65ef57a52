"""v0.4's path of `SGDOptimizer` (``ngraph.frontends.tensorflow.tf_importer.utils``)."""
from ..utils import SGDOptimizer

__all__ = ["SGDOptimizer"]
