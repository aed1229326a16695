"""Power over the last minute, drawn with plotext."""
from __future__ import annotations

from .safeplot import SafePlot


class PowerPlot(SafePlot):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._last: tuple | None = None
        self.redraw = lambda: self.show(*self._last) if self._last else None

    def show(self, history: list[tuple[float, float | None]],
             title: str = "total power (W), last 60 s") -> None:
        self._last = (history, title)
        pts = [(t, p) for t, p in history if p is not None]
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        plt.xlim(-60, 0)
        if pts:
            xs, ys = zip(*pts)
            plt.plot(list(xs), list(ys), marker="braille")
            lo, hi = min(ys), max(ys)
            pad = max(1.0, 0.1 * (hi - lo))
            plt.ylim(max(0.0, lo - pad), hi + pad)
        plt.xlabel("seconds")
        self.refresh()
