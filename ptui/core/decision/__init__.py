"""Decision: the candidates table, the Pareto front, goals as values, batch size as a knob."""
