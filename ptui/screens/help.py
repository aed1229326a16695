"""Help: keys and how ptui works."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# ptui — power modes for DNN training on Jetson

**Screens** — `1` Dashboard · `2` Profile · `3` Fine-tune · `4` Pareto · `5` Apply · `?` help ·
`q` quit · `ctrl+p` command palette (every action is there too). In a text field these keys are
text: `escape` leaves the field (`ctrl+q` quits from anywhere).

1. **Profile** ~50 power modes of your workload (PowerTrain protocol: apply, verify, drop the first
   minibatch, wait for stable power, record 40 clean minibatches). `space` pauses, `x` aborts
   (the original mode is restored), earlier sessions can be resumed.
2. **Fine-tune** the bundled reference predictors on that profile (transfer learning).
3. **Pareto**: every mode predicted; set a power budget or deadline, pick a mode on the front
   (arrow keys), read its time, power, energy and uncertainty.
4. **Apply** it: the exact plan, confirmation, read-back check, then measured power against the
   prediction. `r` rolls back.

On a machine without a Jetson everything runs on a **simulated** Orin AGX (shown as SIMULATED).

Press `escape` to close.
"""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="panel"):
            yield Markdown(HELP)
