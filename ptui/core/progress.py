"""Progress of a long job (a fit) as typed values: a face shows the words and reads the kind, and
never parses the words to learn what a step is."""
from __future__ import annotations

STAGE, NOTE, SAVING = "stage", "note", "saving"


def plural(n: int, word: str) -> str:
    """'1 mode', '2 modes', '3 forward passes': a count with its noun (the last word) in the
    number it takes."""
    return f"{n} {word}" + ("" if n == 1 else "es" if word.endswith("s") else "s")
KINDS = (STAGE, NOTE, SAVING)


class Step(str):
    """One progress line: its words (a Step is the string it says, so a face that prints progress
    needs nothing new) and its `kind`: STAGE where a new stage of the work begins (a progress bar
    counts it), NOTE for a note within the current stage, SAVING for the last step (the result is
    being written and is no longer cancelled)."""
    kind: str

    def __new__(cls, text: str, kind: str = NOTE) -> "Step":
        if kind not in KINDS:
            raise ValueError(f"unknown progress kind {kind!r}")
        s = super().__new__(cls, " ".join(str(text).split()))      # one line
        s.kind = kind
        return s

    @classmethod
    def of(cls, value) -> "Step":
        """`value` as a Step (a plain string is a note)."""
        return value if isinstance(value, Step) else cls(str(value))

    def line(self) -> str:
        """The step as one line for a pipe: its kind, a space, its words."""
        return f"{self.kind} {self}"

    @classmethod
    def from_line(cls, line: str) -> "Step":
        kind, _, text = line.partition(" ")
        return cls(text, kind) if kind in KINDS else cls(line)


def stage(text: str) -> Step:
    return Step(text, STAGE)


SAVING_STEP = Step("saving", SAVING)
