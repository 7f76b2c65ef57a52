"""Import rules for networks: convolutions and pooling of channels-first images (on the
image rules the importers share), and the negative log likelihood loss."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import torch

from ..images import grouped_window_op, pooled
from ..positional import in_order, relabelled
from .errors import TorchBridgeError, node_location, node_source
from .exported_rules import bridge_check, import_rule
from .ops_nn import conv_window, pool_window
from .registry import Arguments, op_name

if TYPE_CHECKING:
    from .exported import Importer

aten = torch.ops.aten


# -- images ---------------------------------------------------------------------------------


def _no_output_padding(node: Any) -> Optional[str]:
    output_padding = node.args[7] if len(node.args) > 7 else [0]
    return "output_padding" if any(output_padding) else None


@import_rule(aten.convolution.default, check=_no_output_padding)
def _convolution(importer: Importer, node: Any, args: Arguments) -> Any:
    """A (transposed, grouped) convolution of NC(D)HW images, on the shared image rules."""
    x = args.input
    geometry = conv_window(args, len(x.axes) - 2)
    try:
        y = grouped_window_op(x, args.weight, args.groups, importer.unique_name, node.name,
                              bool(args.transposed), geometry["padding_below"],
                              geometry["strides"], geometry["dilation"])
    except ValueError as error:
        raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}): "
                               f"{error}", node_location(node)) from None
    if args.bias is None:
        return y
    return in_order(y + relabelled(args.bias, [y.axes[1]]), list(y.axes))


@import_rule(aten.max_pool2d_with_indices.default,
            check=bridge_check(aten.max_pool2d_with_indices.default))
def _max_pool(importer: Importer, node: Any, args: Arguments) -> Any:
    """The maxima; their indices (for a gradient) are not imported."""
    kernel, stride, padding = pool_window(args, 2)
    return pooled(args.self, "max", kernel, stride, padding, importer.unique_name,
                  node.name), None


@import_rule(aten.avg_pool2d.default, check=bridge_check(aten.avg_pool2d.default))
def _avg_pool(importer: Importer, node: Any, args: Arguments) -> Any:
    """Torch's default counts the padding in each mean (``count_include_pad``)."""
    kernel, stride, padding = pool_window(args, 2)
    return pooled(args.self, "avg", kernel, stride, padding, importer.unique_name, node.name,
                  count_padding=bool(args.count_include_pad))


# -- losses ---------------------------------------------------------------------------------


@import_rule(aten.nll_loss_forward.default)
def _nll_loss(importer: Importer, node: Any, args: Arguments) -> Any:
    """(loss, total weight): minus each target's score, weighted (0 at ignore_index),
    then summed or averaged over the total weight as `reduction` (0, 1, 2) asks."""
    ng = importer.ng
    scores, target = args.self, args.target
    batch = list(scores.axes)[:-1] if len(scores.axes) == 1 else [scores.axes[0]]
    classes = scores.axes[-1] if len(scores.axes) == 1 else scores.axes[1]
    target = relabelled(target, batch[:len(target.axes)])
    kept = ng.not_equal(target, args.ignore_index)
    safe = ng.where(kept, target, 0)
    weights = ng.multiply(kept, 1, dtype=scores.dtype)
    if args.weight is not None:
        weights = weights * ng.lookuptable(relabelled(args.weight, [classes]), safe)
    picked = ng.sum(scores * ng.one_hot(safe, classes, dtype=scores.dtype),
                    reduction_axes=[classes])
    losses = in_order(-(picked * weights), list(target.axes))
    total = ng.sum(weights, reduction_axes=list(weights.axes)) if weights.axes else weights
    if args.reduction == 0:
        return losses, total
    summed = ng.sum(losses, reduction_axes=list(losses.axes)) if losses.axes else losses
    return (summed if args.reduction == 2 else summed / total), total


__all__: list = []
