"""Help: keys and how ptui works."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
**ptui — power modes for DNN training on Jetson**

`1`–`6` screens · `?` help · `q` quit · `ctrl+p` actions. In a text field these keys
are text: `escape` leaves it (`ctrl+q` quits from anywhere).

1. **Dashboard**: live power per rail, clocks, temperatures.
2. **Profile** ~50 modes (batch `8,16,32`: pairs): `s` start, `space` pause,
   `x` abort (the original mode comes back); or resume one.
3. **Fine-tune** (`t`) predictors of time and power on that profile.
4. **Pareto**: `l` loads, `g` sets the goal that picks a mode (`b`: batch
   sizes); arrows move on the front; `enter` takes it to Apply.
5. **Apply**: `y` applies and reads back, `r` rolls back, `s` keeps it at boot.
6. **Colocate** training + inference: `d` picks mode and batch, `r` demo.

**CV MAPE**: mean absolute percentage error of predictions for modes held out of
the fit (5-fold cross-validation). **risk 0.05**: a mode is chosen only if the
chance that it goes over the budget (or deadline) is at most 5 %. **P(meets the
goal)**: the model's probability that a mode is within the budget or deadline.
Without a Jetson, ptui runs a **simulated** Orin AGX (labelled SIMULATED).
"""


class HelpScreen(ModalScreen):
    # never taller than the terminal: at 80x24 it all shows; smaller, it scrolls
    DEFAULT_CSS = "HelpScreen > VerticalScroll { max-height: 100%; }"
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="panel"):
            yield Markdown(HELP)
