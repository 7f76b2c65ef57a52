"""Training curves as a PNG: the loss (per step and per epoch) and the accuracy per epoch.

    history = fit(train_step, train_set, epochs=20, feed=..., evaluate=...)
    plot_history(history, "curves.png")

matplotlib is optional (``pip install axgraph[viz]``); it is imported when a
curve is drawn, on an Agg canvas (no GUI, no global backend switch).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Union

from ...debug_info import user_location
from ...errors import AxgraphError, AxgraphValueError
from .callbacks import MetricsHistory


class PlotError(AxgraphError, ImportError):
    """A curve was asked for but matplotlib is not installed."""


def _is_accuracy(name: str) -> bool:
    return "acc" in name.lower()


def plot_history(history: Union[MetricsHistory, Mapping[str, Sequence[float]]],
                 path: Union[str, "os.PathLike[str]"], metrics: Optional[Sequence[str]] = None,
                 title: Optional[str] = None) -> Path:
    """Write a PNG of the training curves: losses on the left, accuracies on the right.

    Metrics whose name contains "acc" are drawn in an accuracy panel beside
    the loss panel (which holds the others); each is one point per epoch. The
    per-step loss of a MetricsHistory is drawn faintly under the epoch means,
    at its place within the epochs.

    Parameters
    ----------
    history : MetricsHistory or dict of str to list of float
        What `fit` returned, or metric name -> one value per epoch.
    path : str or os.PathLike
        The PNG file to write (replaced if it exists).
    metrics : sequence of str or None, default None
        The metrics to draw; None draws them all.
    title : str or None, default None
        The figure's title.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    PlotError
        When matplotlib is not installed.
    AxgraphValueError
        When there is nothing to draw, or `metrics` names one the history lacks.

    Examples
    --------
    >>> import os, tempfile
    >>> curves = {"loss": [1.0, 0.6, 0.4], "val_acc": [0.5, 0.7, 0.8]}
    >>> path = plot_history(curves, os.path.join(tempfile.mkdtemp(), "curves.png"))
    >>> path.read_bytes()[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
    True
    """
    per_epoch: Dict[str, List[float]]
    if isinstance(history, MetricsHistory):
        per_epoch, epochs = history.history, list(history.epochs)
        step_losses = list(history.steps.get("loss", []))
    else:
        per_epoch, step_losses = {str(k): list(v) for k, v in history.items()}, []
        epochs = list(range(max((len(v) for v in per_epoch.values()), default=0)))
    names = list(per_epoch) if metrics is None else list(metrics)
    unknown = [name for name in names if name not in per_epoch]
    if unknown:
        raise AxgraphValueError(f"plot_history: no metric {unknown[0]!r} in the history; it has "
                                f"{sorted(per_epoch)}", user_location())
    if not names or not any(per_epoch[name] for name in names):
        raise AxgraphValueError("plot_history: the history holds no values to draw (train "
                                "for an epoch first)", user_location())
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError("plot_history needs matplotlib: pip install axgraph[viz] (or pip "
                        "install matplotlib)", user_location()) from None

    accuracies = [name for name in names if _is_accuracy(name)]
    losses = [name for name in names if not _is_accuracy(name)]
    panels = [group for group in (losses, accuracies) if group]
    figure = Figure(figsize=(5.5 * len(panels), 4), dpi=100)
    FigureCanvasAgg(figure)
    x_epochs = [epoch + 1 for epoch in epochs]
    for index, group in enumerate(panels, 1):
        axes = figure.add_subplot(1, len(panels), index)
        if group is losses and "loss" in group and step_losses and x_epochs:
            first = x_epochs[0] - 1
            per_step = len(step_losses) / max(len(x_epochs), 1)
            axes.plot([first + (i + 1) / per_step for i in range(len(step_losses))], step_losses,
                      color="tab:blue", alpha=0.3, linewidth=0.8, label="loss (per step)")
        for name in group:
            values = per_epoch[name]
            axes.plot(x_epochs[:len(values)], values, marker="o", markersize=3, label=name)
        axes.set_xlabel("epoch")
        axes.set_ylabel("accuracy" if group is accuracies else "loss")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    target = Path(os.fspath(path))
    figure.savefig(target, format="png")
    return target


__all__ = ["PlotError", "plot_history"]
