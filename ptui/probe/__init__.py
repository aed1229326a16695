"""What runs inside the training process: the optimizer-step probe (``hook``, installed through
``site/sitecustomize.py`` on the script's PYTHONPATH) and ptui's own plain-torch training loops for
real boards (``loops``; their names in ``names`` so the rest of ptui can list them without torch)."""
