"""Training helpers of v0.4's TF examples: `SGDOptimizer`."""
from __future__ import annotations

from typing import Optional, Sequence

from ...op_graph.op import Op
from ..neon.optimizer import GradientDescentMomentum


class SGDOptimizer(GradientDescentMomentum):
    """Plain stochastic gradient descent, with v0.4's ``minimize`` spelling.

    ``theta' = theta - lrate * d(cost)/d(theta)`` for each variable, the step
    ``tf.train.GradientDescentOptimizer(lrate).minimize(cost)`` takes.

    Parameters
    ----------
    lrate : float
        The learning rate (>= 0).

    Raises
    ------
    OptimizerError
        If `lrate` is negative or not a number.
    """

    def __init__(self, lrate: float = 0.1):
        super().__init__(learning_rate=lrate)

    def minimize(self, cost: Op, variables: Optional[Sequence[Op]] = None) -> Op:
        """The op of one training step on `variables` (all the cost's, if None).

        Parameters
        ----------
        cost : Op
            A scalar cost.
        variables : sequence of Op, optional
            The variables to update; None: every trainable variable `cost` reads.

        Returns
        -------
        Op
            An op without a value; computing it (beside the cost) takes the step.
        """
        return self(cost, variables)
