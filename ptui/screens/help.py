"""Help: keys and how ptui works."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
**ptui — power modes for DNN training on Jetson**

**Screens** `1`–`5` · `?` help · `q` quit · `ctrl+p` every action. In a text field these
keys are text: `escape` leaves the field (`ctrl+q` quits from anywhere).

1. **Profile** ~50 power modes of your workload (PowerTrain protocol: apply, verify, drop the
   first minibatch, wait for stable power, time 40 minibatches). `space` pauses, `x` aborts
   (the original mode comes back); unfinished sessions can be resumed.
2. **Fine-tune** predictors of time and power on that profile.
3. **Pareto**: every mode predicted; set a budget or deadline, move on the front with the
   arrow keys, read time, power, energy and their uncertainty.
4. **Apply**: the exact plan, `y` to confirm, read-back check, then the measured power next
   to the prediction; `r` rolls back.

Without a Jetson everything runs on a **simulated** Orin AGX (shown as SIMULATED).
`escape` closes this help.
"""


class HelpScreen(ModalScreen):
    # never taller than the terminal: at 80x24 it all shows; smaller, it scrolls
    DEFAULT_CSS = "HelpScreen > VerticalScroll { max-height: 100%; }"
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="panel"):
            yield Markdown(HELP)
