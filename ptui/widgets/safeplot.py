"""A plotext plot that survives terminal resizes.

plotext keeps state from its last build: after the terminal shrank, building the same figure at
the new size raised IndexError (legend) or ValueError (log axis) inside Textual's render and took
the whole app down.  SafePlot redraws its figure from its owner's data at every new size, and a
figure that still cannot be built is replaced by one line saying so, never by a crash."""
from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual_plotext import PlotextPlot


class SafePlot(PlotextPlot):
    def __init__(self, *args, redraw: Callable[[], None] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.redraw = redraw
        """Re-creates the figure from the owner's data (called when the size changed)."""
        self._built_size = None

    def render(self):
        if self.redraw is not None and self._built_size not in (None, self.size):
            try:
                self.redraw()
            except Exception:  # noqa: BLE001 - a plot never takes the app down
                pass
        self._built_size = self.size
        try:
            return super().render()
        except (IndexError, ValueError, ZeroDivisionError, OverflowError):
            return Text("(the plot does not fit at this size)", style="dim")
