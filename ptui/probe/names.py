"""Names of the built-in torch training loops (importable without torch)."""
BUILTIN = ("resnet18", "mobilenetv3", "lstm", "bert-base")
