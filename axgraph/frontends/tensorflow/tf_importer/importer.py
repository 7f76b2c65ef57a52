"""v0.4's path of `TFImporter` (``ngraph.frontends.tensorflow.tf_importer.importer``)."""
from ..importer import TFImporter

__all__ = ["TFImporter"]
