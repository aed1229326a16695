"""The board catalogue: boards, their power modes and presets, the built-in workloads."""
