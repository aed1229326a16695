"""ptui: pick the right power mode for DNN training on NVIDIA Jetson (PowerTrain)."""
__version__ = "0.1.0"
