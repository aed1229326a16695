"""Devices and what ptui keeps on them: backends (simulated, sysfs, jtop, replay), the emulated
board, the simulator's physics, applying a mode, the undo records, locks, signals, files, CSVs, logs."""
